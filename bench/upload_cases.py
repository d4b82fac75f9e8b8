"""Five small and long uploads from real packaged data, run at the quick budget: what the pages say, and what
the runs measure.

    python bench/upload_cases.py [--dry] [--only N ...] [--seeds 3] [--fold-seeds 1] [--workers 1] [--max-runs N]

The cases of issue 13, each written as the file a user would upload, from data the lab already has offline:

1. ``>id|label|split`` FASTA with thousands of records: iLearnPlus' malonylation sites as shipped (10,576
   windows of 31 residues, sorted by class, the file's own training/testing split); label field 2, split
   field 3.
2. 21 MIDI files by composer: 7 pieces each of Bach, Beethoven (quartet movements) and Monteverdi from
   music21's corpus, written by music21 at its 10,080 ticks per beat, zipped in one folder per composer.
3. Long sequences: 1,200 mouse transcripts (lncRNA vs mRNA, iLearnPlus, the asset ``lncrna``) of at most
   ``--long-max`` nt (1,000 by default, as the issue's file; the packaged file goes to 24,817), as
   ``>id|label`` FASTA: the page's default cuts the longer ones into windows that vote.
4. The MIDI zip of case 2 as 5-fold cross-validation.
5. A 106-row DNA CSV (UCI splice junctions, a seeded sample stratified by class) as 5-fold cross-validation.

Each file is written once under ``cache/bench-upload-cases/`` and saved through the Data page's own path
(:func:`labcore.data.upload.start_save`: parsed in a subprocess), unless the saved upload already holds the
same bytes read the same way. Before anything runs the bench prints what the pages say: the Data page's
preview (suggested fields, warnings) and save result, New experiment's k-fold offer, position note,
small-test note and time promise (from the speed finished runs measured here). Unless ``--dry``, it then
runs MiniLM pretrained vs random init (the ``full`` protocol, as the Kao & Lee recipe names them) for each
seed (and fold) through the local executor, in background workers that exit when the queue is empty, and
prints per condition the mean ± std test accuracy, each run's 95 % Wilson interval, the interval of all
test examples together, the majority-class baseline and the runs' wall time. A k-fold case runs one seed
per fold by default (``--fold-seeds``): its 5 folds are the repeats, as Compare counts them. Runs are keyed by
spec: a rerun serves finished ones from the store and runs only the rest.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import statistics
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from labcore.results import metrics
from labcore.engine import run_results, speed  # noqa: E402
from labcore import data as disciplines  # noqa: E402
from labcore import runspec as spec_lib  # noqa: E402
from labcore.data import fields  # noqa: E402
from labcore.data import upload as uploads  # noqa: E402
from labcore.errors import LabError  # noqa: E402
from labcore.results.record import RunRecord  # noqa: E402
from labcore.engine.resolve import resolve_spec  # noqa: E402

MODEL, PROTOCOL, BUDGET = "minilm", "full", "quick"
INITS = ("pretrained", "random")  # the conditions of the Kao & Lee recipe: the same network, two inits
PRETTY_MIDI_OLD_GUARD = 10**7  # the largest tick pretty_midi refused as "likely corrupt" before issue 13

from upload_case_files import CASES, Case, workdir  # noqa: E402


# --------------------------------------------------------------------------------- what the pages say
def say(where: str, text: str) -> None:
    print(f"  [{where}] {text}")


def data_page_preview(kind: str, data: bytes, case: Case) -> tuple[str, str]:
    """The Data page's preview: its suggested fields, the fields taken, and its warnings."""
    preview = fields.preview(kind, data)
    label, split = (preview.label_field, preview.split_field) if case.suggest else (case.label_field, case.split_field)
    read = f"all {len(preview.records):,} records" if preview.complete else f"the first {len(preview.records):,}"
    say("Data preview", f"read {read}; suggests label {fields.describe_field(kind, preview.label_field)}, split "
                        f"{fields.describe_field(kind, preview.split_field) if preview.split_field else '(seeded)'}; "
                        f"taken: {fields.describe_field(kind, label)} / {split or 'seeded 80/10/10'}")
    counts = preview.counts(label, split)
    say("Data preview", "classes read: " + "; ".join(f"{where} {dict(c)}" for where, c in counts.items()))
    limits = uploads.UploadLimits()
    warnings = preview.warnings(label, split, limits.min_per_class)
    if preview.complete and counts and not warnings:  # as the page: the test split this choice gives
        test = preview.test_counts(label, split, limits.min_per_split, uploads.SPLIT_FRACTIONS[2])
        small = metrics.small_test_warning(sum(test.values()), len(test))
        warnings += [f"Too small to compare: {small}."] if small else []
    for warning in warnings or ["(no warning)"]:
        say("Data preview", f"warning: {warning}")
    return label, split


def midi_ticks(path: Path) -> None:
    import mido

    with zipfile.ZipFile(path) as archive:
        files = [n for n in archive.namelist() if n.endswith(".mid")]
        stats = []
        for name in files:
            midi = mido.MidiFile(file=io.BytesIO(archive.read(name)))
            last = max(sum(m.time for m in track) for track in midi.tracks)
            notes = sum(1 for t in midi.tracks for m in t if m.type == "note_on" and m.velocity)
            stats.append((midi.ticks_per_beat, last, notes))
    past = sum(1 for _, last, _ in stats if last > PRETTY_MIDI_OLD_GUARD)
    say("file", f"{len(files)} MIDI files, {sorted({t for t, _, _ in stats})} ticks per beat, "
                f"{min(n for *_, n in stats):,}-{max(n for *_, n in stats):,} notes, largest last tick "
                f"{max(last for _, last, _ in stats):,}: {past} past pretty_midi's former 10^7 guard")


def save(case: Case, path: Path, label: str, split: str) -> uploads.UploadInfo | None:
    """Saved through the Data page's path (a subprocess), unless the upload holds these bytes read this way."""
    data = path.read_bytes()
    request = uploads.save_request(case.upload, path.name, len(data), label_field=label, split_field=split)
    try:
        saved = uploads.upload_info(case.upload)
        if saved.sha256 == hashlib.sha256(data).hexdigest() and saved.options == request.options:
            say("Data save", f"upload:{case.upload} already holds {path.name} read this way: kept")
            return saved
    except LabError:  # none saved yet
        pass
    result = uploads.start_save(case.upload, path.name, data, label_field=label, split_field=split).wait()
    if result.info is None:
        say("Data save", f"refused ({result.seconds:.1f} s): {result.error}")
        return None
    say("Data save", f"saved in {result.seconds:.1f} s (peak {result.peak_rss_bytes / 2**20:.0f} MB)")
    return result.info


def data_page_result(up: uploads.UploadInfo) -> None:
    classes = ", ".join(f"{c} {n:,}" for c, n in zip(up.class_names, up.class_units or up.class_counts))
    unit = "files" if up.kind == "midi" else "records"
    say("Data save", f"{up.n_groups:,} {unit} -> {up.n_examples:,} examples, {up.n_symbols:,} symbols; classes "
                     f"({unit}): {classes}; longest example {up.max_length:,}; windowed {up.windowed:,}, "
                     f"truncated {up.truncated:,}, skipped {len(up.skipped)}")
    if up.split_counts:
        say("Data save", "the file's own split: " + ", ".join(f"{s} {n:,}" for s, n in zip(fields.SPLITS,
                                                                                              up.split_counts)))
    for warning in up.warnings:
        say("Data save", f"warning: Saved, but {warning}.")


def new_experiment_notes(case: Case, up: uploads.UploadInfo, executor) -> spec_lib.Estimate | None:
    """New experiment's k-fold offer, position note, small-test note and time promise, as the page composes them."""
    from labcore.models.backbones import known_positions

    why = metrics.small_test_warning(*uploads.expected_test_size(up))
    offered = bool(why) and not up.options.split_field
    say("New experiment", f"k-fold offered: {'yes' if offered else 'no'}" + (f" ({why})" if offered else ""))
    train, validation, test = uploads.expected_sizes(up, case.folds)
    say("New experiment", f"splits{f' (one fold of {case.folds})' if case.folds else ''}: train {train:,}, "
                          f"validation {validation:,}, test {test:,} examples")
    name = f"upload:{case.upload}"
    discipline = disciplines.get(name)
    info = discipline.info(disciplines.parse_params(discipline, {}))
    positions = known_positions(MODEL)
    if info.input_kind == "tokens" and positions and info.max_length + 2 > positions:
        say("New experiment", f"note: the longest example has {info.max_length:,} symbols, but {MODEL} takes "
                              f"{positions:,} positions: longer inputs are cut")
    n, classes = uploads.expected_test_size(up, case.folds)
    small = metrics.small_test_warning(n, classes)
    say("New experiment", f"test: {n:,} {'files' if up.kind == 'midi' else 'records'} of {classes} classes"
                          + (f"; {'each fold is small' if case.folds else 'Too small to compare'}: {small}" if small
                             else "; no small-test warning"))
    if not up.n_symbols:
        return None
    mean = up.n_symbols / up.n_examples + 2
    resolved = resolve_spec(specs_of(case, 1)[0])
    rate = speed.measured_speed(done_records(executor), MODEL, PROTOCOL, resolved.discipline, mean_tokens=mean)
    guess = spec_lib.estimate(resolved, (train, validation, test), mean, tokens_per_s=rate.tokens_per_s)
    say("New experiment", f"time promise: about {guess.seconds:.0f} s a run on {os.cpu_count() or 1} free cores "
                          f"({rate.words()}): "
                          f"{guess.kept:,} training examples of {mean:.0f} tokens, {guess.steps:,} steps, "
                          f"{guess.evaluations} validations")
    return guess


# ------------------------------------------------------------------------------------------- the runs
def specs_of(case: Case, seeds: int) -> list:
    """Seed by seed, fold by fold, pretrained then random: --max-runs keeps whole pairs first."""
    out = []
    for seed in range(seeds):
        for init in INITS:
            base = spec_lib.make_spec(model=MODEL, init=init, discipline=f"upload:{case.upload}", protocol=PROTOCOL,
                                      budget=BUDGET, seed=seed)
            out += [(fold, init, s) for fold, s in enumerate(uploads.fold_specs(base, case.folds) if case.folds
                                                            else [base])]
    out.sort(key=lambda item: (item[2].seed, item[0], INITS.index(item[1])))
    return [s for _, _, s in out]


def done_records(executor) -> list[RunRecord]:
    """The finished runs of the model and protocol: what New experiment reads its speed from."""
    wanted = (MODEL, PROTOCOL)
    keys = [r.key for r in run_results.runs(executor.store, status="done")
            if (r.spec.get("model"), r.spec.get("protocol")) == wanted]
    return [RunRecord.from_dict(result) for key in keys if (result := executor.result(key))]


def run_all(executor, work: list[tuple[Case, list]], workers: int) -> None:
    """Submit every spec (finished ones come from the store), start workers that exit when idle, wait."""
    from labcore.execution.pool import start_worker
    from labcore.store import TERMINAL

    keys = []
    for case, specs in work:
        group = f"bench-upload-cases:{case.number}"
        for submission in executor.submit_group(group, specs, who="bench-upload-cases"):
            keys.append(submission.key)
    waiting = [k for k in keys if executor.status(k).status not in TERMINAL]
    print(f"\n{len(keys)} runs: {len(keys) - len(waiting)} already finished in the store, {len(waiting)} to run")
    if not waiting:
        return
    alive = len(executor.store.workers(alive_only=True, role="worker"))
    for _ in range(max(0, workers - alive)):
        start_worker(executor.store, extra_args=("--exit-when-idle",))
    started, last = time.time(), None
    while True:
        states = [executor.status(k).status for k in waiting]
        done = sum(s in TERMINAL for s in states)
        if done != last:
            print(f"  {time.time() - started:6.0f} s: {done}/{len(waiting)} ended", flush=True)
            last = done
        if done == len(waiting):
            break
        if not executor.store.workers(alive_only=True, role="worker"):  # an idle exit before a late claim
            start_worker(executor.store, extra_args=("--exit-when-idle",))
        time.sleep(5)


def report(case: Case, specs: list, executor) -> None:
    by_init: dict[str, list[RunRecord]] = {init: [] for init in INITS}
    missing = 0
    for spec in specs:
        record = executor.result(resolve_spec(spec).key)
        if record and (run := RunRecord.from_dict(record)).status == "done":
            by_init[spec.init].append(run)
        else:
            missing += 1
    for init, runs in by_init.items():
        if not runs:
            print(f"  {init:10s} no finished run")
            continue
        accuracies = [r.test.get("accuracy", float("nan")) for r in runs]
        agg = metrics.aggregate(accuracies) if len(runs) > 1 else None
        spread = f"{agg.mean:.3f} ± {agg.std:.3f} (95 % t {agg.ci_low:.3f}-{agg.ci_high:.3f})" if agg else f"{accuracies[0]:.3f}"
        n = sum(r.test_examples for r in runs)
        correct = sum(round(r.test.get("accuracy", 0) * r.test_examples) for r in runs)
        pooled = metrics.wilson_interval(correct, n) if n else (float("nan"),) * 2
        each = ", ".join(f"{a:.3f} [{lo:.2f}-{hi:.2f}]" for a, (lo, hi) in
                         ((r.test.get("accuracy", 0), metrics.wilson_interval(round(r.test.get("accuracy", 0) *
                                                                                       r.test_examples),
                                                                                 max(1, r.test_examples)))
                          for r in runs))
        walls = [r.wall_time_s for r in runs]
        threads = sorted({t for r in runs for _, t in r.threads})
        print(f"  {init:10s} accuracy {spread} over {len(runs)} run(s); all {n:,} test examples: {correct / max(1, n):.3f}"
              f" [Wilson {pooled[0]:.3f}-{pooled[1]:.3f}]; majority baseline "
              f"{statistics.mean(r.baseline.get('majority', float('nan')) for r in runs):.3f}")
        print(f"  {'':10s} runs: {each}")
        print(f"  {'':10s} wall {sum(walls):.0f} s in all, {statistics.mean(walls):.0f} s a run "
              f"({min(walls):.0f}-{max(walls):.0f}); steps {runs[0].steps_done}, train examples "
              f"{runs[0].train_examples:,}, test examples {runs[0].test_examples:,} ({runs[0].test_classes} classes); "
              f"threads {threads}")
        warn = {metrics.small_test_warning(r.test_examples, r.test_classes) for r in runs} - {""}
        for text in sorted(warn):
            say("Runs/Compare", f"{init}: {text}")
        for note in sorted({n for r in runs for n in r.notes if "cut" in n or "window" in n}):
            say("Runs", f"{init} note: {note}")
    if missing:
        print(f"  ({missing} run(s) not finished or not run)")


# -------------------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dry", action="store_true", help="the plan and the pages' words only, no training")
    parser.add_argument("--only", type=int, action="append", choices=[c.number for c in CASES],
                        help="run only case N (repeatable)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per condition (0..N-1; default 3)")
    parser.add_argument("--fold-seeds", type=int, default=1,
                        help="seeds per condition of a k-fold case (default 1: its k folds are the repeats, as "
                             "Compare counts them)")
    parser.add_argument("--workers", type=int, default=1, help="background workers (default 1)")
    parser.add_argument("--max-runs", type=int, default=0, help="submit at most N runs in all (0: every run)")
    parser.add_argument("--long-max", type=int, default=1000, help="case 3: longest transcript taken (nt)")
    args = parser.parse_args()

    from labcore.execution.executor import LocalExecutor
    from labcore.store import open_store

    store = open_store()
    executor = LocalExecutor(store, workers=args.workers, autostart=False)
    folder = workdir()
    folder.mkdir(parents=True, exist_ok=True)
    work: list[tuple[Case, list]] = []
    planned = estimated = 0.0
    budget = args.max_runs or None
    for case in CASES:
        if args.only and case.number not in args.only:
            continue
        print(f"\n== case {case.number}: {case.title} (upload:{case.upload})")
        started = time.time()
        path = case.write(folder, args)
        kind = uploads.detect_kind(path.name)
        say("file", f"{path.name}: {path.stat().st_size / 2**20:.2f} MB (ready in {time.time() - started:.0f} s)")
        label = split = ""
        if kind == "midi":
            midi_ticks(path)
        else:
            label, split = data_page_preview(kind, path.read_bytes(), case)
        up = save(case, path, label, split)
        if up is None:
            continue
        data_page_result(up)
        guess = new_experiment_notes(case, up, executor)
        seeds = args.fold_seeds if case.folds else args.seeds
        specs = specs_of(case, seeds)
        if budget is not None:
            specs, budget = specs[:budget], budget - len(specs[:budget])
        finished = sum(1 for s in specs
                       if (r := executor.result(resolve_spec(s).key)) and RunRecord.from_dict(r).status == "done")
        per_run = guess.seconds if guess else 0.0
        say("plan", f"{len(specs)} runs ({', '.join(INITS)} x {seeds} seed(s)"
                    f"{f' x {case.folds} folds' if case.folds else ''}{', capped by --max-runs' if args.max_runs else ''}"
                    f"), {finished} already in the store; about {per_run * (len(specs) - finished) / 60:.0f} min to run")
        planned += len(specs) - finished
        estimated += per_run * (len(specs) - finished)
        work.append((case, specs))
    print(f"\nplan: {planned:.0f} runs to train, about {estimated / 60:.0f} min of runs on {os.cpu_count() or 1} free "
          f"cores by the pages' promises (one after another)")
    if args.dry or not work:
        return
    run_all(executor, work, args.workers)
    for case, specs in work:
        print(f"\n== case {case.number}: {case.title}: test accuracy, {MODEL} {PROTOCOL}, {BUDGET} budget")
        report(case, specs, executor)


if __name__ == "__main__":
    main()
