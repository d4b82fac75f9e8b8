"""Pilot a miniature's reference arm at its candidate sizes, cheapest first, and write the curve it learnt.

    nice -n 10 python bench/pilot.py NAME [--all-sizes] [--seeds 0] [--out FILE]

NAME is one of :data:`labcore.recipes.miniatures.MINIATURES` (fpt-memory, fpt-xor, chiang-sentiment). Each size
trains the reference arm (a run no headline claim compares: see the miniature's ``reference``) on one torch thread,
seeded, in this process, and prints its validation curve and test score; the pilot stops at the first size that
the rule accepts (``--all-sizes`` runs every one). The numbers go to ``labcore/recipes/data/pilot-NAME.json``
(the report and docs/recipes.md show them), with the size the rule picks, so the choice can be checked and
redone; the recipe reads the choice from the miniature's ``chosen``, set in a commit before any run reads a claim.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("OMP_NUM_THREADS", "1")

from labcore import jobs  # noqa: E402
from labcore.recipes.miniature import Miniature, pick, pilot_path  # noqa: E402
from labcore.recipes.miniatures import MINIATURES  # noqa: E402
from labcore.recipes.report import task_floor  # noqa: E402
from labcore.runspec import make_spec  # noqa: E402


def run_here(spec: Any) -> dict[str, Any]:
    """Run one job spec (a run or a pretraining) in this process on one thread; its result record."""
    job = jobs.new_job(spec)
    kind = jobs.get_kind(job.kind)
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        context = jobs.JobContext(workdir=Path(folder), threads=1, checkpoint=kind.checkpoint)
        for event in kind.handler(kind.from_dict(job.spec), context):
            if event["type"] == "result":
                result = event["record"]
    return result


def lab_model(name: str) -> str:
    """``lab:flat`` -> the quick budget's flat pretraining of Chiang's recipe, pretrained here if it is not yet."""
    from labcore.models.model_names import MADE_HERE
    from labcore.paths import cache_dir
    from labcore.recipes import chiang

    spec = chiang.pretrain_spec(chiang.BUDGETS["quick"], name, lambda s: s)
    if not (cache_dir() / "models" / f"{MADE_HERE['lab']}{spec.name}").exists():
        started = time.time()
        record = run_here(spec)
        print(f"pretrained lab:{spec.name} in {time.time() - started:.0f} s: held-out masked accuracy "
              f"{record.get('eval_accuracy')}", flush=True)
    return f"lab:{spec.name}"


def reference_spec(miniature: Miniature, label: str, seed: int):
    fields = dict(miniature.arm, discipline=miniature.task, seed=seed, **miniature.size(label).fields())
    if str(fields["model"]).startswith("lab:") and fields["model"] == "lab:flat":
        fields["model"] = lab_model("flat")
    return make_spec(**fields)


def score(record: dict[str, Any]) -> float | None:
    test = record.get("test") or {}
    return test.get(record.get("metric") or "", next(iter(test.values()), None))


def floor_of(miniature: Miniature, spec: Any, record: dict[str, Any]) -> float:
    trivial = task_floor(spec)
    majority = (record.get("baseline") or {}).get("majority")
    return trivial[0] if trivial else float(majority) if majority is not None else miniature.floor


def pilot(miniature: Miniature, seeds: tuple[int, ...], every_size: bool, before: dict[str, Any],
          save: Any = lambda numbers: None) -> dict[str, Any]:
    """Run the sizes cheapest first; a size ``before`` (the data file's numbers) holds for the same seeds is kept as
    measured, not trained again (a pilot stopped part way goes on where it was); ``save`` writes the numbers after
    each size."""
    numbers: dict[str, Any] = {"miniature": miniature.name, "reference arm": miniature.reference,
                               "rule": miniature.rule_text, "seeds": list(seeds), "machine": platform.processor()
                               or platform.machine(), "date": time.strftime("%Y-%m-%d"), "sizes": {}}
    kept = before.get("sizes", {}) if before.get("seeds") == list(seeds) else {}
    for size in miniature.sizes:
        if size.label in kept:
            numbers["sizes"][size.label] = kept[size.label]
            print(f"{size.label}: as measured before, test {kept[size.label]['test']}", flush=True)
            numbers["chosen"] = pick(miniature, numbers)
            if numbers["chosen"] and not every_size:
                break
            continue
        rows = []
        for seed in seeds:
            spec = reference_spec(miniature, size.label, seed)
            started = time.time()
            record = run_here(spec)
            rows.append(dict(seed=seed, test=score(record), val_curve=record.get("val_curve"),
                             floor=floor_of(miniature, spec, record), wall_s=round(time.time() - started, 1),
                             steps=record.get("steps_done")))
            print(f"{size.label}, seed {seed}: test {rows[-1]['test']}, floor {rows[-1]['floor']}, "
                  f"{rows[-1]['wall_s']} s; validation {rows[-1]['val_curve']}", flush=True)
        tests = [r["test"] for r in rows if r["test"] is not None]
        numbers["sizes"][size.label] = dict(test=sum(tests) / len(tests) if tests else None,
                                            floor=max(r["floor"] for r in rows), runs=rows,
                                            wall_s=sum(r["wall_s"] for r in rows))
        numbers["chosen"] = pick(miniature, numbers)
        save(numbers)
        if numbers["chosen"] and not every_size:
            break
    return numbers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", choices=list(MINIATURES))
    parser.add_argument("--seeds", default="0", help="comma-separated seeds of the reference arm (default 0)")
    parser.add_argument("--all-sizes", action="store_true", help="run every size, not only up to the first learnt")
    parser.add_argument("--out", default="", help="where to write the numbers (default: the recipe's data file)")
    args = parser.parse_args()
    miniature = MINIATURES[args.name]
    out = Path(args.out) if args.out else pilot_path(miniature.name)
    before = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    out.parent.mkdir(parents=True, exist_ok=True)

    def save(numbers: dict[str, Any]) -> None:
        out.write_text(json.dumps(numbers, indent=1) + "\n", encoding="utf-8")

    numbers = pilot(miniature, tuple(int(s) for s in args.seeds.split(",")), args.all_sizes, before, save)
    save(numbers)
    print(f"chosen: {numbers.get('chosen') or '(none learnt)'}; wrote {out}")


if __name__ == "__main__":
    main()
