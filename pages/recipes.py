"""Recipes: each paper's headline experiment as one plan of real jobs, run with one button, and its report: a
verdict on every claim with the numbers that decide it, the tables and figures in the paper's shape, and the
paper's own numbers beside them.

``?recipe=NAME&budget=quick&seeds=0,1,2`` (or ``seeds=sequential``, the default: the sequential rule chooses)
names what is shown, so a link or a reload opens it again. The page drives the plan with
:func:`labcore.recipes.drive.advance`, the same driver as ``python -m labcore recipe run``: the button queues the
first stage (and retries what failed), and every refresh of the live view queues the stages whose earlier
stages have ended, and the rule's next seeds for the claims still open. It never trains and never waits.
"""

from __future__ import annotations

import math

import streamlit as st

from labcore.door import runs as lab_runs
from labcore.door.recipes import (BUDGET_NOTES, BUDGETS, DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_MEASURED, OPEN,
                                  PAPERS, RECIPES, RULE, TUNING_TITLE, Plan, Recipe, expected_of,
                                  expected_sentence, headline_line, plan_for, plan_keys, progress, results_of,
                                  secondary_line, seeds_words, step, summary_line, to_csv, to_html)
from labcore.door.views import fmt_duration
from labcore.errors import LabError
from pages import common, state

common.through_router()

# How a verdict's word is coloured (the words themselves are defined in labcore.recipes.verdict only).
WORD_COLOURS = {HOLDS: "green", DOES_NOT_HOLD: "red", INCONCLUSIVE: "orange", OPEN: "blue", NOT_MEASURED: "gray"}
SEED_CHOICES = list(range(10))


def _title(name: str) -> str:
    return RECIPES[name].title


# ------------------------------------------------------------------------------------------- choose
def choose_recipe(names: list[str]) -> tuple[str, Recipe]:
    widget = state.remember("rec.recipe", names[0], names)
    wanted = state.qp_external("recipe")
    if wanted in names:
        st.session_state[widget] = wanted
    elif wanted:
        st.error(f"There is no recipe {wanted!r}; the recipes are {', '.join(names)}.")
    name = state.keep("rec.recipe", st.radio("Recipe", names, key=widget, format_func=_title))
    return name, RECIPES[name]


def settings(choices, name: str, recipe: Recipe) -> tuple[str, bool, list[int], int]:
    """The budget, the seeds (or the sequential rule) and its cap: ``(budget, sequential, seeds, cap_minutes)``."""
    with choices:
        budget_widget = state.remember("rec.budget", "quick", list(BUDGETS))
        wanted_budget = state.qp_external("budget")
        if wanted_budget in BUDGETS:
            st.session_state[budget_widget] = wanted_budget
        budget = state.keep("rec.budget", st.radio("Budget", list(BUDGETS), key=budget_widget, horizontal=True))
        st.caption(BUDGET_NOTES[budget])
        seeds_key = f"rec.seeds.{name}.{budget}"  # each recipe and budget keeps its own seeds
        seeds_widget = state.remember(seeds_key, list(recipe.default_seeds[budget]))
        rule_widget = state.remember("rec.sequential", True)
        wanted_seeds = state.qp_external("seeds")
        if wanted_seeds == "sequential":
            st.session_state[rule_widget] = True
        elif wanted_seeds:
            try:
                st.session_state[seeds_widget] = [int(s) for s in wanted_seeds.split(",") if s.strip()]
                st.session_state[rule_widget] = False
            except ValueError:
                st.error(f"seeds={wanted_seeds!r} in the address is not a list of whole numbers like 0,1,2.")
        sequential = state.keep("rec.sequential", st.toggle(
            "Seeds as the sequential rule needs them", key=rule_widget,
            help="3 seeds first; where a claim is still open after them, 5, then 8, for the runs that claim reads "
                 "only. Off: exactly the seeds below."))
        seeds = sorted(state.keep(seeds_key, st.multiselect(
            "Seeds", SEED_CHOICES + [s for s in st.session_state[seeds_widget] if s not in SEED_CHOICES],
            key=seeds_widget, disabled=sequential,
            help="Each seed repeats every condition (its data order, token mapping and head initialisation); the "
                 "verdicts pair the conditions by seed.")))
        cap_widget = state.remember("rec.cap", 0)
        cap_minutes = state.keep("rec.cap", st.number_input(
            "Cap (minutes of run time, 0: none)", min_value=0, step=15, key=cap_widget, disabled=not sequential,
            help="The rule starts no further look that would take the whole recipe past this much run time; the "
                 "claims still open then read inconclusive."))
    return budget, sequential, seeds, cap_minutes


def about_section(about, recipe: Recipe, plan: Plan, budget: str) -> None:
    with about:
        st.markdown(f"**Paper:** {PAPERS.get(recipe.paper, recipe.paper)}")
        st.markdown("**Claims tested**\n\n" + "\n".join(
            f"- {'' if c.headline else '*the lab’s question:* '}{c.text} *({c.section}"
            + (f"; the paper: {c.paper}" if c.paper else "") + ")*" for c in recipe.claims))
        if plan.cuts:
            with st.expander(f"What the {budget} budget leaves out of the paper's experiment ({len(plan.cuts)})"):
                st.markdown("\n".join(f"- {c}" for c in plan.cuts))


# ------------------------------------------------------------------------------------------- run
def _started(plan: Plan) -> bool:
    """Was this plan driven here (by the page or the CLI)? Only then does a refresh queue its later stages."""
    return plan.group in lab_runs.groups(state.get_lab())


def _advance(plan: Plan, *, retry: bool = False):
    """One step of the driver, in this session's name (its queue cap counts the recipe's jobs like any)."""
    outcome = step(state.get_executor(), plan, retry=retry)
    # A retry the queue cap cut short goes on retrying at the next refreshes, until nothing is held back.
    st.session_state[f"_rec_retry:{plan.group}"] = retry and outcome.held > 0
    return outcome


def _run(plan: Plan) -> None:
    try:
        outcome = _advance(plan, retry=True)
    except LabError as exc:
        st.session_state["_rec_error"] = str(exc)
        return
    st.session_state["_rec_errors"] = outcome.errors


def run_section(choices, recipe: Recipe, plan: Plan, results, lab) -> None:
    """What the plan is expected to take here, and the button that runs (or retries) it."""
    with choices:
        st.markdown(f"**Expected on this machine:** {len(plan.steps)} jobs in {len(plan.stages)} "
                    f"stage{'s' if len(plan.stages) != 1 else ''}; {expected_sentence(recipe, plan, results)}.")
        if plan.sequential:
            st.caption(f":material/science: {seeds_words(plan)}.")
        now = progress(plan, lab)
        label = "▶ Run this recipe"
        if now.ended and now.failed:
            label = f"▶ Retry the {now.failed} job{'s' if now.failed != 1 else ''} that did not finish"
        elif now.ended:
            label = "▶ Run again (every job comes from the store)"
        st.button(label, key="btn.rec.run", type="primary", on_click=_run, args=(plan,),
                  help="Queues the recipe's jobs for the background worker, stage by stage; finished jobs come from "
                       "the store, failed ones are tried again.")
        if plan.adjusted:
            st.caption(f":material/tune: Every job is changed by {plan.adjusted} (TRANSFERLAB_RECIPE_ADJUST).")
        error = st.session_state.pop("_rec_error", None)
        if error:
            st.error(error)
        for message in st.session_state.pop("_rec_errors", ()):
            st.warning(message)


# ------------------------------------------------------------------------------------------- progress
def _progress_text(now, left_s: float, workers: int) -> str:
    parts = [f"**{now.done} of {now.total}** jobs done"]
    parts += [f"{n} {what}" for n, what in ((now.failed, "failed"), (now.running, "running"), (now.queued, "queued"),
                                            (now.unsubmitted, "not queued yet")) if n]
    if not now.ended and not math.isnan(left_s):
        # one job at a time per worker: the run time still to go, shared by the workers
        parts.append(f"about {fmt_duration(left_s / max(1, workers))} left")
    return " · ".join(parts)



def live_view(recipe: Recipe, plan: Plan, ended_at_draw: int, active: bool) -> None:
    """The recipe's progress and the live curve of its running job; each refresh also advances the plan."""
    def body() -> None:
        lab = state.get_lab()
        if _started(plan) and not progress(plan, lab).ended:
            now = _advance(plan, retry=bool(st.session_state.get(f"_rec_retry:{plan.group}")))
        else:
            now = progress(plan, lab)
        _, left = expected_of(recipe, plan, results_of(plan, lab))
        workers = len(lab_runs.workers(lab))
        st.progress((now.done + now.failed) / max(1, now.total), text=_progress_text(now, left, workers))
        if now.held:
            st.caption(f":material/schedule: {now.held} job{'s' if now.held != 1 else ''} wait for room in your "
                       f"queue (one person may have only so many jobs waiting at a time); this view queues them as "
                       f"the earlier ones start.")
        for message in now.errors:
            st.warning(message)
        if (now.queued or now.running) and not workers:
            st.caption("No worker is running yet: one starts with the first queued job (see the sidebar).")
        if now.running_keys:
            key = now.running_keys[0]
            record = lab_runs.record(lab, key)
            st.markdown(f"**Running now:** {record.label_or(key) if record is not None else key}")
            fig, runs = common.curves_figure(lab, [key], title="train loss (solid) and validation metric (dashed)")
            common.progress_rows(lab, [key])
            st.plotly_chart(fig, key="rec-live-chart", config={"displaylogo": False})
            st.caption(f"{sum(len(r.train_loss) for r in runs)} train-loss points so far")
            st.page_link(common.PAGES["runs"], label="Every job of this recipe on Runs", icon=":material/list_alt:",
                         query_params={"group": plan.group})
        if now.done + now.failed != ended_at_draw:
            st.rerun()  # a job ended: redraw the page once, so the report below counts it

    st.fragment(body, run_every=common.REFRESH.live_runs_s if active else None)()


# ------------------------------------------------------------------------------------------- report
def show_report(report) -> None:
    st.subheader("Report")
    st.caption(summary_line(report) + ("" if report.complete else
                                       " · a partial report: conditions without a finished job read \"not "
                                       "measured\""))
    st.markdown("#### Claims and verdicts")
    st.markdown(f"**{headline_line(report)}.** The lab's own questions are listed with them and not counted.")
    settled = sum(1 for _, v in report.claims if v.decided)
    still = sum(1 for _, v in report.claims if v.word == OPEN)
    if still:
        st.caption(f":material/hourglass_top: {settled} settled, {still} still open: the rule adds seeds to the "
                   f"open ones only.")
    shown = None
    for claim, verdict in report.claims:
        if claim.id != shown:
            who = "" if claim.headline else "*The lab's question, not the paper's:* "
            paper = f"; the paper: {claim.paper}" if claim.paper else ""
            why = f" — {claim.why}" if claim.why else ""
            st.markdown(f"{who}**{claim.text}** *({claim.section}{paper})*{why}")
            shown = claim.id
        colour = WORD_COLOURS.get(verdict.word, "gray")
        st.markdown(f"- :{colour}[**{verdict.word}**] · `{verdict.claim}`: {verdict.sentence()}")
        st.caption(secondary_line(verdict))
    st.caption(RULE)
    if report.cuts:
        with st.expander(f"What this budget leaves out ({len(report.cuts)})"):
            st.markdown("\n".join(f"- {c}" for c in report.cuts))
    for title, frame in report.tables:
        st.markdown(f"#### {title}")
        st.dataframe(frame)
    if report.tuning is not None:
        st.markdown(f"#### {TUNING_TITLE}")
        st.dataframe(report.tuning)
    if report.paper_numbers:
        st.markdown("#### The paper's numbers")
        for numbers in report.paper_numbers:
            st.markdown(f"**{numbers.source}**")
            st.dataframe(numbers.table)
    for i, (title, figure) in enumerate(report.figures):
        st.markdown(f"#### {title}")
        st.plotly_chart(figure, key=f"rec-fig-{i}", config={"displaylogo": False})
    if report.notes:
        st.markdown("#### Notes")
        st.markdown("\n".join(f"- {n}" for n in report.notes))


def downloads(recipe: Recipe, plan: Plan, results, report) -> None:
    stem = f"recipe-{recipe.name}-{plan.budget}-" + ("sequential" if plan.sequential else
                                                      f"seeds-{'-'.join(map(str, plan.seeds))}")
    left, right = st.columns(2)
    # The files are built when a button is pressed (the HTML carries plotly.js, a few MB), not on every redraw.
    left.download_button("Report (HTML, figures included)", data=lambda: to_html(report), file_name=f"{stem}.html",
                         mime="text/html", key="rec.html", on_click="ignore", icon=":material/download:")
    right.download_button("Every number and verdict (CSV)", data=lambda: to_csv(report, plan, results),
                          file_name=f"{stem}.csv", mime="text/csv", key="rec.csv", on_click="ignore",
                          icon=":material/download:")


def _shown(plan: Plan, results, lab):
    """The results a student may see: a class lesson's runs (the tamkin lesson's are two of the recipe's) read as
    not finished until the teacher reveals them, so the report cannot give the answer away."""
    hidden = common.hidden_runs(lab)
    if not hidden:
        return results
    keys = plan_keys(plan)
    withheld = {step for step, result in results.items() if result is not None and keys[step] in hidden}
    if withheld:
        st.caption(f":material/visibility_off: {len(withheld)} finished run(s) of this recipe belong to a class lesson "
                   f"whose answer is not revealed yet: the report leaves them out until the reveal.")
    return {step: None if step in withheld else result for step, result in results.items()}


def main() -> None:
    st.title(":material/menu_book: Recipes")
    st.caption("Each paper's headline experiment as one plan of real runs on this machine, and a report that says, "
               "claim by claim, whether the claim holds here, with the numbers that decide it beside the paper's own.")

    names = RECIPES.names()
    if not names:
        st.info("No recipe is registered (labcore/recipes/__init__.py lists them).")
        st.stop()
    name, recipe = choose_recipe(names)
    about, choices = st.columns([3, 2], gap="large")
    budget, sequential, seeds, cap_minutes = settings(choices, name, recipe)
    state.set_qp(recipe=name, budget=budget, seeds="sequential" if sequential else [str(s) for s in seeds])
    if not sequential and not seeds:
        st.warning("Pick at least three seeds (a claim's first look needs three pairs), or let the rule choose.")
        st.stop()
    if not sequential and len(seeds) < 3:
        choices.caption(":material/info: With fewer than three seeds no claim gets a look: every verdict will read "
                        "inconclusive.")
    lab = state.get_lab()
    try:
        plan = plan_for(recipe, budget, None if sequential else seeds, lab,
                        cap_s=cap_minutes * 60 if cap_minutes else math.inf)
    except LabError as exc:
        st.error(str(exc))
        st.stop()
    results = _shown(plan, results_of(plan, lab), lab)
    finished = sum(1 for r in results.values() if r is not None)
    about_section(about, recipe, plan, budget)
    run_section(choices, recipe, plan, results, lab)
    started = _started(plan)
    at_draw = progress(plan, lab)
    if started or finished:
        st.subheader("Progress")
        live_view(recipe, plan, at_draw.done + at_draw.failed, active=started and not at_draw.ended)
    if finished:
        report = recipe.report(plan, results)
        show_report(report)
        downloads(recipe, plan, results, report)
    elif not started:
        st.info("Nothing of this recipe has run in this store yet: press **Run this recipe**. The report builds "
                "itself from the finished jobs, so it can be read while the rest still runs.")


main()
