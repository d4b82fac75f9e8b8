"""What a run prepares before its first step, built once: the data encoded and subsampled, the token
mapping and the lab model (:class:`Prepared`, also used by analysis jobs); and a finished run's trained
parameters, saved in its folder and loaded back onto a model prepared the same way (:func:`load_trained`).

labcore.engine.run trains and records; it re-exports these names.
"""

from __future__ import annotations

import os
from pathlib import Path

from labcore import data as data_registry
from labcore.durable import CommitFn, write_file
from labcore.durable import write_text as write_text_file  # noqa: F401  (run.py writes its small files through it)
from labcore.errors import LabError
from labcore.runspec import RunSpec, parse_train_size
from labcore.runspec.resolved import ResolvedSpec

BEST_WEIGHTS = "best.safetensors"  # a finished run's trainable parameters by name, in its folder


class Prepared:
    """Everything a run needs before the first step, built once (also used by analysis jobs)."""

    def __init__(self, spec: ResolvedSpec | RunSpec, *, attn_implementation: str = "sdpa", progress=lambda _m: None):
        import torch

        from labcore import mapping as mapping_lib
        from labcore import models
        from labcore.data.encode import TEXT_MAX_LENGTH, encode_split_kept, slice_vocabulary, subsample

        # Resolved once where it was submitted, never again here: a RunSpec read back from a stored record is
        # taken as it is, and one with a field still open is refused.
        spec = ResolvedSpec.of(spec)
        self.spec = spec
        self.notes: list[str] = []
        progress(f"loading discipline {spec.discipline}")
        self.dataset, self.info = data_registry.load(spec.discipline, dict(spec.discipline_params),
                                                     progress=progress)
        info = self.info
        self.notes.extend(info.run_notes)  # what the data itself cut or left out
        progress(f"loading model {spec.model} ({spec.init})")
        base, tokenizer, binfo = models.load_backbone(spec.model, spec.init, seed=spec.seed,
                                                      attn_implementation=attn_implementation)
        self.tokenizer, self.backbone_info = tokenizer, binfo
        self.mapping = None
        if spec.input_adapter == "vocab":
            if tokenizer is None:
                raise LabError(f"model {spec.model!r} has no tokenizer, so the vocab input adapter cannot "
                               f"map tokens into it; use input_adapter embedding")
            vocab = mapping_lib.Vocab.from_tokenizer(tokenizer)
            mspec = mapping_lib.of_run(spec)
            alphabet = None if info.input_kind == "text" else info.alphabet
            self.mapping = mapping_lib.build_mapping(mspec, alphabet, vocab,
                                                     special_fix=mapping_lib.RUN_SPECIAL_FIX)

        specials = 0
        if spec.input_adapter == "vocab" and info.input_kind == "tokens":
            specials = sum(i is not None for i in (binfo.cls_id, binfo.sep_id))
        if spec.max_length:
            max_length = spec.max_length
        elif info.input_kind == "text":
            max_length = TEXT_MAX_LENGTH
        else:
            max_length = info.max_length + specials
        if binfo.max_positions and max_length > binfo.max_positions:  # not known when the spec was resolved
            self.notes.append(f"inputs cut to the model's {binfo.max_positions:,} positions (max_length "
                              f"{max_length:,} asked for more)")
            max_length = binfo.max_positions
        elif spec.max_length and spec.max_length == binfo.max_positions:
            self.notes.append(f"max_length {max_length:,} is the model's limit ({binfo.max_positions:,} positions): "
                              f"a longer max_length resolves to it")
        self.max_length = max_length

        encode_kwargs = dict(adapter=spec.input_adapter, max_length=max_length, mapping=self.mapping,
                             tokenizer=tokenizer, cls_id=binfo.cls_id if specials else None,
                             sep_id=binfo.sep_id if specials else None)
        self.splits = {name: encode_split_kept(self.dataset[name], info, **encode_kwargs)
                       for name in ("train", "validation", "test")}
        train = self.splits["train"]
        keep = subsample(len(train), parse_train_size(spec.train_size), spec.train_token_budget,
                         float(train.lengths().mean()) if len(train) else 0.0, spec.seed,
                         min_examples=spec.min_train_examples)
        if keep is not None:
            floor = (f", at least {spec.min_train_examples:,} kept" if spec.train_token_budget and
                     len(keep) == spec.min_train_examples else "")
            self.notes.append(f"trained on {len(keep):,} of {len(train):,} training examples "
                              f"(train_size={spec.train_size}, token budget {spec.train_token_budget:,}{floor})")
            self.splits["train"] = train.subset(keep)
        if len(self.splits["train"]) == 0:
            raise LabError(f"discipline {spec.discipline!r} has no training examples left; raise train_size")

        self.vocab_rows = None
        if spec.input_adapter == "vocab" and spec.slice_vocab:
            self.vocab_rows = slice_vocabulary(list(self.splits.values()))
            self.notes.append(f"vocabulary sliced to the {len(self.vocab_rows):,} ids the data uses")

        vector_dim = info.vector_dim if info.input_kind == "vectors" else 0
        n_symbols = len(info.alphabet) if spec.input_adapter == "embedding" else 0
        torch.manual_seed(spec.seed)
        self.model = models.build_lab_model_from(
            base, tokenizer, binfo, adapter=spec.input_adapter, num_outputs=info.num_outputs,
            pooling=spec.pooling, vocab_rows=self.vocab_rows, n_symbols=n_symbols, vector_dim=vector_dim,
            seed=spec.seed)

    def apply_protocol(self):
        """Apply the spec's protocol to the model (freeze, re-initialise, permute …); its report."""
        from labcore import protocols

        spec = self.spec
        params = protocols.parse_protocol_params(spec.protocol, dict(spec.protocol_params))
        return protocols.PROTOCOLS[spec.protocol].apply(self.model, params, spec.seed)


def save_trained(model, workdir: Path, commit_file: CommitFn = os.replace) -> Path:
    """Write the trainable parameters of a finished run (what :func:`load_trained` reads back)."""
    from safetensors.torch import save_file

    state = {n: p.detach().float().contiguous().cpu() for n, p in model.named_parameters() if p.requires_grad}
    return write_file(workdir / BEST_WEIGHTS, lambda tmp: save_file(state, str(tmp)), commit_file)


def load_trained(spec: ResolvedSpec | RunSpec, workdir: Path, *, attn_implementation: str = "sdpa") -> Prepared:
    """A finished run's model as it ended: prepared as the run was, its protocol applied again (frozen and
    permuted layers as they trained), then its trained parameters loaded from ``workdir``.

    Every analysis of a trained model starts here, so each sees exactly the model the run tested.
    """
    import torch
    from safetensors.torch import load_file

    weights = workdir / BEST_WEIGHTS
    prepared = Prepared(spec, attn_implementation=attn_implementation)
    prepared.apply_protocol()
    state = load_file(str(weights))
    named = dict(prepared.model.named_parameters())
    unknown = sorted(set(state) - set(named))
    if unknown:
        raise LabError(f"{weights} holds tensors this run's model does not have ({', '.join(unknown[:4])}); it was "
                       f"written by another version of the code: rerun the spec to refresh it")
    with torch.no_grad():
        for name, tensor in state.items():
            if named[name].shape != tensor.shape:
                raise LabError(f"{weights}: tensor {name} has shape {tuple(tensor.shape)}, the model expects "
                               f"{tuple(named[name].shape)}; rerun the spec to refresh its weights")
            named[name].copy_(tensor.to(named[name].dtype))
    return prepared

