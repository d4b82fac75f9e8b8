"""Lesson files: checked with clear errors, eight of them runnable from the registry, and their answers and
explanations read from the measured numbers of a tiny store."""

from __future__ import annotations

import re

import pytest

from labcore.engine import run_results
from labcore.jobs import key_of
from labcore.lessons import catalogue, load, runs
from labcore.lessons.explain import explain
from labcore.lessons.measure import is_right, measure
from labcore.lessons.model import NO_DIFFERENCE, LessonError
from labcore.results.record import RunRecord

GOOD = {
    "name": "t", "title": "T", "paper": "kao", "source": "§3.2, table 6",
    "question": {"kind": "number", "text": "What accuracy?", "low": 0.0, "high": 1.0},
    "figure": {"kind": "value", "roles": ["pretrained"]},
    "base": {"model": "minilm", "discipline": "dna-splice", "budget": "quick", "max_steps": 20},
    "runs": [{"role": "pretrained", "spec": {"init": "pretrained"}},
             {"role": "random", "spec": {"init": "random"}}],
}


def with_(path: tuple, value):
    values = {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v) for k, v in GOOD.items()}
    target = values
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return values


def test_the_eight_lessons_load_with_distinct_runs_and_keys():
    names = catalogue.names()
    assert names == ["dna", "bits", "text", "kao", "fpt", "tamkin", "chiang", "orca"]
    for name in names:
        lesson = catalogue.get(name)
        keys = runs.lesson_keys(lesson)
        assert len(set(keys)) == len(keys) == len(lesson.runs) <= 3
        assert set(lesson.figure.roles) <= set(lesson.roles) and lesson.source
        if lesson.whatif:
            for option in lesson.whatif.options:  # every option the class may vote for is a runnable spec
                assert key_of(runs.whatif_spec(lesson, option)) not in keys


def test_demo_lessons_share_the_home_demos_runs():
    from labcore.recipes.demos import DEMOS

    for name in ("dna", "bits", "text"):
        assert runs.lesson_keys(catalogue.get(name)) == tuple(key_of(s) for s in DEMOS[name].specs())


def test_a_fine_tune_of_a_pretrained_body_waits_for_it():
    lesson = catalogue.get("chiang")
    first, second = lesson.stages
    assert [r.kind for r in first] == ["pretrain"]
    assert all(r.spec.model == f"lab:{first[0].spec.name}" for r in second)


@pytest.mark.parametrize("path, value, message", [
    (("base", "discipline"), "dna-splicing", r"unknown discipline 'dna-splicing'; the disciplines are .*dna-splice"),
    (("figure", "roles"), ["scratch"], r"the runs do not produce 'scratch'.*roles are pretrained, random"),
    (("figure", "measure"), "attention", r"the runs do not produce a figure 'attention'"),
    (("figure", "kind"), "gap", r"a gap figure reads 2 condition"),
    (("question", "kind"), "guess", r"kind 'guess' is none of choice, number, order"),
    (("question", "kind"), "order", r"an order question is answered by an order figure, not a value one"),
    (("paper",), "smith", r"paper 'smith' is none of the lab's papers"),
    (("runs",), [{"role": "x", "spec": {"init": "pretrained"}, "sead": 1}], r"unknown field 'sead'"),
    (("runs",), [{"role": "pretrained", "demo": "dna2"}], r"there is no Home demo 'dna2'"),
    (("base", "protocol"), "frozen-ish", r"unknown protocol 'frozen-ish'; the protocols are full, reemb"),
    (("base", "lr"), -1.0, r"bad.toml.*lr must be positive"),  # the spec's own error, under the file's name
])
def test_a_bad_lesson_file_is_refused_naming_the_field(path, value, message):
    with pytest.raises(LessonError, match=message):
        load.load(with_(path, value), where="bad.toml")


def test_a_missing_field_and_bad_toml_are_named(tmp_path):
    values = dict(GOOD)
    del values["figure"]
    with pytest.raises(LessonError, match="`figure` is missing"):
        load.load(values)
    (tmp_path / "x.toml").write_text("name = ")
    with pytest.raises(LessonError, match="x.toml: not valid TOML"):
        load.load_file(tmp_path / "x.toml")


# ------------------------------------------------------------------------------------- measured answers
def record(key: str, test: float, *, n: int = 400, majority: float = 0.52, metric: str = "accuracy") -> RunRecord:
    return RunRecord(key=key, spec={}, status="done", metric=metric, test={metric: test},
                     baseline={"majority": majority} if metric == "accuracy" else {}, test_examples=n,
                     val_curve=[[20, test]], best_step=20, steps_done=20)


def finished(store, lesson, values):
    keys = runs.lesson_keys(lesson)
    for (run, key) in zip(lesson.runs, keys):
        if run.role in values:
            run_results.put_result(store, record(key, values[run.role]), label=run.role)
    return keys


def numbers(text: str) -> set[str]:
    return set(re.findall(r"\d\.\d\d", text))


def test_the_answer_and_its_explanation_are_the_measured_numbers(store):
    lesson = catalogue.get("dna")
    keys = finished(store, lesson, {"pretrained": 0.913, "random": 0.551})
    measured = measure(lesson, runs.results(store, keys), keys)
    assert measured.value == pytest.approx(0.913) and measured.low < 0.913 < measured.high
    text = explain(lesson, measured)
    assert {"0.91", "0.55", "0.52", f"{measured.low:.2f}", f"{measured.high:.2f}"} <= numbers(text)
    assert numbers(text) <= {"0.91", "0.55", "0.52", f"{measured.low:.2f}", f"{measured.high:.2f}"} | {
        f"{v.low:.2f}" for v in measured.values} | {f"{v.high:.2f}" for v in measured.values}
    assert is_right(lesson, measured, 0.90) and not is_right(lesson, measured, 0.70)


def test_a_gap_within_its_interval_is_no_measurable_difference(store):
    lesson = catalogue.get("bits")
    keys = finished(store, lesson, {"pretrained": 0.60, "random": 0.58})
    measured = measure(lesson, runs.results(store, keys), keys)
    assert measured.answer == NO_DIFFERENCE and measured.low < 0 < measured.high
    assert "no measurable difference" in explain(lesson, measured) and "+0.02" in explain(lesson, measured)
    keys = finished(store, catalogue.get("orca"), {"aligned first": 0.95, "not aligned": 0.80})
    orca = measure(catalogue.get("orca"), runs.results(store, keys), keys)
    assert orca.answer == "aligned first scores higher" and orca.value == pytest.approx(0.15)


def test_an_order_is_measured_and_close_pairs_are_named(store):
    lesson = catalogue.get("kao")
    keys = finished(store, lesson, {"pretrained": 0.93, "random": 0.70, "re-emb": 0.92})
    measured = measure(lesson, runs.results(store, keys), keys)
    assert measured.order == ("pretrained", "re-emb", "random")
    assert is_right(lesson, measured, ["pretrained", "re-emb", "random"])
    assert not is_right(lesson, measured, ["re-emb", "pretrained", "random"])
    assert "pretrained and re-emb overlap" in explain(lesson, measured)


def test_no_answer_until_every_condition_has_finished(store):
    lesson = catalogue.get("kao")
    keys = finished(store, lesson, {"pretrained": 0.93})
    assert measure(lesson, runs.results(store, keys), keys) is None


def test_the_command_line_lists_the_lessons():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "labcore.lessons", "list"], check=True, capture_output=True,
                         text=True).stdout
    assert [line.split()[0] for line in out.splitlines()] == catalogue.names()
    assert runs.command("dna") == "python -m labcore.lessons run dna"


def test_a_proposed_table_runs_as_the_whatif_roles_run_with_mapping_table():
    lesson = catalogue.get("dna")
    base = lesson.runs_of(lesson.whatif.role)[0].spec
    spec = runs.whatif_spec(lesson, "table A:1012,C:1013,G:1014,T:1015")
    assert spec.mapping == "table"
    assert spec.mapping_table == (("A", 1012), ("C", 1013), ("G", 1014), ("T", 1015))
    assert spec.replace(mapping=base.mapping, mapping_table=()) == base  # everything else is the role's run
    # written in another order, the same table is the same run
    assert key_of(runs.whatif_spec(lesson, "table T:1015,G:1014,C:1013,A:1012")) == key_of(spec)
    assert key_of(spec) not in runs.lesson_keys(lesson) + (key_of(runs.whatif_spec(lesson, "unused")),)
    with pytest.raises(LessonError, match="no id for 'T'"):
        runs.whatif_spec(lesson, "table A:1012,C:1013,G:1014")
    with pytest.raises(LessonError, match="none of the what-if's options"):  # a vote on protocols
        runs.whatif_spec(catalogue.get("orca"), "table A:1012,C:1013,G:1014,T:1015")


def test_the_handout_names_the_table_the_class_chose(store):
    from labcore.door.lessons import handout_html, whatif_view

    lesson, table = catalogue.get("dna"), "table A:1012,C:1013,G:1014,T:1015"
    keys = finished(store, lesson, {"pretrained": 0.913, "random": 0.551})
    run_results.put_result(store, record(key_of(runs.whatif_spec(lesson, table)), 0.702))
    measured = measure(lesson, runs.results(store, keys), keys)
    page = handout_html(lesson, measured, [0.9], whatif=table,
                        whatif_measured=whatif_view(store, lesson, table).measured)
    for part in ("What if?", f"pretrained, mapping {table}", "0.702", "0.913",
                 "--mapping table --mapping-table A:1012,C:1013,G:1014,T:1015"):
        assert part in page, part
    assert "What if?" not in handout_html(lesson, measured, [0.9])
