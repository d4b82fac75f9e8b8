"""A 50 MB CSV upload through the Data page's own path: time and peak memory of the saving process.

Writes a real CSV of DNA-like sequences (A, C, G, T; 60 to 399 symbols, a class motif planted in
each) and labels, just under the lab's 50 MB upload limit, into a temporary folder that also holds
the bench's own lab cache. Then, each time through ``labcore.data.upload.start_save`` (what the
Data page calls: the file is parsed by a subprocess that is polled):

1. ``default caps``: the lab's caps. The file holds ~48 M symbols, over the 20 M cap on total
   symbols, so it must be refused at once, with the cap named.
2. ``caps raised``: the same file with the row and symbol caps raised past it, so all of it is
   parsed and saved: the streaming parser's full cost on 50 MB.
3. ``data show`` (``python -m labcore data show upload:NAME``) on the upload saved in 2, a fresh
   process: it builds the Arrow data set from the saved examples and summarises it.

``--short-rows`` writes 10.5 M rows of 2 symbols instead (the shape of the file in issue 12: millions
of tiny rows), which the row cap refuses.

Peak memory is the subprocess's peak resident set (``ru_maxrss`` from ``wait4``, the same kernel
figure ``getrusage(RUSAGE_CHILDREN)`` reports, which is printed at the end as the maximum over all
children). Target for the save: <= 15 s and <= 1 GB, or refused at once with the cap named.
Last line: ``upload default_s=<x> default_peak_mb=<y> raised_s=<x> raised_peak_mb=<y> show_s=<z>``
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET_S = 15.0
TARGET_PEAK_MB = 1024.0
CLASSES = {"promoter": "TATAAT", "enhancer": "GGGCGG", "silencer": "ATTTGC", "insulator": "CCGCGG"}


def write_csv(path: Path, size: int, seed: int = 0, short_rows: bool = False) -> int:
    """A CSV of about ``size`` bytes; returns its row count."""
    import numpy as np

    rng = np.random.default_rng(seed)
    names = list(CLASSES)
    rows = 0
    with open(path, "wb") as out:
        out.write(b"sequence,label\n")
        written = len(b"sequence,label\n")
        while written < size:
            lines = []
            if short_rows:  # "GA,p\n": 5 bytes a row, 100,000 rows at a time
                letters = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, size=(100_000, 2))]
                initials = np.frombuffer(b"pesi", dtype=np.uint8)[rng.integers(0, 4, size=(100_000, 1))]
                block = np.concatenate([letters, np.full((100_000, 1), ord(","), np.uint8), initials,
                                        np.full((100_000, 1), ord("\n"), np.uint8)], axis=1)
                lines.append(block.tobytes().decode())
            for _ in range(0 if short_rows else 1000):
                label = names[rng.integers(len(names))]
                length = int(rng.integers(60, 400))
                sequence = bytearray(b"ACGT"[i] for i in rng.integers(0, 4, size=length))
                at = int(rng.integers(0, length - 6))
                sequence[at:at + 6] = CLASSES[label].encode()
                lines.append(f"{sequence.decode()},{label}\n")
            chunk = "".join(lines).encode()
            if written + len(chunk) > size:
                chunk = chunk[:chunk.rfind(b"\n", 0, size - written) + 1]
                if not chunk:
                    break
            out.write(chunk)
            written += len(chunk)
            rows += chunk.count(b"\n")
    return rows


def save(name: str, path: Path, limits) -> tuple[float, float, str]:
    from labcore.data import upload

    data = path.read_bytes()  # the page holds the uploaded bytes, as Streamlit hands them over
    started = time.perf_counter()
    result = upload.start_save(name, path.name, data, limits=limits).wait(poll_s=0.02)
    seconds = time.perf_counter() - started
    peak_mb = result.peak_rss_bytes / 2**20
    outcome = (f"saved {result.info.n_examples:,} examples, {sum(result.info.class_counts):,} labelled"
               if result.info else f"refused: {result.error}")
    return seconds, peak_mb, outcome


def data_show(name: str) -> tuple[float, float, str]:
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "labcore", "data", "show", f"upload:{name}"],
                               cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    output = process.stdout.read()
    _pid, status, usage = os.wait4(process.pid, 0)  # this child's own peak, not the largest so far
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    peak_mb = usage.ru_maxrss / 1024
    lines = [line for line in output.splitlines() if "sequences:" in line or "length" in line]
    return seconds, peak_mb, "; ".join(line.strip() for line in lines) or output[-300:]


def verdict(seconds: float, peak_mb: float, outcome: str) -> str:
    if outcome.startswith("refused"):
        return "refused at once" if seconds <= TARGET_S else "refused, but slowly"
    ok = seconds <= TARGET_S and peak_mb <= TARGET_PEAK_MB
    return "within target" if ok else "OVER TARGET"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--short-rows", action="store_true", help="10.5 M rows of 2 symbols instead")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (printed)")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="bench-upload-"))
    os.environ["TRANSFERLAB_CACHE"] = str(folder / "cache")
    from labcore.data.upload import UploadLimits

    try:
        csv_path = folder / "sequences.csv"
        limits = UploadLimits()
        started = time.perf_counter()
        rows = write_csv(csv_path, limits.max_bytes - 4096, short_rows=args.short_rows)
        size = csv_path.stat().st_size
        print(f"wrote {csv_path.name}: {size / 2**20:.1f} MB, {rows:,} rows "
              f"({time.perf_counter() - started:.1f} s)")

        default = save("bench-default", csv_path, limits)
        print(f"default caps: {default[0]:.1f} s, peak {default[1]:.0f} MB: {default[2]} "
              f"[{verdict(*default)}]")
        raised_limits = UploadLimits(max_rows=20_000_000, max_total_symbols=100_000_000)
        raised = save("bench-raised", csv_path, raised_limits)
        print(f"caps raised:  {raised[0]:.1f} s, peak {raised[1]:.0f} MB: {raised[2]} [{verdict(*raised)}]")
        show = (0.0, 0.0, "(nothing saved)")
        if raised[2].startswith("saved"):
            show = data_show("bench-raised")
            print(f"data show:    {show[0]:.1f} s, peak {show[1]:.0f} MB: {show[2]}")
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"largest peak of any child process (getrusage RUSAGE_CHILDREN): {children:.0f} MB")
        print(f"upload default_s={default[0]:.2f} default_peak_mb={default[1]:.0f} raised_s={raised[0]:.2f} "
              f"raised_peak_mb={raised[1]:.0f} show_s={show[0]:.2f}")
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
