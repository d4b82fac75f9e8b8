"""Files a kill cannot tear: a checkpoint a reader can see always loads, whenever its writer was killed."""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from labcore import durable
from labcore.errors import LabError
from labcore.jobs import JobContext

# A child that keeps saving checkpoints of its kind through the job-kind API, each larger than a pipe's or a
# page's worth (so a write takes many system calls a kill can land between), continuing from the last one.
WRITER = """
import sys
from pathlib import Path
from labcore.jobs import JobContext

ctx = JobContext(workdir=Path(sys.argv[1]), checkpoint="state.json", resume=Path(sys.argv[1], "state.json").exists())
i = ctx.load_checkpoint()["i"] if ctx.resume else 0
print("ready", flush=True)
while True:
    i += 1
    ctx.save_checkpoint({"i": i, "pad": [i] * 40_000})
"""


def _check(state: dict) -> int:
    assert state["pad"] == [state["i"]] * 40_000, "a checkpoint holds parts of two writes"
    return state["i"]


def test_a_checkpoint_killed_at_random_points_always_loads(tmp_path):
    rng = random.Random(43)
    ctx = JobContext(workdir=tmp_path, checkpoint="state.json")
    last = 0
    for _ in range(25):
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.25))  # somewhere inside one of the many writes
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        if (tmp_path / "state.json").exists():
            i = _check(ctx.load_checkpoint())
            assert i >= last, "a kill took the checkpoint back to an older one"
            last = i
    assert last > 25, f"the writers saved only {last} checkpoints: the kills did not land among writes"
    # Whatever a kill left behind is a temporary file, never the checkpoint's own name.
    assert all(p.name == "state.json" or p.name.endswith(".tmp") for p in tmp_path.iterdir())


def test_a_refused_commit_leaves_the_old_file_and_no_temporary(tmp_path):
    path = durable.write_json(tmp_path / "x.json", {"v": 1})

    def refuse(tmp, final):
        raise RuntimeError("superseded")

    with pytest.raises(RuntimeError):
        durable.write_json(path, {"v": 2}, refuse)
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_loading_a_missing_or_broken_checkpoint_names_the_file_and_the_fix(tmp_path):
    ctx = JobContext(workdir=tmp_path, checkpoint="state.json")
    with pytest.raises(LabError, match="state.json is missing.*rerun"):
        ctx.load_checkpoint()
    (tmp_path / "state.json").write_text("")
    with pytest.raises(LabError, match="does not load.*delete it"):
        ctx.load_checkpoint()
    with pytest.raises(LabError, match="keeps no checkpoint"):
        JobContext(workdir=tmp_path).save_checkpoint({})


def test_the_commit_goes_through_the_callers_rename(tmp_path):
    seen = []

    def commit(tmp, final):
        seen.append((tmp.name, final.name))
        os.replace(tmp, final)

    JobContext(workdir=tmp_path, checkpoint="c.json", commit_file=commit).save_checkpoint({"i": 1})
    assert seen == [(f".c.json.{threading.get_native_id()}.{os.getpid()}.tmp", "c.json")]
    assert Path(tmp_path / "c.json").read_text() == '{"i": 1}'


def test_a_cached_array_is_written_whole_under_its_own_name(tmp_path):
    import numpy as np

    from labcore.pretrain.vocab import cached_array

    built = cached_array(tmp_path / "counts.npy", lambda: np.arange(5))
    assert list(cached_array(tmp_path / "counts.npy", lambda: np.zeros(1))) == list(built) == [0, 1, 2, 3, 4]
    assert [p.name for p in tmp_path.iterdir()] == ["counts.npy"]


def test_a_writer_that_fails_on_a_full_disk_without_saying_so_fails_as_a_full_disk(tmp_path, monkeypatch):
    import errno
    import shutil
    from collections import namedtuple

    from labcore.store import health

    def torch_like(tmp):
        tmp.write_bytes(b"PK")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 24931264 vs 24931192")

    with pytest.raises(RuntimeError):  # room on the disk: the writer's own error stands
        durable.write_file(tmp_path / "resume.pt", torch_like)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage(2**30, 2**30 - 2**20, 2**20))
    with pytest.raises(OSError) as raised:
        durable.write_file(tmp_path / "resume.pt", torch_like)
    assert raised.value.errno == errno.ENOSPC and health.is_disk_full(raised.value)
    assert list(tmp_path.iterdir()) == []  # nothing half-written left


def test_an_attempt_clears_what_a_killed_writer_left_and_keeps_a_live_ones(tmp_path):
    from labcore import jobs
    from labcore.execution.attempt import run_attempt

    sys.path.insert(0, str(Path(__file__).resolve().parent / "kinds"))
    jobs.load_modules("toy_jobs")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = tmp_path / f".resume.pt.{gone.pid}.tmp"
    live = tmp_path / f".resume.pt.{os.getppid()}.tmp"  # a writer still running (this test's parent)
    left.write_bytes(b"half")
    live.write_bytes(b"half")
    list(run_attempt("count", {"n": 1}, JobContext(workdir=tmp_path), store_root=tmp_path, min_free_mb=0))
    assert not left.exists() and live.exists()


def test_two_threads_writing_one_file_at_once_leave_one_of_their_files_whole(tmp_path):
    """The app serves every browser from threads of one process: two tabs of one student (or of the teacher) can
    write the same seat or sitting at the same moment. Each write must still land whole or not at all."""
    path = tmp_path / "seat.json"
    values = [{"writer": w, "note": str(w) * 200_000} for w in range(2)]
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def writer(value) -> None:
        try:
            start.wait()
            for _ in range(40):
                durable.write_json(path, value)
        except BaseException as error:  # noqa: BLE001 - the test reports whatever a writer raised
            errors.append(error)

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns inside each write
    try:
        threads = [threading.Thread(target=writer, args=(value,)) for value in values]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        sys.setswitchinterval(before)
    assert errors == []
    assert json.loads(path.read_text()) in values
    assert [p.name for p in tmp_path.iterdir()] == ["seat.json"]  # no temporary left behind
