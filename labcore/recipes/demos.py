"""One-click demos: small sweeps that each answer one question of the papers in a few CPU minutes.

A demo is a lesson in three parts. Before it runs, :attr:`Demo.watch` says what to look at and
:attr:`Demo.claim` which paper claims what; while it runs the Home page shows its live curves; when it
ends, :func:`summarize_demo` writes the outcome from the measured numbers of its records — never from
a canned sentence, so a demo that comes out differently from the paper says so.

Budgets were chosen so each demo finishes within three minutes on a 2-core CPU with one worker (its
runs go one after another, a cold worker included) and its conditions visibly separate; the Home page shows
each demo's measured duration next to its button. They were measured while other work shared the machine
(load average about 4), so an idle machine is faster. ``TRANSFERLAB_DEMO_MAX_STEPS`` caps every demo
run's steps (smoke tests, slow machines): the runs are real but shorter, and keyed apart from the full demo.

Also here, because the pages must not import torch: short, torch-free descriptions of the budgets and
training-set sizes the New experiment page offers (protocols, inits and backbones describe themselves in
their registries, which load without torch).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Sequence

from labcore.results.record import RunRecord
from labcore.registry import Registry
from labcore.runspec import RunSpec, make_spec

MAX_STEPS_ENV = "TRANSFERLAB_DEMO_MAX_STEPS"

PAPERS = {
    "kao": "Kao & Lee 2021, Is BERT a cross-disciplinary knowledge learner?",
    "chiang": "Chiang & Lee 2022, Pretrained language models without human language",
    "fpt": "Lu et al. 2021, Pretrained transformers as universal computation engines (FPT)",
    "tamkin": "Tamkin et al. 2020, Investigating transferability in pretrained language models",
    # beside the four papers: the method that later made cross-modal transfer work best, and its ablation
    "orca": "Shen et al. 2023, Cross-modal fine-tuning: align then refine (ORCA); García-de-Herreros et al. 2024, "
            "What explains the success of cross-modal fine-tuning with ORCA?",
}

BUDGET_NOTES = {
    "quick": "teaching demo: one MiniLM run on dna-splice in 1.5-3 minutes on a 2-core CPU (2 epochs of at most 140,000 "
             "training tokens, but at least 500 examples; small data gets more epochs, up to 150 steps; at least 8 "
             "evaluations). Long sequences take longer: the cost grows with the tokens trained",
    "standard": "5 epochs (10 for frozen protocols), early stopping after 5 evaluations without improvement; at least "
                "8 evaluations. On a GPU: batch 64 at learning rate 1e-4 (frozen protocols: batch 128), text cut at "
                "128 tokens",
    "paper": "each paper's own recipe (Kao: Adam 1e-5, batch 32, 10 epochs; FPT: Adam 1e-3; Tamkin: Adam 2e-5, "
             "batch 8): hours on a CPU",
}

TRAIN_SIZE_NOTES = {
    "full": "the whole training split (the quick budget may still cap it by its token budget)",
    "1%": "1 % of the training split, Kao & Lee §4.2's generalisation test",
    "500": "500 examples, one of Tamkin et al.'s subsampled settings",
    "5000": "5,000 examples, Tamkin et al.'s other subsampled setting",
}


@dataclass(frozen=True)
class DemoRun:
    """One run of a demo: the role it plays in the lesson (legend label and colour) and its spec."""

    role: str
    spec: RunSpec


@dataclass(frozen=True)
class Demo:
    name: str
    title: str  # the question, as the button shows it
    watch: str  # sentence 1: what to look at while it runs
    claim: str  # sentence 2: what the paper claims, with its section
    paper: str  # key of PAPERS
    runs: tuple[DemoRun, ...]
    measured_s: int  # end-to-end seconds, submit to both results, one worker, 2-core CPU (see the module doc)

    @property
    def group(self) -> str:
        """The store group its runs join (stable: a second click returns the cached results)."""
        cap = demo_max_steps()
        return f"demo:{self.name}" + (f":max{cap}" if cap else "")

    @property
    def lesson(self) -> str:
        return f"{self.watch} {self.claim}"

    def specs(self) -> list[RunSpec]:
        """The demo's specs, each capped by ``TRANSFERLAB_DEMO_MAX_STEPS`` where that is set."""
        cap = demo_max_steps()
        out = []
        for run in self.runs:
            spec = run.spec
            if cap:
                steps = min(cap, spec.max_steps or cap)
                spec = spec.replace(max_steps=steps, eval_every=max(1, min(spec.eval_every or steps, steps // 4)))
            out.append(spec)
        return out

    @property
    def roles(self) -> list[str]:
        return [run.role for run in self.runs]


def demo_max_steps() -> int:
    text = os.environ.get(MAX_STEPS_ENV, "").strip()
    if not text:
        return 0
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{MAX_STEPS_ENV}={text!r} is not a whole number; unset it or give a step cap") from None
    return max(0, value)


DEMOS: Registry[Demo] = Registry("demo")


def _register(demo: Demo) -> Demo:
    return DEMOS.register(demo.name, demo)


# DNA: MiniLM fine-tuned on splice junctions. The quick budget's 2 epochs take 75-90 s a run on a CPU with
# native bf16 (172 s in fp32 on one without); 120 steps of batch 16 (1,920 examples, under one epoch) keep the
# pair within three minutes on the former. At 5e-5 pretrained reached only 0.69 validation accuracy by step
# 120; at 1e-4 (the quick budget's rate) it reached 0.91 (calibrated once each).
_DNA = dict(model="minilm", discipline="dna-splice", protocol="full", budget="quick", max_steps=120,
            eval_every=20, batch_size=16, lr=1e-4)
_register(Demo(
    name="dna",
    title="Does a text model help on DNA?",
    watch="Watch the blue curve (MiniLM pretrained on English) fall below the orange one (the same network "
          "with random weights) while both learn to spot splice junctions in DNA letters mapped to random "
          "vocabulary tokens.",
    claim="Kao & Lee (§3.2, fig. 2) report that text-pretrained BERT beats training from scratch on DNA, "
          "protein and music, although the tokens mean nothing in English.",
    paper="kao",
    runs=(DemoRun("pretrained", make_spec(init="pretrained", **_DNA)),
          DemoRun("random", make_spec(init="random", **_DNA))),
    measured_s=180,
))

# Bits: FPT's frozen transformer on 5-bit XOR. Only input layer, positions, layer norms and the head
# train (Adam 1e-3). Mean pooling reads every bit position out: calibrated once, the frozen pretrained
# body reached 0.88 validation bit accuracy by step 350 where the [CLS] readout was still near 0.60 at
# step 500; the frozen random body stayed at 0.46-0.50.
_BITS = dict(model="minilm", discipline="bits-xor", protocol="frozen", budget="quick", pooling="mean",
             max_steps=500, epochs=1000.0, eval_every=50, lr=1e-3, batch_size=32)
_register(Demo(
    name="bits",
    title="Frozen transformer on bits",
    watch="Only the input layer, positions, layer norms and output head train here, so watch whether the "
          "frozen pretrained body (blue) lifts bit accuracy above the 0.5 of guessing sooner than a frozen "
          "random body (orange).",
    claim="Lu et al. (FPT, §3.1 and table 6) report that frozen language-pretrained layers solve bit XOR "
          "and converge far faster than frozen random ones; in a few CPU minutes expect a clear gap, not the "
          "paper's 100 %.",
    paper="fpt",
    runs=(DemoRun("pretrained", make_spec(init="pretrained", **_BITS)),
          DemoRun("random", make_spec(init="random", **_BITS))),
    measured_s=143,
))

# Text: the same pretrained MiniLM on movie-review sentiment, once with its own tokens and once with
# every token id shifted by 1000 (Kao & Lee's synthetic text). One epoch of 3,000 snippets (94 steps);
# each evaluation of the 1,241 validation snippets costs ~6 s, so only two happen before the final one.
_TEXT = dict(model="minilm", init="pretrained", discipline="text-sentiment", protocol="full", budget="quick",
             train_size="3000", epochs=1.0, batch_size=32, eval_every=47, lr=1e-4)
_register(Demo(
    name="text",
    title="Scrambled words",
    watch="Both runs start from the same pretrained MiniLM; in the green one every word is fed as the token "
          "1000 places further in the vocabulary, so watch how much of the blue run's head start survives "
          "when the words lose their meaning.",
    claim="Kao & Lee (§2.1, §3.2, fig. 2a) find that BERT fine-tuned on such scrambled text still beats "
          "training from scratch but stays well below BERT on the original words.",
    paper="kao",
    runs=(DemoRun("pretrained", make_spec(mapping="identity", **_TEXT)),
          DemoRun("shift 1000", make_spec(mapping="shift", mapping_k=1000, **_TEXT))),
    measured_s=157,
))


# --------------------------------------------------------------------------------------------------
# the summary, written from the records


def _fmt(value: float | None) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


def _best(curve: Sequence[Sequence[float]]) -> tuple[int, float] | None:
    if not curve:
        return None
    step, value = max(curve, key=lambda p: (p[1], -p[0]))
    return int(step), float(value)


def describe_record(record: RunRecord, role: str) -> str:
    """One clause on one run, from its numbers: best validation value and step, final value, test value."""
    metric = record.metric.replace("_", " ") or "metric"
    curve = [tuple(p) for p in record.val_curve]
    best = _best(curve)
    test = record.test_value
    if record.status != "done":
        where = f"step {record.steps_done}" + (f" of {record.total_steps}" if record.total_steps else "")
        text = f"{role} {record.status} at {where}"
        if record.untrained:
            text += " before its first validation (untrained weights: no test result)"
        if best:
            text += f" after reaching {best[1]:.2f} validation {metric} at step {best[0]}"
        return text
    if not best:
        return f"{role} scored {_fmt(test)} test {metric}"
    final_step, final = curve[-1]
    if best[1] - final > 0.02:
        text = (f"{role} reached {best[1]:.2f} validation {metric} at step {best[0]} and ended at "
                f"{final:.2f} (step {int(final_step)})")
    elif best[0] == int(final_step) or f"{final:.2f}" == f"{best[1]:.2f}":
        text = f"{role} reached {best[1]:.2f} validation {metric} at step {best[0]}"
    else:
        text = f"{role} ended at {final:.2f} validation {metric} (best {best[1]:.2f} at step {best[0]})"
    if test is not None:
        text += f"; test {metric} {test:.2f}"
    return text


def _at_floor(record: RunRecord) -> bool:
    value = record.test_value
    if record.status != "done" or value is None:
        return False
    if record.baseline.get("majority") is not None:
        return value <= record.baseline["majority"] + 0.01
    return record.metric == "bit_accuracy" and value <= 0.52


def _pace(record: RunRecord) -> tuple[bool, str]:
    """(still improving?, a clause) for a finished run: was it still improving at its last evaluation, or
    from which step did it level off (the engine's steps to converge: within 0.01 of its best, FPT table 6)."""
    if record.status != "done" or not record.val_curve or record.steps_to_converge is None:
        return False, ""
    last = int(record.val_curve[-1][0])
    if record.steps_to_converge >= last:
        return True, f"was still improving at its last evaluation (step {last})"
    return False, f"levelled off from step {record.steps_to_converge} (within 0.01 of its best)"


def _roles_from_records(records: Sequence[RunRecord]) -> list[str]:
    from labcore.results.compare import varying_fields
    from labcore.results.compare import condition_label

    fields = varying_fields(records)
    return [condition_label(r.spec, fields) for r in records]


def summarize_demo(records: Sequence[RunRecord], roles: Sequence[str] | None = None) -> str:
    """What the demo measured, in a few sentences built only from ``records``' numbers.

    ``roles`` names each record in the lesson ("pretrained", "random"); by default the spec fields
    that differ between the records name them. The first record is the reference the others are
    compared with. Unfinished runs are reported as such; gaps within noise are called so.
    """
    records = list(records)
    if not records:
        return "No run of this demo has a result yet."
    roles = list(roles) if roles is not None else _roles_from_records(records)
    if len(roles) != len(records):
        raise ValueError(f"{len(roles)} roles for {len(records)} records; give one role per record")
    sentences = ["; ".join(describe_record(r, role) for r, role in zip(records, roles)) + "."]
    sentences[0] = sentences[0][0].upper() + sentences[0][1:]
    reference, ref_role = records[0], roles[0]
    metric = reference.metric.replace("_", " ") or "metric"
    for record, role in zip(records[1:], roles[1:]):
        if reference.status != "done" or record.status != "done":
            continue
        a, b = reference.test_value, record.test_value
        if a is None or b is None:
            continue
        gap = a - b
        if abs(gap) < 0.02:
            sentences.append(f"On the test set {ref_role} and {role} are within {abs(gap):.2f} {metric} of each "
                             f"other: with one seed each that is no measurable difference; add seeds on "
                             f"New experiment for error bars.")
        else:
            better, worse = (ref_role, role) if gap > 0 else (role, ref_role)
            sentences.append(f"On the test set {better} leads {worse} by {abs(gap):.2f} {metric}.")
    # A run that did no better than the floor (majority class, or chance for bits) gets no pace clause:
    # "still improving" would overstate a run that learned nothing.
    paces = [(role, _pace(r) if not _at_floor(r) else (False, "")) for r, role in zip(records, roles)]
    improving = [role for role, (still, _) in paces if still]
    if improving and len(improving) == len(records):
        who = "Both" if len(records) == 2 else "All runs"
        sentences.append(f"{who} were still improving at the last evaluation: longer runs may gain more.")
    elif any(text for _, (_, text) in paces):
        sentence = "; ".join(f"{role} {text}" for role, (_, text) in paces if text) + "."
        sentences.append(sentence[0].upper() + sentence[1:])
    majority = reference.baseline.get("majority")
    if majority is not None:
        stuck = [role for r, role in zip(records, roles) if _at_floor(r)]
        sentence = f"Always answering the most frequent class would score {majority:.2f}"
        if stuck:
            sentence += f"; {' and '.join(stuck)} did no better than that"
        sentences.append(sentence + ".")
    elif reference.metric == "bit_accuracy":
        stuck = [role for r, role in zip(records, roles) if _at_floor(r)]
        sentence = "Guessing scores 0.50 bit accuracy"
        if stuck:
            sentence += f"; {' and '.join(stuck)} stayed at chance"
        sentences.append(sentence + ".")
    return " ".join(sentences)


def demo_records(demo: Demo, results: dict[str, RunRecord | None], keys: Sequence[str]) -> list[tuple[str, RunRecord]]:
    """(role, record) pairs of a demo's finished runs, in the demo's order (``keys`` are its run keys)."""
    out = []
    for role, key in zip(demo.roles, keys):
        record = results.get(key)
        if record is not None:
            out.append((role, record))
    return out


__all__ = ["BUDGET_NOTES", "DEMOS", "Demo", "DemoRun", "MAX_STEPS_ENV", "PAPERS", "TRAIN_SIZE_NOTES",
           "demo_max_steps", "demo_records", "describe_record", "summarize_demo"]

