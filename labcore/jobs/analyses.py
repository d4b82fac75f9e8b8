"""Why transfer works: the analyses of Kao & Lee §4 and appendix F and FPT §3.8 as job kinds.

Each kind compares models on the same seeded examples of a discipline: a backbone at an init
(``ModelRef(model="minilm", init="pretrained")``, ``init="random"`` with its seed) or a finished run's
fine-tuned weights (``ModelRef(run=KEY)``, which makes the job depend on that run). The maths is in
:mod:`labcore.analysis` (pure functions); here are the specs, their keys and the handlers that load
the models (in the worker), feed the examples and store the numbers as the job's result.

=============  ============================================================================================
``similarity`` PWCCA (or linear CKA) between every layer of two models (Kao table 1: the last layers)
``heads``      attention heads matched by least L1 distance, per layer, averaged over examples (Kao §4.4.1)
``jacobian``   singular values of d(pooled last layer)/d(input embeddings), per example (Kao F.1)
``gradients``  cosine similarity of per-example loss gradients (Kao F.2)
``noise``      output change under Gaussian noise on every parameter, per sigma (Kao F.3)
``params``     std of attention and feed-forward weights per layer (FPT §3.8, fig. 6)
``logme``      LogME of the frozen last-layer features (You et al., 2021): transferability without training
=============  ============================================================================================
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator

from labcore.errors import LabError
from labcore.events import LogEvent, ResultEvent
from labcore.jobs.base import Event, JobContext, hash_key

MAX_EXAMPLES = 4096  # an analysis is a look, not a training run: larger samples belong to a GPU
MEASURES = ("pwcca", "cka")


@dataclass(frozen=True)
class ModelRef:
    """One model to analyse: a backbone at an init, or (``run`` set) a finished run's fine-tuned weights."""

    model: str = "minilm"
    init: str = "pretrained"  # pretrained | random | stats
    seed: int = 0  # the random init's seed (and its new head's)
    mapping: str = "auto"  # how the discipline's symbols enter the vocabulary (auto: random for symbols)
    run: str = ""  # a finished run's key: its model as it ended (model, init and mapping come from the run)

    def label(self) -> str:
        if self.run:
            return f"run {self.run[:8]} (fine-tuned)"
        return f"{self.model}/{self.init}" + (f" seed {self.seed}" if self.init != "pretrained" else "")


def parse_model(text: str) -> ModelRef:
    """``NAME[@INIT[@SEED[@MAPPING]]]`` or ``run=KEY``."""
    if text.startswith("run="):
        return ModelRef(run=text[len("run="):])
    name, *rest = text.split("@")
    if len(rest) > 3 or not name:
        raise LabError(f"--model {text!r}: give NAME, NAME@INIT, NAME@INIT@SEED, NAME@INIT@SEED@MAPPING or run=KEY")
    try:
        seed = int(rest[1]) if len(rest) >= 2 else 0
    except ValueError:
        raise LabError(f"--model {text!r}: the seed after the second @ must be a whole number") from None
    return ModelRef(model=name, init=rest[0] if rest else "pretrained", seed=seed,
                    mapping=rest[2] if len(rest) == 3 else "auto")


@dataclass(frozen=True)
class AnalysisSpec:
    """What every analysis has: the models, and the examples they are compared on."""

    models: tuple[ModelRef, ...] = (ModelRef(), ModelRef(init="random"))
    discipline: str = "protein-malonylation"
    discipline_params: tuple[tuple[str, Any], ...] = ()
    split: str = "test"
    examples: int = 64
    seed: int = 0  # which examples
    max_length: int = 0  # 0: the discipline's own

    def label(self) -> str:
        kind = type(self).__name__.removesuffix("Spec").lower()
        return f"{kind}: {' vs '.join(m.label() for m in self.models)} on {self.discipline} ({self.examples} ex.)"


@dataclass(frozen=True)
class SimilaritySpec(AnalysisSpec):
    models: tuple[ModelRef, ...] = (ModelRef(), ModelRef(init="random"))
    examples: int = 256
    measure: str = "pwcca"
    # False: every position is a row (Kao's table 1; needs both models to give the same positions), so CCA
    # has far more rows than dimensions. True: one mean vector per example (models that tokenise apart).
    pooled: bool = False
    last_only: bool = False  # only the last layers against each other (table 1), not every pair of layers


@dataclass(frozen=True)
class HeadsSpec(AnalysisSpec):
    examples: int = 8


@dataclass(frozen=True)
class JacobianSpec(AnalysisSpec):
    examples: int = 8
    max_length: int = 32  # the Jacobian has hidden x (length x hidden) entries per example


@dataclass(frozen=True)
class GradientsSpec(AnalysisSpec):
    examples: int = 16


@dataclass(frozen=True)
class NoiseSpec(AnalysisSpec):
    examples: int = 32
    sigmas: tuple[float, ...] = (1e-2, 1e-4, 1e-6, 1e-8)


@dataclass(frozen=True)
class ParamsSpec(AnalysisSpec):
    examples: int = 0  # weights only: no examples are fed


@dataclass(frozen=True)
class LogMESpec(AnalysisSpec):
    split: str = "train"
    examples: int = 1000


# ------------------------------------------------------------------------------------------ resolve and key
def _encode(spec: AnalysisSpec) -> dict[str, Any]:
    values = dataclasses.asdict(spec)
    values["discipline_params"] = [list(p) for p in spec.discipline_params]
    return values


def _decoder(spec_type: type):
    def decode(values: dict[str, Any]) -> AnalysisSpec:
        values = dict(values)
        values["models"] = tuple(m if isinstance(m, ModelRef) else ModelRef(**m) for m in values.get("models", ()))
        values["discipline_params"] = tuple(tuple(p) for p in (values.get("discipline_params") or ()))
        if "sigmas" in values:
            values["sigmas"] = tuple(float(s) for s in values["sigmas"])
        return spec_type(**values)
    return decode


def _resolver(count: int | None, min_examples: int = 2):
    def resolve(spec: AnalysisSpec) -> AnalysisSpec:
        from labcore.analysis.attention import SPLITS
        from labcore.engine.resolve import resolve_spec
        from labcore.runspec import INITS, make_spec

        models = tuple(m if isinstance(m, ModelRef) else ModelRef(**m) for m in spec.models)
        if count is not None and len(models) != count:
            raise LabError(f"this analysis compares exactly {count} models, got {len(models)}")
        if not models:
            raise LabError("name at least one model to analyse")
        for ref in models:
            if not ref.run and ref.init not in INITS:
                raise LabError(f"unknown init {ref.init!r}; valid inits: {', '.join(INITS)}")
        if spec.split not in SPLITS:
            raise LabError(f"unknown split {spec.split!r}; valid splits: {', '.join(SPLITS)}")
        if not min_examples <= spec.examples <= MAX_EXAMPLES:
            raise LabError(f"examples must be from {min_examples} to {MAX_EXAMPLES}, got {spec.examples}")
        if getattr(spec, "measure", "pwcca") not in MEASURES:
            raise LabError(f"unknown measure {spec.measure!r}; valid measures: {', '.join(MEASURES)}")
        # Every discipline parameter written out, as a run's key has them (new data, new key).
        params = resolve_spec(make_spec(discipline=spec.discipline,
                                        discipline_params=spec.discipline_params)).discipline_params
        # Fine-tuned weights come from the run: its model, init and mapping, whatever the ref said.
        models = tuple(ModelRef(run=m.run) if m.run else m for m in models)
        return dataclasses.replace(spec, models=models, discipline_params=params)
    return resolve


# ------------------------------------------------------------------------------------------- the handlers
def _loaded(spec: AnalysisSpec, ctx: JobContext, *, attn: str = "sdpa") -> Iterator[Any]:
    """Each model prepared on the discipline, one at a time (one model in memory), with a log event."""
    from labcore.analysis.inputs import prepare

    for ref in spec.models:
        ref_values = dataclasses.asdict(ref)
        prepared = prepare(ref_values, spec.discipline, dict(spec.discipline_params), max_length=spec.max_length,
                           run_input=ctx.inputs.get(ref.run), attn_implementation=attn)
        prepared.model.eval()
        yield ref, prepared


def _weights(spec: AnalysisSpec, ctx: JobContext) -> Iterator[tuple[ModelRef, dict[str, Any]]]:
    """Each model's backbone parameters by name, one model at a time; a backbone at an init is loaded
    without the discipline's data (:func:`labcore.analysis.inputs.backbone_parameters`)."""
    from labcore.analysis.inputs import backbone_parameters

    for ref in spec.models:
        yield ref, backbone_parameters(dataclasses.asdict(ref), spec.discipline, dict(spec.discipline_params),
                                       max_length=spec.max_length, run_input=ctx.inputs.get(ref.run))


def _progress(message: str) -> Event:
    return LogEvent(message=message).to_dict()


def _done(record: dict[str, Any]) -> Event:
    """An analysis's last event: its record."""
    return ResultEvent(status="done", record=record).to_dict()


def _examples(spec: AnalysisSpec, prepared) -> Any:
    from labcore.analysis.inputs import pick

    return pick(len(prepared.splits[spec.split]), spec.examples, spec.seed)


def _representations(spec: SimilaritySpec, prepared) -> list[Any]:
    """Per layer [n, hidden] (pooled) or [n * positions, hidden] (every position) for the chosen examples."""
    import torch

    from labcore.analysis.inputs import batches

    per_layer: list[list[Any]] = []
    with torch.inference_mode():
        for batch in batches(prepared, spec.split, _examples(spec, prepared)):
            states = prepared.model.hidden_states(batch.inputs, batch.mask)
            mask = batch.mask.bool()
            for i, h in enumerate(states):
                if len(per_layer) <= i:
                    per_layer.append([])
                h = h.float()
                if spec.pooled:
                    rows = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
                else:
                    rows = h[mask]
                per_layer[i].append(rows.numpy())
    import numpy as np

    return [np.concatenate(chunks) for chunks in per_layer]


def similarity(spec: SimilaritySpec, ctx: JobContext) -> Iterator[Event]:
    from labcore.analysis.similarity import layer_similarity, linear_cka, pwcca

    reps, labels = [], []
    for ref, prepared in _loaded(spec, ctx):
        yield _progress(f"representations of {ref.label()}")
        reps.append(_representations(spec, prepared))
        labels.append(ref.label())
        del prepared
        if ctx.should_stop():
            return
    if reps[0][0].shape[0] != reps[1][0].shape[0]:
        raise LabError("the two models split the examples into different numbers of positions; compare them "
                       "pooled (one vector per example) instead")
    if spec.last_only:
        reps = [r[-1:] for r in reps]
    yield _progress(f"{spec.measure} between {len(reps[0])} x {len(reps[1])} layers")
    matrix = layer_similarity(reps[0], reps[1], pwcca if spec.measure == "pwcca" else linear_cka)
    rows, width = reps[0][0].shape[0], max(reps[0][-1].shape[1], reps[1][-1].shape[1])
    notes = []
    if spec.measure == "pwcca" and rows < 4 * width:
        # CCA finds perfect correlations when rows are few against dimensions: the number says little.
        notes.append(f"only {rows} rows for {width} dimensions: CCA needs many more rows than dimensions "
                     f"(use more examples, or every position), so these values overstate similarity")
    yield _done({
        "measure": spec.measure, "models": labels, "matrix": matrix.tolist(), "last": float(matrix[-1, -1]),
        "examples": spec.examples, "rows": int(rows), "pooled": spec.pooled, "notes": notes})


def heads(spec: HeadsSpec, ctx: JobContext) -> Iterator[Event]:
    import numpy as np
    import torch

    from labcore.analysis.attention import layer_distances
    from labcore.analysis.inputs import batch

    maps, labels = [], []
    for ref, prepared in _loaded(spec, ctx, attn="eager"):
        yield _progress(f"attention maps of {ref.label()}")
        index = _examples(spec, prepared)
        per_example = []
        with torch.inference_mode():
            for i in index:  # one example at a time: no padding inside the maps
                one = batch(prepared, spec.split, np.asarray([i]))
                per_example.append(np.stack([a[0].float().numpy() for a in prepared.model.attentions(one.inputs, one.mask)]))
        maps.append(per_example)
        labels.append(ref.label())
        del prepared
    if maps[0][0].shape[:2] != maps[1][0].shape[:2]:
        raise LabError(f"head matching needs two models of one shape: {maps[0][0].shape[:2]} and "
                       f"{maps[1][0].shape[:2]} (layers, heads)")
    per_layer = np.stack([layer_distances(a, b) for a, b in zip(maps[0], maps[1])])  # [examples, layers]
    yield _done({
        "models": labels, "mean": per_layer.mean(0).tolist(), "std": per_layer.std(0).tolist(),
        "examples": len(maps[0])})


def _distribution(values) -> dict[str, Any]:
    import numpy as np

    values = np.asarray(values, dtype=float).ravel()
    finite = values[np.isfinite(values)]
    return {"values": finite.tolist(), "mean": float(finite.mean()) if finite.size else None,
            "median": float(np.median(finite)) if finite.size else None,
            "min": float(finite.min()) if finite.size else None, "max": float(finite.max()) if finite.size else None}


def jacobian(spec: JacobianSpec, ctx: JobContext) -> Iterator[Event]:
    import numpy as np
    import torch

    from labcore.analysis.inputs import batch
    from labcore.analysis.jacobian import jacobian_singular_values

    out = {}
    for ref, prepared in _loaded(spec, ctx, attn="eager"):
        model = prepared.model
        values = []
        for n, i in enumerate(_examples(spec, prepared)):
            one = batch(prepared, spec.split, np.asarray([i]))
            with torch.no_grad():
                embeds = model.adapter(one.inputs).float()

            def pooled(e, m=one.mask):  # [L, d] -> [hidden]
                return model.pooled_from_embeddings(e[None], m).float()[0]

            values.append(jacobian_singular_values(pooled, embeds, batched=False)[0])
            yield _progress(f"{ref.label()}: example {n + 1}")
            if ctx.should_stop():
                return
        out[ref.label()] = _distribution(np.concatenate(values))
        del prepared
    yield _done({"models": list(out), "singular_values": out, "examples": spec.examples})


def gradients(spec: GradientsSpec, ctx: JobContext) -> Iterator[Event]:
    from labcore.analysis.gradients import flatten_grads, gradient_cosines, per_example_grads
    from labcore.analysis.inputs import Packed, batch
    from labcore.engine.train import loss_fn

    out = {}
    for ref, prepared in _loaded(spec, ctx, attn="eager"):
        yield _progress(f"per-example gradients of {ref.label()}")
        one = batch(prepared, spec.split, _examples(spec, prepared))
        model = prepared.model
        kind = {"class": "ce", "multilabel": "bce", "regression": "mse"}[prepared.info.output_kind]
        criterion = loss_fn(kind)
        params = {f"model.{n}": p for n, p in model.named_parameters() if p.requires_grad}
        grads = per_example_grads(Packed(model), params, lambda out, y: criterion(out.float(), y),
                                  Packed.pack(one.inputs, one.mask), one.labels)
        out[ref.label()] = _distribution(gradient_cosines(flatten_grads(grads)))
        del prepared
    yield _done({"models": list(out), "cosines": out, "examples": spec.examples})


def noise(spec: NoiseSpec, ctx: JobContext) -> Iterator[Event]:
    from labcore.analysis.inputs import batch
    from labcore.analysis.noise import output_variation, summarise

    out = {}
    for ref, prepared in _loaded(spec, ctx):
        yield _progress(f"outputs of {ref.label()} under parameter noise")
        one = batch(prepared, spec.split, _examples(spec, prepared))
        model = prepared.model
        variation = output_variation(model, lambda: model.features(one.inputs, one.mask).float(), spec.sigmas,
                                     seed=spec.seed)
        out[ref.label()] = {str(s): {"mean": m, "std": d} for s, (m, d) in summarise(variation).items()}
        del prepared
    yield _done({"models": list(out), "variation": out, "sigmas": list(spec.sigmas), "examples": spec.examples})


def params(spec: ParamsSpec, ctx: JobContext) -> Iterator[Event]:
    from labcore.analysis.params import layer_stds

    out = {}
    for ref, weights in _weights(spec, ctx):
        stds = layer_stds(weights)
        out[ref.label()] = {kind: [None if v != v else float(v) for v in values] for kind, values in stds.items()}
        del weights
    yield _done({"models": list(out), "stds": out})


def logme(spec: LogMESpec, ctx: JobContext) -> Iterator[Event]:
    import numpy as np
    import torch

    from labcore.analysis.inputs import batches
    from labcore.analysis.logme import logme as log_evidence

    out = {}
    for ref, prepared in _loaded(spec, ctx):
        yield _progress(f"frozen features of {ref.label()}")
        index = _examples(spec, prepared)
        with torch.inference_mode():
            feats = np.concatenate([prepared.model.features(b.inputs, b.mask).float().numpy()
                                    for b in batches(prepared, spec.split, index)])
        labels = prepared.splits[spec.split].labels[index]
        out[ref.label()] = float(log_evidence(feats, labels))
        del prepared
    yield _done({"models": list(out), "logme": out, "examples": spec.examples})


def _register() -> None:
    from labcore.jobs import job_kind

    kinds = [("similarity", SimilaritySpec, similarity, 2, "PWCCA or CKA between every layer of two models"),
             ("heads", HeadsSpec, heads, 2, "attention heads matched by least L1 distance, per layer"),
             ("jacobian", JacobianSpec, jacobian, None, "singular values of the input-output Jacobian"),
             ("gradients", GradientsSpec, gradients, None, "cosine similarity of per-example gradients"),
             ("noise", NoiseSpec, noise, None, "output change under parameter noise"),
             ("params", ParamsSpec, params, None, "std of attention and feed-forward weights per layer"),
             ("logme", LogMESpec, logme, None, "LogME of frozen features: transferability without training")]
    for name, spec_type, handler, count, description in kinds:
        job_kind(name, spec_type, description=description, resolve=_resolver(count, 0 if name == "params" else 2),
                 encode=_encode, decode=_decoder(spec_type), key=lambda s, n=name: hash_key(n, _encode(s)),
                 label=AnalysisSpec.label, requires=lambda s: tuple(m.run for m in s.models if m.run))(handler)


_register()

ANALYSES = ("similarity", "heads", "jacobian", "gradients", "noise", "params", "logme")
SPEC_TYPES = {"similarity": SimilaritySpec, "heads": HeadsSpec, "jacobian": JacobianSpec,
              "gradients": GradientsSpec, "noise": NoiseSpec, "params": ParamsSpec, "logme": LogMESpec}
__all__ = ["ANALYSES", "AnalysisSpec", "ModelRef", "SPEC_TYPES"] + [t.__name__ for t in SPEC_TYPES.values()]
