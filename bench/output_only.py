"""Epoch time of `output_only` (FPT §3.9: features computed once, a linear head trained on them)
against `frozen` (every epoch runs the frozen body forward and backward), MiniLM on dna-splice.

The output-only epoch time is measured after the first epoch (the first pays for the features).
Last line: output_only speedup=<x>
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def epoch_times(protocol: str, epochs: int) -> tuple[list[float], float]:
    """Seconds per epoch (from step-event timestamps) and the time before the first step."""
    from labcore.engine.run import iter_run
    from labcore.runspec import make_spec

    spec = make_spec(model="minilm", discipline="dna-splice", protocol=protocol, epochs=float(epochs),
                     eval_every=10**9)
    marks: list[float] = []
    start = time.perf_counter()
    first_step = None
    per_epoch = None
    for event in iter_run(spec):
        if event["type"] == "start":
            per_epoch = -(-event["train_examples"] // 32)
        if event["type"] == "step":
            now = time.perf_counter()
            if first_step is None:
                first_step = now
            if event["step"] % per_epoch == 0:
                marks.append(now)
    boundaries = [first_step] + marks
    return [b - a for a, b in zip(boundaries, boundaries[1:])], first_step - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    frozen, _ = epoch_times("frozen", 1)
    print(f"frozen: {frozen[0]:.2f} s per epoch", flush=True)
    output, setup = epoch_times("output_only", args.epochs)
    later = output[1:] or output
    mean_later = sum(later) / len(later)
    print(f"output_only: features + setup {setup:.2f} s, first epoch {output[0]:.3f} s, "
          f"later epochs {mean_later:.4f} s each", flush=True)
    print(f"output_only speedup={frozen[0] / mean_later:.1f}")


if __name__ == "__main__":
    main()
