"""Tamkin et al. (2020), "Investigating transferability in pretrained language models": partial
re-initialisation of MiniLM on movie-review sentiment (their SST-2), as one recipe.

Layers are MiniLM's six, numbered 1-6 from the input (Tamkin et al.'s BERT-base has twelve); word and
position embeddings are never re-initialised, and every model is fine-tuned end to end afterwards.

* Fig. 2 shape: incremental re-initialisation (``reinit_after`` k: layers 1..k keep their pretrained weights,
  the rest are redrawn; k = 0 keeps only the embeddings, k = 6 is the pretrained model) at 500 and 5,000
  training examples, with probing accuracy per layer beside it (``probe`` layer l: a linear head on the
  mean of hidden state l, 0 the embedding output, the body frozen).
* Fig. 3 shape: localised re-initialisation of blocks of two consecutive layers (Tamkin: three of twelve),
  each block re-initialised (is it necessary?) or preserved alone (is it sufficient?), with k = 6 and k = 0
  as the reference lines.
* Fig. 4 shape: five random orders of the pretrained layers (``permute_layers``), fine-tuned, against the
  unpermuted pretrained model. As Tamkin et al. use permutation n in their n-th trial, permutation i is
  trial i (run seed i); the unpermuted model's trials are the recipe's seeds, so the verdict pairs the two
  by seed where those are the same five trials and uses Welch's interval otherwise.

Intervals are 95 % t-intervals over trials, as the paper's. The quick budget keeps every figure at 500
examples and cuts the grid (see :data:`CUTS`): k in {0, 3, 6}, the first and last block, probes of
hidden states 0, 3 and 6, and the quick budget's learning rate and batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from labcore.recipes.demos import PAPERS
from labcore.results.metrics import aggregate
from labcore.recipes.base import Claim, Plan, Recipe, Step
from labcore.recipes.gate import BEST
from labcore.recipes.report import (Report, cell, grid_table, judge, judged, levels_gate, majority_floors, new_report,
                                    sides_gate, values_by_seed)
from labcore.recipes.verdict import ClaimTest
from labcore.runspec import make_spec

TASK = "text-sentiment"
LAYERS = 6  # MiniLM's; every layer index below counts these
MIDDLE = LAYERS // 2
BLOCK = 2  # layers a localised block spans: a third of MiniLM, as close to Tamkin's 3 of 12 as 6 layers allow
PERMUTATIONS = 5


@dataclass(frozen=True)
class TamkinBudget:
    run_budget: str  # the RunSpec budget every run uses
    sizes: tuple[str, ...]  # training-set sizes of fig. 2
    main_size: str  # the training-set size of figs. 3 and 4
    ks: tuple[int, ...]  # reinit_after k of fig. 2 (0 and LAYERS always: the references of figs. 3 and 4)
    blocks: tuple[int, ...]  # first layers (0-based) of the blocks of fig. 3, each re-initialised and preserved
    probe_layers: tuple[int, ...]  # hidden states probed (0: the embedding output)
    probe_size: str  # the probes' training-set size (Tamkin: the full training set)
    fine_tune: tuple[tuple[str, Any], ...] = ()  # fine-tuning hyper-parameters (none: the run budget's own)
    small_epochs: float = 0.0  # epochs at 500 examples (Tamkin, appendix E: 5); 0: as the other sizes
    probe: tuple[tuple[str, Any], ...] = ()  # probe hyper-parameters (none: the run budget's own)
    # the larger size of the data-size question where ``sizes`` has one size only: k = 0 and k = MIDDLE run there too,
    # for ``large_epochs`` epochs (Tamkin, appendix E: 3 at 5,000 examples)
    large_size: str = ""
    large_epochs: float = 3.0


BUDGETS = {
    # quick: 5 epochs of 500 examples, as Tamkin et al. train at that size (batch 16: 160 steps), validated
    # once, after the last step, as they evaluate the model their epochs end with (a validation of the 1,241
    # snippets costs a third of the training); 35 runs, probes included (one forward pass over the data, then
    # a head on cached features)
    "quick": TamkinBudget("quick", ("500",), "500", (0, MIDDLE, LAYERS), (0, LAYERS - BLOCK), (0, MIDDLE, LAYERS),
                          "500", (("epochs", 5.0), ("eval_every", 160)), large_size="5000"),
    "standard": TamkinBudget("standard", ("500", "5000"), "5000", tuple(range(LAYERS + 1)),
                             tuple(range(LAYERS - BLOCK + 1)), tuple(range(LAYERS + 1)), "full"),
    # Tamkin et al.'s own: Adam 2e-5, batch 8, 3 epochs (the "paper" budget of the re-initialising protocols);
    # 5 epochs at 500 examples; probes with early stopping for at most 40 epochs on the full training set
    "paper": TamkinBudget("paper", ("500", "5000"), "5000", tuple(range(LAYERS + 1)),
                          tuple(range(LAYERS - BLOCK + 1)), tuple(range(LAYERS + 1)), "full", (), 5.0,
                          (("epochs", 40.0), ("patience", 5))),
}
CUTS = {
    "quick": ("MiniLM (6 layers) for BERT-base (12); blocks of 2 layers for Tamkin's 3",
              "movie-review snippets (Rotten Tomatoes) for SST-2; no QNLI or CoLA",
              "500 training examples for every figure: figs. 3 and 4 at 500 examples instead of 5,000; at 5,000 "
              "examples only k = 0 and k = 3 (3 epochs), for the data-size question; no 50,000-example curve",
              "fig. 2: k in {0, 3, 6} instead of every k; fig. 3: the first and the last block only; probes of "
              "hidden states 0, 3 and 6 only, trained on the same 500 examples instead of the full set",
              "fine-tuning at batch 16 with AdamW at 1e-4 (linear decay) instead of Adam at 2e-5 and batch 8, for "
              "the same 5 epochs",
              "3 trials (seeds) instead of 50 at 500 examples and 10 for the blocks; 5 permutations instead of 10"),
    "standard": ("MiniLM for BERT-base; blocks of 2 layers; movie reviews for SST-2, no QNLI or CoLA; no "
                 "50,000-example curve; the recipe's seeds as trials (Tamkin: 50 at 500 examples, 3 at 5,000, 10 "
                 "for blocks); 5 permutations instead of 10",),
    "paper": ("MiniLM for BERT-base; blocks of 2 layers; movie reviews for SST-2, no QNLI or CoLA; no "
              "50,000-example curve; the recipe's seeds as trials; 5 permutations instead of 10",),
}

# The fig. 2 claims are counted once, at the budget's main training-set size (5,000 examples at standard and paper,
# 500 at quick, the only size there): the largest the lab runs, as Tamkin et al. read the gap in "the data-rich
# settings" (§3); the 500-example rows of the standard and paper budgets are shown as secondary. Fixed here by
# that rule before any drive. Tamkin et al.'s figures give no numbers in their text, so no claim carries any.
MAIN = "main size"
MAIN_WHY = ("the budget's largest training-set size, the one figs. 3 and 4 use (5,000 examples; 500 at quick): "
            "Tamkin et al. read fig. 2's gap in the data-rich settings (§3)")
CLAIMS = (
    Claim("pretrained-layers-help", "Fine-tuning the pretrained model beats fine-tuning it with every layer "
                                    "re-initialised (k = 12 vs k = 0 in BERT; 6 vs 0 here).", "§2, fig. 2",
          primary=MAIN, primary_why=MAIN_WHY),
    Claim("early-layers-transfer", "The early layers, whose features probe near chance, still transfer: keeping "
                                   "them while re-initialising all others gives large gains over re-initialising "
                                   "every layer (k = 3 vs k = 0 here).", "§3, fig. 2", primary=MAIN,
          primary_why=MAIN_WHY),
    Claim("more-reinit-hurts", "Re-initialising more layers hurts more: re-initialising the later half as well "
                               "(k = 3) scores below the pretrained model (k = 6).", "§2, fig. 2", primary=MAIN,
          primary_why=MAIN_WHY),
    Claim("probing-rises-with-depth", "Probing accuracy is low in the early layers and higher in the later ones: "
                                      "the last layer's features probe better than the middle layer's.",
          "§3, fig. 2"),
    Claim("early-block-necessary", "Earlier layers are generally more helpful for fine-tuning than later ones: "
                                   "re-initialising the first block costs more than re-initialising the last.",
          "§4, fig. 3", test=ClaimTest(direction=-1)),
    Claim("early-block-sufficient", "Earlier layers are generally more helpful: preserving only the first block "
                                    "(re-initialising the rest) scores above preserving only the last.",
          "§4, fig. 3"),
    Claim("permuting-hurts", "Changing the order of the pretrained layers before fine-tuning lowers accuracy "
                             "significantly: the mean over permutations is below the unpermuted model.",
          "§5, fig. 4", test=ClaimTest(direction=-1)),
    Claim("data-size-matters", "The benefit of pretrained layers varies with the fine-tuning set's size: keeping the "
                               "early layers (k = 3 vs k = 0 here) gains more at 5,000 examples than at 500.",
          "abstract, §3, fig. 2", headline=False,
          why="Tamkin et al. find earlier layers help more with more data \"across all but the 500 example trials of "
              "SST-2\" (§3): on the SST-2 stand-in the paper names its own exception, so the lab asks it; the figure "
              "gives no numbers"),
)


def k_name(k: int) -> str:
    return f"k={k}"


def block_name(mode: str, start: int) -> str:
    return f"{mode} {start + 1}-{start + BLOCK}"  # layers numbered from 1, as the paper's


def probe_name(layer: int) -> str:
    return f"probe layer {layer}"


def facet_of(train_size: str) -> str:
    """The column a training-set size gives: "500 examples", "full training set"."""
    return f"{int(train_size):,} examples" if train_size.isdigit() else "full training set"


PRETRAINED, EMBEDDINGS_ONLY, PERMUTED = k_name(LAYERS), k_name(0), "permuted"


def plan(budget_name: str, seeds: tuple[int, ...], adjust: Callable[[Any], Any]) -> Plan:
    budget = BUDGETS[budget_name]

    def _fine_tune(train_size: str, seed: int, protocol: str, params: dict[str, Any]):
        values = dict(budget.fine_tune)
        if train_size == "500" and budget.small_epochs:
            values["epochs"] = budget.small_epochs
        return adjust(make_spec(model="minilm", init="pretrained", discipline=TASK, budget=budget.run_budget,
                                train_size=train_size, protocol=protocol, protocol_params=params, seed=seed,
                                **values))

    steps: list[Step] = []
    for size in budget.sizes:
        for seed in seeds:
            steps += [Step(_fine_tune(size, seed, "reinit_after", {"k": k}), k_name(k), seed, "fig. 2",
                           facet_of(size)) for k in budget.ks]
    if budget.large_size:  # validated once an epoch (313 steps of 16), as the 500-example runs after their last
        large = dict(epochs=budget.large_epochs, eval_every=-(-int(budget.large_size) // 16))
        steps += [Step(adjust(make_spec(model="minilm", init="pretrained", discipline=TASK, budget=budget.run_budget,
                                        train_size=budget.large_size, protocol="reinit_after", protocol_params={"k": k},
                                        seed=seed, **dict(budget.fine_tune, **large))),
                       k_name(k), seed, "fig. 2", facet_of(budget.large_size)) for seed in seeds for k in (0, MIDDLE)]
    for seed in seeds:
        steps += [Step(adjust(make_spec(model="minilm", init="pretrained", discipline=TASK, budget=budget.run_budget,
                                        train_size=budget.probe_size, protocol="probe", protocol_params={"layer": l},
                                        seed=seed, **dict(budget.probe))),
                       probe_name(l), seed, "fig. 2 probes", facet_of(budget.probe_size)) for l in budget.probe_layers]
    for seed in seeds:
        for start in budget.blocks:
            steps += [Step(_fine_tune(budget.main_size, seed, "reinit_block",
                                      {"start": start, "size": BLOCK, "mode": mode}),
                           block_name(mode, start), seed, "fig. 3", facet_of(budget.main_size))
                      for mode in ("reinit", "preserve")]
    # Permutation i is trial i: its own run seed, as Tamkin et al. run permutation n in trial n; at least
    # PERMUTATIONS of them, and one for every seed, so each seed's unpermuted run has its permuted partner
    trials = range(max(PERMUTATIONS, max(seeds) + 1))
    steps += [Step(_fine_tune(budget.main_size, trial, "permute_layers", {"seed": trial}), PERMUTED, trial, "fig. 4",
                   facet_of(budget.main_size)) for trial in trials]
    return Plan("tamkin", budget_name, seeds, (tuple(steps),), CUTS[budget_name])


# ------------------------------------------------------------------------------------------ the report


def _interval(values: Sequence[float]) -> tuple[float, float, float] | None:
    """(mean, low, high) of the 95 % t-interval, None with nothing finished."""
    if not values:
        return None
    agg = aggregate(values)
    return agg.mean, agg.ci_low, agg.ci_high


Y_TITLE = "test accuracy (mean, 95 % t-interval over trials)"


def _of(plan_: Plan, results: Mapping[Step, Any], condition: str, facet: str, part: str) -> list[float]:
    return list(values_by_seed(plan_, results, condition=condition, facet=facet, part=part).values())


def _references(plan_: Plan, results: Mapping[Step, Any], size: str, full_name: str) -> tuple:
    """The dashed lines of figs. 3 and 4: the model with all its layers kept, and only its embeddings."""
    from labcore.figures.recipes import Reference

    full = _interval(_of(plan_, results, PRETRAINED, size, "fig. 2"))
    embeddings = _interval(_of(plan_, results, EMBEDDINGS_ONLY, size, "fig. 2"))
    return Reference(full_name, "#444", full), Reference("embeddings only (k = 0)", "#999", embeddings)


def incremental_figure(plan_: Plan, results: Mapping[Step, Any]):
    """Fig. 2: accuracy against k, a line per training-set size; probing accuracy per layer, dashed."""
    from labcore.figures import BASELINE, PALETTE, PRETRAINED as BLUE
    from labcore.figures.recipes import IntervalLine, interval_figure

    budget = BUDGETS[plan_.budget]
    lines = [IntervalLine(f"fine-tuned on {size}, layers after k re-initialised", colour, tuple(budget.ks),
                          tuple(_interval(_of(plan_, results, k_name(k), size, "fig. 2")) for k in budget.ks))
             for size, colour in zip(map(facet_of, budget.sizes), (BLUE,) + PALETTE)]
    probes = facet_of(budget.probe_size)
    lines.append(IntervalLine(f"probe of hidden state k ({probes})", BASELINE, tuple(budget.probe_layers),
                              tuple(_interval(_of(plan_, results, probe_name(l), probes, "fig. 2 probes"))
                                    for l in budget.probe_layers), dash="dash"))
    return interval_figure(lines, x_title="k: layers kept pretrained (fine-tuning) / hidden state probed (probing)",
                           y_title=Y_TITLE)


def block_figure(plan_: Plan, results: Mapping[Step, Any]):
    """Fig. 3: each block re-initialised and preserved, with k = 6 and k = 0 as reference lines."""
    from labcore.figures import PRETRAINED as BLUE, SCRATCH
    from labcore.figures.recipes import IntervalLine, interval_figure

    budget = BUDGETS[plan_.budget]
    size = facet_of(budget.main_size)
    labels = tuple(f"layers {s + 1}-{s + BLOCK}" for s in budget.blocks)
    lines = [IntervalLine(f"block {'re-initialised' if mode == 'reinit' else 'preserved'}", colour, labels,
                          tuple(_interval(_of(plan_, results, block_name(mode, s), size, "fig. 3"))
                                for s in budget.blocks), mode="markers")
             for mode, colour in (("reinit", SCRATCH), ("preserve", BLUE))]
    return interval_figure(lines, x_title=f"block of {BLOCK} layers ({size})", y_title=Y_TITLE,
                           references=_references(plan_, results, size, "pretrained (k = 6)"))


def permutation_figure(plan_: Plan, results: Mapping[Step, Any]):
    """Fig. 4: each permutation's accuracy, their mean with its interval, and the unpermuted and k = 0 lines."""
    from labcore.figures import PRETRAINED as BLUE
    from labcore.figures.recipes import Dots, IntervalLine, interval_figure

    size = facet_of(BUDGETS[plan_.budget].main_size)
    trials = values_by_seed(plan_, results, condition=PERMUTED, facet=size, part="fig. 4")
    dots = Dots("one permutation", BLUE, tuple((f"permutation {t}", v) for t, v in trials.items()))
    mean = IntervalLine("mean of the permutations", BLUE, ("mean",), (_interval(list(trials.values())),),
                        mode="markers")
    return interval_figure([mean], x_title=f"layer order ({size})", y_title=Y_TITLE, dots=dots,
                           references=_references(plan_, results, size, "unpermuted (k = 6)"))


def report(plan_: Plan, results: Mapping[Step, Any]) -> Report:
    out = new_report(RECIPE, plan_, results)
    claims = {c.id: c for c in CLAIMS}
    budget = BUDGETS[plan_.budget]
    main, sizes, probes, fig2 = facet_of(budget.main_size), [facet_of(s) for s in budget.sizes], \
        facet_of(budget.probe_size), "fig. 2"
    for claim_id, a, b in (("pretrained-layers-help", PRETRAINED, EMBEDDINGS_ONLY),
                           ("early-layers-transfer", k_name(MIDDLE), EMBEDDINGS_ONLY),
                           ("more-reinit-hurts", PRETRAINED, k_name(MIDDLE))):
        for size in sizes:
            out.claims.append(judge(claims[claim_id], plan_, results, a, b, facet=size, part=fig2,
                                    primary=size == main))
    out.claims.append(judge(claims["probing-rises-with-depth"], plan_, results, probe_name(LAYERS),
                            probe_name(MIDDLE), facet=probes, part="fig. 2 probes"))
    first, last = budget.blocks[0], budget.blocks[-1]
    out.claims.append(judge(claims["early-block-necessary"], plan_, results, block_name("reinit", first),
                            block_name("reinit", last), facet=main, part="fig. 3"))
    out.claims.append(judge(claims["early-block-sufficient"], plan_, results, block_name("preserve", first),
                            block_name("preserve", last), facet=main, part="fig. 3"))
    # the permutations (trials 0-4) against the unpermuted model's trials (the recipe's seeds)
    permuted = values_by_seed(plan_, results, condition=PERMUTED, facet=main, part="fig. 4")
    reads = ((PERMUTED, main, "fig. 4"), (PRETRAINED, main, fig2))
    unpermuted = values_by_seed(plan_, results, condition=PRETRAINED, facet=main, part=fig2)
    out.claims.append((claims["permuting-hurts"],
                       judged(claims["permuting-hurts"], plan_, results, f"permuting-hurts/{main}",
                              f"a permuted layer order on {main}", f"unpermuted (k = {LAYERS}) on {main}",
                              permuted, unpermuted, reads=reads,
                              gate=sides_gate(plan_, results, reads))))

    out.claims.append(size_claim(claims["data-size-matters"], plan_, results))
    ks = [k_name(k) for k in budget.ks]
    table = grid_table(plan_, results, conditions=ks, facets=sizes, part=fig2, index_name="layers kept (k)")
    out.tables.append(("Fig. 2 in numbers: test accuracy after re-initialising every layer after k (mean ± std "
                       "[95 % interval] (n) over trials)", table))
    if budget.large_size:
        out.tables.append(("The data-size question: k = 0 and k = 3 at both training-set sizes",
                           grid_table(plan_, results, conditions=[EMBEDDINGS_ONLY, k_name(MIDDLE)],
                                      facets=[facet_of(budget.main_size), facet_of(budget.large_size)], part=fig2,
                                      index_name="layers kept (k)")))
    out.tables.append(("Fig. 2 in numbers: probing accuracy per hidden state (0: the embedding output)",
                       grid_table(plan_, results, conditions=[probe_name(l) for l in budget.probe_layers],
                                  facets=(probes,), part="fig. 2 probes", index_name="probe")))
    out.tables.append((f"Fig. 3 in numbers: blocks of {BLOCK} layers re-initialised or preserved ({main})",
                       block_table(plan_, results)))
    out.tables.append((f"Fig. 4 in numbers: permuted layer orders ({main})",
                       permutation_table(plan_, results)))
    out.figures += [("Fig. 2 shape: incremental re-initialisation and probing", incremental_figure(plan_, results)),
                    ("Fig. 3 shape: localised re-initialisation", block_figure(plan_, results)),
                    ("Fig. 4 shape: permuted layers", permutation_figure(plan_, results))]
    floor = majority_floors(plan_, results, (main,)).get(main)
    if floor is not None:
        out.notes.append(f"The majority class scores {floor:.3f} on the test set: chance for these figures.")
    out.notes.append("Tamkin et al.'s figures give no numbers in their text, so none are transcribed here; their "
                     "one table (correlations of permutations across three tasks) needs tasks this recipe does not "
                     "run.")
    return out


def size_claim(claim: Claim, plan_: Plan, results: Mapping[Step, Any]) -> tuple[Claim, Any]:
    """The gain of the early layers (k = MIDDLE over k = 0) at 5,000 examples against the same seed's at 500; the gate
    reads the best-scoring of the four conditions against its floor, as for any gain."""
    large, small = facet_of("5000"), facet_of("500")
    gains = {}
    for size in (large, small):
        kept = values_by_seed(plan_, results, condition=k_name(MIDDLE), facet=size, part="fig. 2")
        none = values_by_seed(plan_, results, condition=EMBEDDINGS_ONLY, facet=size, part="fig. 2")
        gains[size] = {s: kept[s] - none[s] for s in kept if s in none}
    reads = tuple((c, size, "fig. 2") for size in (large, small) for c in (k_name(MIDDLE), EMBEDDINGS_ONLY))
    return claim, judged(claim, plan_, results, claim.id, f"gain of layers 1-{MIDDLE} at {large}",
                         f"gain of layers 1-{MIDDLE} at {small}", gains[large], gains[small], reads=reads,
                         metric="gain in test accuracy", gate=levels_gate(plan_, results, reads, BEST))


def block_table(plan_: Plan, results: Mapping[Step, Any]) -> pd.DataFrame:
    """One row per block: re-initialised and preserved, each a :func:`cell` over trials."""
    budget = BUDGETS[plan_.budget]
    size = facet_of(budget.main_size)
    rows = {f"layers {s + 1}-{s + BLOCK}": {mode: cell(_of(plan_, results, block_name(mode, s), size, "fig. 3"))
                                            for mode in ("reinit", "preserve")} for s in budget.blocks}
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=["reinit", "preserve"])
    frame.index.name = "block"
    return frame


def permutation_table(plan_: Plan, results: Mapping[Step, Any]) -> pd.DataFrame:
    """The permutations' trials one by one, their mean, and the unpermuted and embeddings-only references."""
    size = facet_of(BUDGETS[plan_.budget].main_size)
    trials = values_by_seed(plan_, results, condition=PERMUTED, facet=size, part="fig. 4")
    rows = {f"permutation {t} (trial {t})": cell([v]) for t, v in sorted(trials.items())}
    rows["permutations, mean"] = cell(list(trials.values()))
    rows[f"unpermuted (k = {LAYERS})"] = cell(_of(plan_, results, PRETRAINED, size, "fig. 2"))
    rows["embeddings only (k = 0)"] = cell(_of(plan_, results, EMBEDDINGS_ONLY, size, "fig. 2"))
    return pd.DataFrame({"test accuracy": rows}).rename_axis("model")


# A quick step on two idle Xeon cores (fp32): the sequential drive of the whole recipe ran 67 jobs (fine-tunes
# and probes) in 31.1 CPU-minutes, 28 s a job. (160 s, the earlier figure, was measured with one free core
# and a longer fine-tune.)
RECIPE = Recipe(name="tamkin", title="Tamkin et al.: which pretrained layers transfer?", paper="tamkin",
                claims=CLAIMS, planner=plan, reporter=report, prior_step_s=28.0)
assert RECIPE.paper in PAPERS
