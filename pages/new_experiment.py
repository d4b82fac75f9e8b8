"""New experiment: model x init x discipline x protocol, with budgets, seeds and sizes; shows the spec and the
command line that run the same, then submits it (or a pretrained-vs-random pair) to the worker.

Choices are remembered in session keys of our own, so leaving the page and coming back keeps them.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import streamlit as st

from labcore.door import runs as lab_runs
from labcore.door import catalogue, uploads, views
from labcore.door.catalogue import budget_device, defaults_family, known_positions
from labcore.door.data import discipline_available, discipline_info, discipline_names, discipline_title
from labcore.door.recipes import DEMO_BUDGET_NOTES, TRAIN_SIZE_NOTES
from labcore.door.runs import ResolvedSpec, RunSpec, make_spec, resolve_spec, results, train_defaults
from labcore.door.views import fmt_duration
from labcore.errors import LabError
from pages import common, state

common.through_router()


def choose(label: str, key: str, options: list[Any], default: Any, *, fmt=None, radio: bool = False,
           help: str | None = None, column=st) -> Any:
    widget = state.remember(key, default, options)
    maker = column.radio if radio else column.selectbox
    kwargs = dict(key=widget, help=help)
    if fmt is not None:
        kwargs["format_func"] = fmt
    if radio:
        kwargs["horizontal"] = True
    return state.keep(key, maker(label, options, **kwargs))



# --------------------------------------------------------------------------------------------- what
def what() -> tuple[str, str, str, str, Any, list]:
    """Model, init, discipline and protocol: ``(model, init, discipline, protocol, info, switches)``, where info
    describes the discipline (None where it cannot be read) and switches are the protocol's own."""
    backbones = catalogue.backbones()
    inits = catalogue.inits()
    protocols = catalogue.protocols()
    names = discipline_names()

    external_model = state.qp_external("model")  # "use this model" on Pretrain links here with ?model=lab:<name>
    if external_model in backbones:
        st.session_state[state.remember("exp.model", external_model, list(backbones))] = state.keep("exp.model",
                                                                                                 external_model)
    left, right = st.columns(2)
    with left:
        model = choose("Model", "exp.model", list(backbones), "minilm", help="Packaged pretrained backbones and the "
                       "models pretrained here (lab:, see Pretrain); any transformers folder works as local:<folder> "
                       "under Advanced.")
        st.caption(backbones[model])
        init = choose("Initialisation", "exp.init", list(inits), "pretrained", radio=True)
        st.caption(f"{init}: {inits[init]}")
    with right:
        discipline = choose("Discipline", "exp.discipline", names, "dna-splice" if "dna-splice" in names else names[0],
                            fmt=lambda n: f"{n} — {discipline_title(n)}" if not n.startswith("upload:") else n)
        try:
            info = discipline_info(discipline)
            ok, why = discipline_available(discipline)
            st.caption(f"{info.input_kind} → {info.output_kind}, metric {info.metric}. :material/description: "
                       f"{info.citation}")
            if not ok:
                st.warning(f"Not available here: {why}")
        except LabError as exc:
            info = None
            st.error(str(exc))
        protocol = choose("Protocol", "exp.protocol", list(protocols), "full")
        description, switches = protocols[protocol]
        st.caption(description)
    return model, init, discipline, protocol, info, switches


def protocol_switches(protocol: str, switches: list) -> dict[str, Any]:
    """A widget per switch of the protocol; returns the switches changed from their defaults."""
    protocol_params: dict[str, Any] = {}
    if switches:
        st.markdown("**Protocol switches**")
        cols = st.columns(min(4, len(switches)))
        for i, (name, kind, default) in enumerate(switches):
            col = cols[i % len(cols)]
            widget = f"exp.p.{protocol}.{name}"
            if kind is bool:
                value = col.checkbox(f"train {name}" if protocol == "frozen" else name, value=bool(default), key=widget)
            elif kind is int:
                value = int(col.number_input(name, value=int(default), step=1, key=widget))
            elif kind is float:  # a learning rate: steps of its own size, shown as 0.001 rather than 0.00
                value = float(col.number_input(name, value=float(default), step=float(default) or 0.01, format="%g",
                                               key=widget))
            elif name == "mode":
                value = col.selectbox(name, ["reinit", "preserve"], index=0 if default == "reinit" else 1, key=widget,
                                      help="reinit: re-initialise the block; preserve: keep it, re-initialise the rest")
            else:
                value = col.text_input(name, value=str(default), key=widget)
            if value != default:
                protocol_params[name] = value
    return protocol_params


def how() -> tuple[str, str, list[int]]:
    """Budget, training-set size and seeds."""
    b1, b2, b3 = st.columns(3)
    with b1:
        budget = choose("Budget", "exp.budget", list(catalogue.BUDGETS), "quick", radio=True)
        st.caption(DEMO_BUDGET_NOTES[budget])
    with b2:
        train_size = choose("Training-set size", "exp.train_size", list(catalogue.TRAIN_SIZES), "full", radio=True,
                            fmt=lambda s: {"full": "full", "1%": "1 %", "500": "500", "5000": "5k"}[s])
        st.caption(TRAIN_SIZE_NOTES[train_size])
    with b3:
        seed_widget = state.remember("exp.seeds", [0])
        seeds = state.keep("exp.seeds", st.multiselect("Seeds", list(range(10)), key=seed_widget,
                                                          help="One run per seed; three or more give error bars and "
                                                               "95 % intervals on Compare."))
    return budget, train_size, seeds


def fold_choice(name: str) -> int:
    """k-fold cross-validation, offered where an upload's fixed split leaves too small a test set: the number
    of folds chosen (0: the fixed split)."""
    if not name.startswith("upload:"):
        return 0
    try:
        up = uploads.upload_info(name)
    except LabError:
        return 0
    why = views.small_test_warning(*uploads.expected_test_size(up))
    if not why or up.options.split_field:  # a file's own split is the user's: the folds would ignore it
        return 0
    left, right = st.columns([3, 1])
    chosen = left.checkbox("Cross-validate in k folds", key="exp.folds",
                           help=f"Offered where the fixed 80/10/10 split would leave a test set under "
                                f"{views.SMALL_TEST} examples or of one class, as it does here: {why}.")
    k = int(right.number_input("folds (k)", min_value=uploads.MIN_FOLDS, max_value=uploads.MAX_FOLDS, value=5,
                               step=1, key="exp.folds.k", disabled=not chosen))
    units = sum(up.class_units or up.class_counts)
    what = "files" if up.kind == "midi" else "records"
    if chosen:
        st.caption(f":material/splitscreen: {k}-fold cross-validation: the {units:,} {what} are cut into {k} folds "
                   f"(seeded, each class spread evenly); run i tests on fold i, about {round(units / k):,} {what}, "
                   f"and trains on the others (a ninth of them validates). Every {what[:-1]} is tested once; the {k} "
                   f"runs of a seed form one group, and Compare counts the folds as repeats: mean ± std and the 95 % "
                   f"interval over folds and seeds.")
    else:
        st.caption(f"The data are small for a fixed split ({why}): k-fold cross-validation tests every "
                   f"{what[:-1]} once, in k runs.")
    return k if chosen else 0



# ------------------------------------------------------------------------------------------ advanced
def advanced(budget: str, protocol: str, model: str) -> tuple[dict[str, Any], str, str]:
    """The Advanced expander: ``(overrides, other model, discipline parameters as typed)``."""
    device_kind = budget_device()  # the budget's values for where the workers train (standard: larger on a GPU)
    defaults = train_defaults(budget, protocol, device_kind)
    family = defaults_family(budget, protocol)
    overrides: dict[str, Any] = {}
    with st.expander("Advanced: hyper-parameters, token mapping, model folder"):
        st.caption(f"Defaults of the {budget} budget for this protocol{' on a GPU' if device_kind == 'cuda' else ''}; "
                   f"change one and only that one goes into the spec.")
        cols = st.columns(4)
        for i, param in enumerate(catalogue.BUDGET_PARAMS):  # one widget per hyper-parameter
            col = cols[i % 4]
            name = param.name
            widget = f"exp.adv.{budget}.{family}.{name}"  # new defaults (budget, protocol family) reset the widget
            default = defaults[name]
            if "choices" in param.metadata:
                options = list(param.metadata["choices"])
                value = col.selectbox(name, options, index=options.index(default), key=widget)
            elif param.type == "int":
                value = int(col.number_input(name, value=int(default), step=1, min_value=0, key=widget))
            else:
                value = float(col.number_input(name, value=float(default), format="%g", min_value=0.0, key=widget))
            if value != default:
                overrides[name] = value
        st.markdown("**Inputs**")
        cols = st.columns(4)
        mapping = cols[0].selectbox("Token mapping", list(catalogue.MAPPING_KINDS), key="exp.adv.mapping",
                                    help="auto: identity for text, random for symbols (Kao & Lee §2.2)")
        if mapping != "auto":
            overrides["mapping"] = mapping
        if mapping == "shift":
            overrides["mapping_k"] = int(cols[1].number_input("shift k", value=RunSpec.mapping_k, min_value=0, step=1,
                                                              max_value=catalogue.COUNT_LIMIT - 1, key="exp.adv.k"))
        if mapping == "random":
            overrides["mapping_seed"] = int(cols[1].number_input("mapping seed", value=0, min_value=0, step=1,
                                                                 key="exp.adv.mseed"))
        adapter = cols[2].selectbox("Input adapter", list(catalogue.INPUT_ADAPTERS), key="exp.adv.adapter")
        if adapter != "auto":
            overrides["input_adapter"] = adapter
        pooling = cols[3].selectbox("Readout (pooling)", list(catalogue.POOLINGS), key="exp.adv.pooling")
        if pooling != "auto":
            overrides["pooling"] = pooling
        cols = st.columns(4)
        precision = cols[0].selectbox("Precision", list(catalogue.PRECISIONS), key="exp.adv.precision")
        if precision != "auto":
            overrides["precision"] = precision
        max_length = int(cols[1].number_input(
            "max_length (0: the discipline's)", value=0, min_value=0, step=1, key="exp.adv.max_length",
            help=f"0 or at least {catalogue.MIN_MAX_LENGTH} tokens (room for [CLS], [SEP] and a few symbols); a value "
                 f"above the model's positions is cut to them."))
        if max_length:
            overrides["max_length"] = max_length
        model_text = cols[2].text_input("Other model", key="exp.adv.model", placeholder="local:/path or tiny:bert",
                                        help="Overrides the model above: local:<transformers folder>, hub:<id> (needs "
                                             "the hub), tiny:<family> (a tiny random model for trials).")
        dparams_text = cols[3].text_input("Discipline parameters (JSON)", key="exp.adv.dparams",
                                          placeholder='{"seed": 1}')
        if st.checkbox("deterministic: one CPU thread throughout and torch's deterministic algorithms, so a rerun "
                       "gives the same weights (slower; otherwise a run trains on the cores it finds free)",
                       key="exp.adv.deterministic"):
            overrides["deterministic"] = True
        chosen_model = model_text.strip() or model
        positions = known_positions(chosen_model)
        cols[1].caption(f"{chosen_model} takes {positions:,} positions (with [CLS] and [SEP])." if positions else
                        f"{chosen_model}: no fixed position limit known here.")
    return overrides, model_text, dparams_text


def discipline_params(dparams_text: str, seeds: list[int]) -> tuple[dict[str, Any], list[str]]:
    """The discipline parameters typed under Advanced, and what keeps the form from making a spec."""
    dparams: dict[str, Any] = {}
    errors: list[str] = []
    if dparams_text.strip():
        try:
            dparams = json.loads(dparams_text)
            if not isinstance(dparams, dict):
                raise ValueError
        except ValueError:
            errors.append('Discipline parameters must be a JSON object such as {"n_train": 500}; fix the text under '
                          'Advanced or clear it.')
    if not seeds:
        errors.append("Pick at least one seed.")
    return dparams, errors


# ---------------------------------------------------------------------------------------- the spec(s)
def build_specs(fields: dict[str, Any], seeds: list[int], folds: int,
                errors: list[str]) -> tuple[list[RunSpec], list[ResolvedSpec]]:
    """One spec per seed (and fold) and its resolution, with any refusal added to ``errors``.

    Each spec is resolved once, here, by the function the submission would call: the page shows the resolutions
    and the buttons submit them, so what is shown is what runs."""
    specs: list[RunSpec] = []
    resolved: list[ResolvedSpec] = []
    if not errors:
        try:
            base = make_spec(**fields)
            specs = [base.replace(seed=s) for s in seeds]
            if folds:  # seed by seed, its folds: one condition, k runs per seed
                specs = [fold for s in specs for fold in uploads.fold_specs(s, folds)]
            resolved = [resolve_spec(spec) for spec in specs]
        except LabError as exc:
            errors.append(str(exc))
    return specs, resolved


def length_note(resolved: ResolvedSpec, info: Any) -> None:
    """The model's position limit against the discipline's longest example, where the second is longer."""
    positions = known_positions(resolved.model)
    if info is None or info.input_kind != "tokens" or not positions:
        return
    asked = resolved.max_length or info.max_length + 2  # + [CLS] and [SEP]
    if asked > positions:
        st.warning(f"The longest example has {info.max_length:,} symbols, but {resolved.model} takes {positions:,} "
                   f"positions: every longer input is cut to {positions - 2:,} symbols (the run's notes say so). To "
                   f"keep every symbol, upload the file again with 'cut into windows' (evaluation votes over a "
                   f"record's windows).", icon=":material/content_cut:")


def small_test_note(name: str, folds: int) -> None:
    """Where an upload's test split is too small for its accuracy to mean much, say so before it runs."""
    if not name.startswith("upload:"):
        return
    try:
        up = uploads.upload_info(name)
    except LabError:
        return
    n, classes = uploads.expected_test_size(up, folds)
    why = views.small_test_warning(n, classes)
    if why and folds:
        st.info(f"Each fold's test set is small ({why}), but the {folds} folds together test all "
                f"{sum(up.class_units or up.class_counts):,}: read Compare's mean ± std and interval over the folds, "
                f"not one fold's accuracy.", icon=":material/splitscreen:")
    elif why:
        st.warning(f"Too small to compare: {why}. Each class keeps at least 2 examples in every split; upload more "
                   f"examples for a test set of {views.SMALL_TEST} or more (Runs shows each accuracy with its 95 % "
                   f"Wilson interval).", icon=":material/warning:")


def measured_speed(resolved: ResolvedSpec, mean_tokens: float) -> catalogue.MeasuredSpeed | None:
    """The training speed finished runs of this model and protocol measured here."""
    lab = state.get_lab()
    wanted = (resolved.model, resolved.protocol)
    keys = [r.key for r in lab_runs.runs(lab, status="done") if (r.spec.get("model"), r.spec.get("protocol")) == wanted]
    return catalogue.measured_speed(results(lab, keys), resolved.model, resolved.protocol, resolved.discipline,
                                mean_tokens=mean_tokens)


def time_note(resolved: ResolvedSpec, runs: int) -> None:
    """How long an upload's run takes, from its sizes and the speed measured here (or a typical one)."""
    if not resolved.discipline.startswith("upload:"):
        return
    try:
        up = uploads.upload_info(resolved.discipline)
    except LabError:
        return
    if not up.n_symbols:
        return
    mean = up.n_symbols / up.n_examples + 2  # [CLS] and [SEP]
    rate = measured_speed(resolved, mean)
    if rate is None:
        st.caption(f":material/timer: No run of {resolved.model} ({resolved.protocol}) has finished here yet, so "
                   f"there is no speed to promise a time from; the first run measures it.")
        return
    folds = int(dict(resolved.discipline_params).get("folds", 0))
    guess = catalogue.estimate_time(resolved, uploads.expected_sizes(up, folds), mean, tokens_per_s=rate.tokens_per_s)
    total = f" ({fmt_duration(guess.seconds * runs)} for the {runs} runs, one after another)" if runs > 1 else ""
    st.caption(f":material/timer: About {fmt_duration(guess.seconds)} a run on {os.cpu_count() or 1} free "
               f"cores{total}, at the speed {rate.words}: {guess.kept:,} training examples of {mean:.0f} tokens, "
               f"{guess.steps:,} steps, {guess.evaluations} validations. Other work on the machine slows it several "
               f"times over; the run's notes say how many threads it had.")


def what_will_run(specs: list[RunSpec], resolved: list[ResolvedSpec], errors: list[str], seeds: list[int], folds: int,
                  info, discipline: str) -> None:
    st.subheader("What will run")
    for message in errors:
        st.error(message)
    if resolved:
        labels = [r.label() for r in resolved]
        st.markdown(f"**{len(specs)} run{'s' if len(specs) > 1 else ''}:** " + ", ".join(labels))
        more = ([f"folds 1 to {folds - 1} (--dparam fold=N)"] if folds else []) + \
            ([f"seeds {', '.join(map(str, seeds[1:]))}"] if len(seeds) > 1 else [])
        st.code(specs[0].cli() + (f"   # and {' and '.join(more)}" if more else ""), language="bash", wrap_lines=True)
        first = resolved[0]
        length_note(first, info)
        small_test_note(discipline, folds)
        time_note(first, len(specs))
        with st.expander("The resolved spec (every default filled in; its hash is the run's key)"):
            st.code(json.dumps(first.to_dict(), indent=1, sort_keys=True), language="json")
            st.caption(f"key {first.key}")


def _go(group: str | None, keys: list[str]) -> None:
    if group:
        st.switch_page(common.PAGES["runs"], query_params={"group": group})
    st.switch_page(common.PAGES["runs"], query_params={"run": keys[0]})


def paired(specs: list[RunSpec], resolved: list[ResolvedSpec]) -> list[ResolvedSpec]:
    """Every spec pretrained and randomly initialised: the resolutions shown where their init is the one asked
    for, the others resolved now (each spec once)."""
    return [r if r.init == init else resolve_spec(s.replace(init=init))
            for init in ("pretrained", "random") for s, r in zip(specs, resolved)]


def submit_buttons(specs: list[RunSpec], resolved: list[ResolvedSpec], discipline: str, folds: int) -> None:
    executor = state.get_executor()
    c1, c2 = st.columns(2)
    run_clicked = c1.button("▶ Run", type="primary", disabled=not resolved, key="btn.exp.run")
    pair_clicked = c2.button("▶ Run pretrained vs random", disabled=not resolved, key="btn.exp.pair",
                             help="The same spec twice, pretrained and randomly initialised, for every seed: the "
                                  "papers' basic comparison.")
    if run_clicked or pair_clicked:
        try:
            # The resolutions shown above go to the store as they are: the submission resolves nothing again.
            if pair_clicked:
                pair = paired(specs, resolved)
                group = f"pair:{discipline}:{pair[0].key[:8]}"
                subs = executor.submit_group(group, pair, priority="interactive")
            elif len(resolved) > 1:  # seeds, or the folds of a cross-validation: one condition's repeats
                group = f"{'folds' if folds else 'seeds'}:{discipline}:{resolved[0].key[:8]}"
                subs = executor.submit_group(group, resolved, priority="interactive")
            else:
                group = None
                subs = [executor.submit(resolved[0], priority="interactive")]
        except LabError as exc:
            st.error(str(exc))
        else:
            st.session_state["exp.submitted"] = [(s.key, s.outcome) for s in subs]
            st.session_state["exp.submitted_at"] = time.time()
            _go(group, [s.key for s in subs])


def main() -> None:
    st.title(":material/science: New experiment")
    st.caption("Pick what to train and how; the spec below is exactly what the worker runs, and the command line "
               "under it runs the same from a terminal. A spec that already ran comes back from the store at once.")
    model, init, discipline, protocol, info, switches = what()
    protocol_params = protocol_switches(protocol, switches)
    budget, train_size, seeds = how()
    folds = fold_choice(discipline)
    overrides, model_text, dparams_text = advanced(budget, protocol, model)
    if model_text.strip():
        model = model_text.strip()
    dparams, errors = discipline_params(dparams_text, seeds)
    fields = dict(model=model, init=init, discipline=discipline, protocol=protocol, budget=budget,
                  train_size=train_size, protocol_params=protocol_params, discipline_params=dparams, **overrides)
    specs, resolved = build_specs(fields, seeds, folds, errors)
    what_will_run(specs, resolved, errors, seeds, folds, info, discipline)
    submit_buttons(specs, resolved, discipline, folds)


main()
