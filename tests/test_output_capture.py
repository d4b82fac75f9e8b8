"""A job's output capture (``OutputCapture``): what the job prints goes to its log, and a child process the job
started that prints after the capture has ended writes nowhere it should not."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from labcore.execution.attempt import OutputCapture


class Lines:
    """A sink that keeps the lines it is given."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def log(self, message: str, source: str = "worker") -> None:
        self.lines.append((source, message))


def test_a_child_printing_after_the_capture_ended_never_writes_into_a_file_opened_since(tmp_path):
    sink = Lines()
    go = tmp_path / "go"
    # A child that inherits the captured output and prints only when told to, once the capture has ended (a
    # compile or data-loading worker the engine started can outlive the job so).
    script = ("import pathlib, time\n"
              f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.01)\n"
              "print('late line from the child', flush=True)\n")
    with OutputCapture(sink, join_s=0.05) as capture:
        child = subprocess.Popen([sys.executable, "-c", script])
        os.write(1, b"early line\n")  # the descriptor itself: pytest holds sys.stdout
    # The files a worker opens next (a checkpoint, the store) take the lowest free descriptor numbers.
    paths = [tmp_path / f"file{i}" for i in range(8)]
    files = [open(path, "wb") for path in paths]
    try:
        go.touch()
        assert child.wait(timeout=60) == 0
        for thread in capture._threads:
            thread.join(timeout=60)  # the child's end closes the pipe: its pump ends
            assert not thread.is_alive()
    finally:
        for file in files:
            file.close()
    assert [path.name for path in paths if b"late line" in path.read_bytes()] == []
    # the job's log has both lines, the late one too
    assert ("stdout", "early line") in sink.lines and ("stdout", "late line from the child") in sink.lines


def test_what_a_job_prints_reaches_its_log_and_the_descriptors_come_back(tmp_path):
    sink = Lines()
    before = os.fstat(1).st_ino, os.fstat(2).st_ino
    with OutputCapture(sink, join_s=5.0):
        os.write(1, b"to stdout\n")  # the descriptors themselves: pytest holds sys.stdout and sys.stderr
        os.write(2, b"to stderr\n")
        subprocess.run([sys.executable, "-c", "print('from a child')"], check=True)
    deadline = time.monotonic() + 30
    while len(sink.lines) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(sink.lines) == [("stderr", "to stderr"), ("stdout", "from a child"), ("stdout", "to stdout")]
    assert (os.fstat(1).st_ino, os.fstat(2).st_ino) == before
