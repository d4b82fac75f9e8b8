"""Token mapping: which vocabulary token each of a run's symbols was fed as; change it and rerun.

Kao & Lee map DNA letters, amino acids and pitches to random vocabulary tokens (§2.2) and scramble text
with T(i) = (i + 1000) mod D (§2.1). Here a run's mapping is a table (symbol → id → token); edit it by a
rule (shift k, a new random seed, the [unused] tokens, the letters themselves) or by hand, row by row.
Every edit is validated before anything runs (one-to-one, inside the vocabulary, off special tokens),
and "rerun with this mapping" submits the same spec with only the mapping changed: an unchanged spec
comes back from the store at once. ``?run=KEY&rerun=KEY2`` names the pair shown side by side.
"""

from __future__ import annotations

import re

import pandas as pd
import streamlit as st

from labcore.door import runs as lab_runs
from labcore.door.data import (RUN_SPECIAL_FIX, MappingSpec, build_mapping, describe_mapping, model_vocab, run_mapping,
                               spec_info)
from labcore.door.runs import RunSpec, make_spec, result_of
from labcore.door import views
from labcore.errors import LabError
from pages import common, state

common.through_router()


# Words a review is made of: what a text mapping shows before anything is searched for.
SAMPLE_WORDS = ("the", "a", "and", "not", "good", "bad", "great", "boring", "funny", "best", "worst", "movie",
                "film", "love", "story", "dull", ".", ",", "!", "[CLS]", "[SEP]")


def _table(mapping, text_filter: str = "", limit: int = 400) -> pd.DataFrame:
    if not mapping.is_text:
        return views.mapping_table(mapping.rows())
    rows = mapping.rows()
    if text_filter:
        rows = [r for r in rows if text_filter.lower() in r[0].lower()]
    else:
        wanted = {w: i for i, w in enumerate(SAMPLE_WORDS)}
        rows = sorted((r for r in rows if r[0] in wanted), key=lambda r: wanted[r[0]])
    return views.mapping_table(rows[:limit])


# ------------------------------------------------------------------------------------------ the mapping
def current_view(record, info, vocab, current, is_text: bool) -> tuple[pd.DataFrame, str]:
    """The run's own mapping as a table; returns the table and the text filter typed (text mappings)."""
    spec = record.spec
    kind = spec["mapping"]
    detail = {"shift": f" k = {spec.get('mapping_k')}", "random": f" seed {spec.get('mapping_seed')}"}.get(kind, "")
    st.markdown(f"**{record.label}** feeds {'its text' if is_text else f'{len(info.alphabet)} symbols'} into "
                f"**{spec['model']}**'s vocabulary of {vocab.size:,} tokens with the **{kind}**{detail} mapping.")
    st.caption(describe_mapping(kind))

    text_filter = ""
    if is_text:
        text_filter = st.text_input("Find tokens (the text's tokens as the tokenizer writes them)", key="keep.map.find",
                                    placeholder="e.g. good")
        st.caption("Text is tokenised by the model's own tokenizer; the mapping then replaces every token id. Special "
                   "tokens ([CLS], [SEP], [PAD]) always keep their ids. Shown: a few common words, or up to 400 tokens "
                   "that contain what you type.")
    current_table = _table(current, text_filter)
    st.dataframe(current_table, hide_index=True, height=min(420, 38 + 35 * len(current_table)),
                 column_config={"symbol": "symbol (the data's own)" if not is_text else "token of the text",
                                "id": st.column_config.NumberColumn("vocabulary id", format="%d"),
                                "token": "fed to the model as"})
    return current_table, text_filter


def _parse_table(text: str, alphabet) -> tuple[tuple[tuple[str, int], ...], list[str]]:
    """Rows "symbol id" (or symbol:id, symbol,id), one a line; problems name the line and the fix."""
    rows, problems = [], []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        match = re.fullmatch(r"(\S+?)\s*[\s:,]\s*(-?\d+)", line)
        if match is None:
            problems.append(f"line {number}: {line!r} is not a symbol and an id; write one row a line, like "
                            f"'{(alphabet or ('the',))[0]} 1037'")
            continue
        rows.append((match.group(1), int(match.group(2))))
    return tuple(rows), problems


# ------------------------------------------------------------------------------------------------ edit
def new_mapping(record, info, vocab, current, is_text: bool):
    """The rule (or hand-edited table) of the new mapping: its MappingSpec (None while there is none) and the
    problems that keep it from being used."""
    spec, key, kind = record.spec, record.key, record.spec["mapping"]
    st.subheader("Change it")
    kinds = ["shift", "random", "identity"] if is_text else ["random", "shift", "unused", "letters", "table"]
    titles = {"shift": "shift by k", "random": "a new random seed", "unused": "the [unused] tokens",
              "letters": "the letters themselves", "identity": "the original tokens", "table": "hand edit"}
    kind_widget = state.remember("map.kind", kinds[0], kinds)
    new_kind = state.keep("map.kind", st.radio("New mapping", kinds, key=kind_widget, horizontal=True,
                                                  format_func=titles.get))
    st.caption(describe_mapping(new_kind))

    mspec = None
    problems: list[str] = []
    if new_kind == "shift":
        default_k = RunSpec.mapping_k  # Kao & Lee's 1000, from the one place it is declared
        k = int(st.number_input(f"k (Kao & Lee use {default_k})", step=1, key=f"keep.map.k.{key}",
                                value=int(spec.get("mapping_k") or default_k) if kind == "shift" else default_k))
        mspec = MappingSpec("shift", k=k)
    elif new_kind == "random":
        seed = int(st.number_input("Mapping seed", min_value=0, step=1, key=f"keep.map.seed.{key}",
                                   value=int(spec.get("mapping_seed") or 0) + 1 if kind == "random" else 1))
        mspec = MappingSpec("random", seed=seed)
    elif new_kind == "table":
        table_key = f"keep.map.table.{key}"
        if table_key not in st.session_state:
            st.session_state[table_key] = "\n".join(f"{s} {i}" for s, i, _ in current.rows())
        with st.form(f"row-edit-{key}", border=True):
            st.caption("Change one row: pick a symbol and the vocabulary id it should be fed as.")
            c1, c2, c3 = st.columns([1, 1, 1])
            symbol = c1.selectbox("Symbol", list(info.alphabet), key=f"w:map.row.symbol.{key}")
            new_id = int(c2.number_input("New id", min_value=0, max_value=vocab.size - 1, step=1,
                                         key=f"w:map.row.id.{key}"))
            c3.caption(f"id {new_id} is **{vocab.tokens[new_id] or '(unnamed)'}**")
            if st.form_submit_button("Apply to the table"):
                lines = st.session_state[table_key].splitlines()
                edited, seen = [], False
                for line in lines:
                    parsed, _ = _parse_table(line, info.alphabet)
                    if parsed and parsed[0][0] == symbol:
                        edited.append(f"{symbol} {new_id}")
                        seen = True
                    else:
                        edited.append(line)
                if not seen:
                    edited.append(f"{symbol} {new_id}")
                st.session_state[table_key] = "\n".join(edited)
        text = st.text_area("The table: one 'symbol id' a line", key=table_key, height=220)
        rows, problems = _parse_table(text, info.alphabet)
        if rows and not problems:
            try:
                mspec = MappingSpec("table", table=rows)
            except LabError as exc:
                problems.append(str(exc))
    else:
        mspec = MappingSpec(new_kind)
    return mspec, problems


def rerun_button(record, info, vocab, is_text: bool, mspec, problems: list[str], current_table, text_filter: str):
    """What the new mapping changes, and the button that reruns the same spec with it."""
    spec, key = record.spec, record.key
    proposed = None
    if mspec is not None and not problems:
        try:
            proposed = build_mapping(mspec, None if is_text else info.alphabet, vocab,
                                                 special_fix=RUN_SPECIAL_FIX)
        except LabError as exc:
            problems.append(str(exc))
    for problem in problems:
        st.error(f"This mapping cannot be used: {problem}")

    if proposed is not None:
        new_table = _table(proposed, text_filter)
        changed = views.mapping_diff(current_table, new_table)
        if changed.empty:
            st.info("This is the run's own mapping: rerunning it returns the stored result.")
        else:
            st.markdown(f"**{len(changed)} row(s) change** (of those shown):")
            st.dataframe(changed, hide_index=True, height=min(320, 38 + 35 * len(changed)))
        values = dict(spec, mapping=mspec.kind, mapping_k=mspec.k, mapping_seed=mspec.seed,
                      mapping_table=[list(r) for r in mspec.table])
        if st.button("▶ Rerun with this mapping", type="primary", key="btn.map.rerun"):
            try:
                submission = state.get_executor().submit(make_spec(**values), priority="interactive")
            except LabError as exc:
                st.error(str(exc))
            else:
                st.session_state["map.outcome"] = submission.outcome
                state.set_qp(run=key, rerun=submission.key)
                st.rerun()


# -------------------------------------------------------------------------------------- side by side
def side_by_side(lab, key: str, kind: str) -> None:
    rerun = state.qp("rerun")
    if rerun:
        other = lab_runs.record(lab, rerun)
        if other is None:
            st.warning(f"The rerun {rerun[:8]} is not in this store; pick a mapping and rerun again.")
            st.stop()
        outcome = st.session_state.pop("map.outcome", None)
        if outcome == "cached" or rerun == key:
            st.success("Same spec as a run that already finished: the result came from the store, nothing retrained.")
        st.subheader("Before and after")
        roles = [f"{kind} mapping (original)", f"{other.spec['mapping']} mapping (rerun)"]
        common.live_runs(lab, [key, rerun], roles, fragment_key="map-live",
                         title="Train loss (solid) and validation metric (dashed)")
        rows = []
        for role, k in zip(roles, [key, rerun]):
            result = result_of(lab, k)
            stored = lab_runs.record(lab, k)
            rows.append({"run": role, "status": stored.status if stored else None,
                         "mapping": stored.label if stored else "",
                         f"test {result.metric if result else ''}": result.test_value if result else None,
                         "best validation step": result.best_step if result else None,
                         "steps to converge": result.steps_to_converge if result else None,
                         "majority class": result.baseline.get("majority") if result else None})
        st.dataframe(pd.DataFrame(rows), hide_index=True)
        st.page_link(common.PAGES["compare"], label="Compare the two runs", icon=":material/bar_chart:",
                     query_params={"runs": f"{key[:12]},{rerun[:12]}"})


def main() -> None:
    st.title(":material/swap_horiz: Token mapping")
    lab = state.get_lab()
    record = common.pick_run_or_stop(
        lab, "No run with a token mapping yet. Runs on symbols (DNA, proteins, music, ListOps) or text feed their "
        "tokens through the model's vocabulary; bit and image runs feed vectors through a linear layer and have no "
        "mapping.", key="map.run", where=lambda r: r.spec.get("input_adapter") == "vocab")
    spec = record.spec
    key = record.key
    try:
        info = spec_info(spec)
        vocab = model_vocab(spec["model"])
        current = run_mapping(lab, record)
    except LabError as exc:
        st.error(str(exc))
        st.stop()
    is_text = info.input_kind == "text"
    current_table, text_filter = current_view(record, info, vocab, current, is_text)
    mspec, problems = new_mapping(record, info, vocab, current, is_text)
    rerun_button(record, info, vocab, is_text, mspec, problems, current_table, text_filter)
    side_by_side(lab, key, spec["mapping"])


main()
