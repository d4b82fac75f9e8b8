"""The time New experiment promises comes from the speed finished runs measured here: the same model and
protocol on the same discipline where there are any, else on any discipline, else a typical figure."""

from __future__ import annotations

import pytest

from labcore.results.record import RunRecord
from labcore.runspec import estimate, make_spec
from labcore.runspec.resolved import resolve_fields as resolve
from labcore.engine.speed import measured_speed, run_tokens_per_s, typical_tokens_per_s


def run(discipline: str, samples_per_s: float, tokens: float = 0.0, *, model: str = "minilm",
        protocol: str = "full", status: str = "done", threads: int = 2, busy: float = 0.0) -> RunRecord:
    spec = {"model": model, "protocol": protocol, "discipline": discipline, "seed": 0}
    return RunRecord(key=f"{model}-{discipline}-{samples_per_s}", spec=spec, status=status, metric="accuracy",
                     samples_per_s=samples_per_s, train_tokens=tokens, wall_time_s=80.0, train_examples=2258,
                     threads=[[0, threads]], busy_cores=busy)


def test_a_runs_speed_is_its_samples_per_second_times_its_tokens():
    assert run_tokens_per_s(run("dna-splice", 60.0, 62.0)) == pytest.approx(3720.0)
    older = run("upload:dna", 100.0)  # recorded before runs counted their tokens
    assert run_tokens_per_s(older) == 0.0 and run_tokens_per_s(older, mean_tokens=22.0) == pytest.approx(2200.0)
    assert run_tokens_per_s(run("dna-splice", 60.0, 62.0, status="failed")) == 0.0
    assert run_tokens_per_s(run("dna-splice", 0.0, 62.0)) == 0.0


def test_the_same_discipline_first_then_the_model_anywhere_then_the_typical_figure():
    records = [run("dna-splice", 60.0, 62.0), run("dna-splice", 50.0, 62.0), run("dna-splice", 20.0, 62.0),
               run("dna-splice", 64.0, 62.0), run("protein-amp", 8.0, 500.0),
               run("dna-splice", 500.0, 62.0, protocol="output_only"),  # features cached: another speed
               run("dna-splice", 30.0, 62.0, model="smollm2")]
    here = measured_speed(records, "minilm", "full", "dna-splice", cores=2)
    assert here.runs == 4 and here.tokens_per_s == pytest.approx(55.0 * 62.0)  # the median: a busy run moves it not
    assert here.words() == "from 4 full runs of minilm on dna-splice here: 3,410 tokens/s"

    elsewhere = measured_speed(records, "minilm", "full", "upload:genes", cores=2)
    assert elsewhere.runs == 5 and elsewhere.tokens_per_s == pytest.approx(3720.0)
    assert elsewhere.words().startswith("from 5 full runs of minilm on other disciplines here")

    none = measured_speed([], "minilm", "full", "upload:genes", cores=2)
    assert (none.runs, none.tokens_per_s) == (0, typical_tokens_per_s("minilm"))
    assert none.words() == f"no run measured yet: a typical figure, {typical_tokens_per_s('minilm'):,.0f} tokens/s"
    assert measured_speed(records, "antiberty", "full", "dna-splice", cores=2) is None  # no typical figure of its own
    assert measured_speed(records, "smollm2", "full", "upload:genes", cores=2).runs == 1


def test_older_records_count_on_the_data_being_estimated_only():
    older = [run("upload:dna", 100.0), run("dna-splice", 60.0)]  # neither says its tokens
    speed = measured_speed(older, "minilm", "full", "upload:dna", mean_tokens=22.0, cores=2)
    assert (speed.runs, speed.discipline, speed.tokens_per_s) == (1, "upload:dna", pytest.approx(2200.0))
    assert measured_speed(older, "minilm", "full", "upload:other", mean_tokens=22.0, cores=2).runs == 0


def test_the_estimate_follows_the_measured_speed():
    quick = resolve(make_spec(budget="quick"), "tokens")
    typical = estimate(quick, (86, 10, 10), 22.0)
    slow = measured_speed([run("upload:dna", 40.0, 22.0)], "minilm", "full", "upload:dna", cores=2)
    measured = estimate(quick, (86, 10, 10), 22.0, tokens_per_s=slow.tokens_per_s)
    assert measured.steps == typical.steps == 150
    # 150 steps of 16 examples at 40 examples/s: a minute of steps, where the typical figure gave a few seconds
    assert measured.seconds > 60 > typical.seconds


def test_runs_that_shared_the_machine_are_left_out_while_anything_better_is_known():
    from labcore.engine.speed import had_the_machine

    # A recipe's two workers (1 thread each) under load measured 300-600 tokens/s; alone, the machine gives more.
    beside = [run("dna-splice", 6.0, 62.0, threads=1), run("dna-splice", 8.0, 62.0, threads=1),
              run("dna-splice", 9.0, 62.0, busy=1.2)]  # all the cores, but another process kept one busy
    assert not any(had_the_machine(r, 2) for r in beside)
    assert had_the_machine(run("dna-splice", 60.0, 62.0), 2)
    assert had_the_machine(run("dna-splice", 60.0, 62.0, threads=2, busy=-1.0), 2)  # older record: threads say it
    assert had_the_machine(RunRecord(key="g", spec={}, status="done"), 2)  # off the CPU: no thread counts

    alone = measured_speed(beside + [run("dna-splice", 60.0, 62.0)], "minilm", "full", "dna-splice", cores=2)
    assert (alone.runs, alone.tokens_per_s, alone.shared) == (1, pytest.approx(3720.0), 3)
    assert alone.words().endswith("(3 runs that shared the machine left out)")

    typical = measured_speed(beside, "minilm", "full", "dna-splice", cores=2)  # the typical figure before them
    assert (typical.runs, typical.tokens_per_s, typical.shared) == (0, typical_tokens_per_s("minilm"), 3)
    assert "the 3 runs measured here shared the machine" in typical.words()

    # a model without a typical figure: the shared runs are all there is, and the words say what they are
    tiny = [run("upload:dna", 40.0, 22.0, model="tiny:bert", threads=1)]
    only = measured_speed(tiny, "tiny:bert", "full", "upload:dna", cores=2)
    assert (only.runs, only.shared_figure) == (1, True) and "a machine of its own is faster" in only.words()
    # on one core, a run of one thread had the whole machine
    assert measured_speed(tiny, "tiny:bert", "full", "upload:dna", cores=1).shared_figure is False


def test_the_typical_figure_follows_the_cpus_bf16(monkeypatch):
    from labcore.engine import speed
    from labcore.runspec import MINILM_TOKENS_PER_S, MINILM_TOKENS_PER_S_BF16

    monkeypatch.setattr(speed, "native_bf16", lambda device: False)
    assert typical_tokens_per_s("minilm") == MINILM_TOKENS_PER_S
    monkeypatch.setattr(speed, "native_bf16", lambda device: True)  # auto precision is bf16 there: twice as fast
    assert typical_tokens_per_s("minilm") == MINILM_TOKENS_PER_S_BF16
    assert typical_tokens_per_s("antiberty") is None


def cost_run(discipline: str, tokens: float, *, a: float = 1e-3, b: float = 3e-6, threads: int = 1,
             busy: float = 1.0) -> RunRecord:
    """A run whose speed follows seconds per token = a + b * length (two workers side by side by default)."""
    return run(discipline, 1.0 / ((a + b * tokens) * tokens), tokens, threads=threads, busy=busy)


def test_the_cost_per_token_is_a_line_in_the_length_fitted_on_runs_of_one_condition():
    from labcore.engine.speed import length_cost

    beside = [cost_run(d, n) for d, n in (("text", 27.0), ("dna", 62.0), ("music", 64.0), ("midi", 130.0),
                                          ("long", 488.0))]
    alone = [cost_run("dna", 62.0, a=5e-4, b=1e-6, threads=2, busy=0.0) for _ in range(3)]  # one length only
    cost = length_cost(beside + alone, cores=2)
    assert (cost.runs, cost.shortest, cost.longest) == (5, 27.0, 488.0)
    assert cost.per_token_s == pytest.approx(1e-3) and cost.per_token_per_length_s == pytest.approx(3e-6)
    # 1,600 tokens/s at 62 tokens is (1e-3 + 3e-6 * 490) / (1e-3 + 3e-6 * 62) = 2.08 times slower at 490
    assert cost.carry(1600.0, 62.0, 490.0) == pytest.approx(1600.0 * 1.186e-3 / 2.47e-3)

    # what cannot give a line gives none: too few runs, lengths too close, older records that do not say whether
    # the machine was busy, or a cost that falls with the length
    assert length_cost(beside[:2], cores=2) is None
    assert length_cost([cost_run("dna", n) for n in (62.0, 64.0, 100.0)], cores=2) is None
    assert length_cost([cost_run(d, n, busy=-1.0) for d, n in (("a", 27.0), ("b", 130.0), ("c", 488.0))],
                       cores=2) is None
    assert length_cost([cost_run(d, n, b=-1e-6) for d, n in (("a", 27.0), ("b", 130.0), ("c", 488.0))],
                       cores=2) is None


def test_a_speed_measured_on_short_examples_is_carried_to_long_ones():
    # the machine alone measured 62-token DNA; two workers side by side measured 27 to 130 tokens
    alone = [cost_run("upload:dna", 62.0, a=5e-4, b=1.5e-6, threads=2, busy=0.0) for _ in range(3)]
    beside = [cost_run(d, n) for d, n in (("text", 27.0), ("dna", 62.0), ("music", 64.0), ("midi", 130.0))]
    long = measured_speed(alone + beside, "minilm", "full", "upload:long", mean_tokens=490.0, cores=2)
    short = 1.0 / (5e-4 + 1.5e-6 * 62.0)
    assert long.tokens_per_s == pytest.approx(short * (1e-3 + 3e-6 * 62.0) / (1e-3 + 3e-6 * 490.0))
    assert long.tokens_per_s < short / 2  # taken as it was, the promise was less than half the time
    assert long.words() == (f"from 3 full runs of minilm on other disciplines here: {long.tokens_per_s:,.0f} "
                            f"tokens/s at 490 tokens an example, carried from their 62 by the cost per token 4 runs "
                            f"measured at 27 to 130 tokens (4 runs that shared the machine left out)")

    # the data's own length: nothing to carry, and the words do not say it
    same = measured_speed(alone + beside, "minilm", "full", "upload:dna", mean_tokens=62.0, cores=2)
    assert same.tokens_per_s == pytest.approx(short) and same.length is None and "carried" not in same.words()
    # no length known (older callers): the speed as measured
    assert measured_speed(alone + beside, "minilm", "full", "upload:long", cores=2).tokens_per_s == \
        pytest.approx(short)
