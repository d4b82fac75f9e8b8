"""A fine-tuned run as a folder ``transformers`` loads: ``AutoModelForSequenceClassification`` and
``AutoTokenizer``, or ``pipeline("text-classification", model=folder)`` on the discipline's raw strings.

What a run's model is, and how each part is written:

* the **body** is the backbone's own (the BERT, RoBERTa and ALBERT families: MiniLM, AntiBERTy, ``tiny:bert``,
  the ``lab:`` models pretrained here): its trained weights as they are;
* the **input side** is the vocab adapter's (possibly sliced) word table: its trained rows go back into the
  backbone's full table at their vocabulary ids, so untouched ids (``[UNK]``) keep their own rows;
* the **token mapping** becomes the tokenizer: for symbol disciplines a ``tokenizers`` word-level tokenizer
  that turns each raw symbol into the id the run's mapping gave it, wrapped in ``[CLS] ... [SEP]`` as the
  run encoded it; for text the model's own tokenizer, with the table's rows permuted by the mapping
  (row ``i`` is the row the run fed for tokenizer id ``i``);
* the **head** is one linear layer on the first row (``[CLS]``, ``<s>``). The transformers classification
  heads of these families put ``tanh(dense(h))`` first (BERT's and ALBERT's pooler, RoBERTa's head), which
  the lab does not use; that dense layer here computes the lab's head scaled by :data:`EPSILON`, where tanh
  is linear to about ``(EPSILON*z)**2 / 3`` relative, and the layer after the tanh scales it back. The
  predicted class is exactly the lab's (tanh is increasing); logits agree to about 1e-7.

Runs that cannot be written so are refused with the reason: inputs through a new adapter (vectors, the
FPT symbol table), a probe (it reads a middle layer), a pooling other than ``[CLS]``, outputs that are not
one class, and bodies of other families. Before anything is written, the folder's model is checked against
the lab's on the first test examples.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from labcore.errors import LabError
from labcore.store import JobRecord

EPSILON = 1e-4  # the head's scale inside the pooler's tanh (see the module's docstring)
CHECK_EXAMPLES = 32  # test examples on which the written model must predict what the lab's does
# Bodies whose transformers classification model this module fills: family -> (the layer before the tanh, the
# layer after it) in that model's head, each a Linear on the first row's hidden state. Decoders (GPT-2, Llama)
# read their last token with a head that has no bias, so the lab's head has no place there.
HEADS = {"bert": ("bert.pooler.dense", "classifier"), "roberta": ("classifier.dense", "classifier.out_proj"),
         "albert": ("albert.pooler", "classifier")}


def refusal(spec: dict[str, Any]) -> str:
    """Why a run of the resolved ``spec`` cannot leave as a transformers classifier ("" where it can), from
    the spec alone, before any model loads."""
    adapter = spec.get("input_adapter")
    if adapter == "linear":
        return ("its inputs are real-valued vectors fed through a new linear input layer; a transformers text "
                "classifier takes token ids, and no tokenizer turns vectors into them")
    if adapter == "embedding":
        return ("its symbols go through a new input table of their own (FPT's input layer), not the body's "
                "vocabulary; a transformers classifier has one word table, indexed by its tokenizer's ids")
    if spec.get("protocol") == "probe":
        return ("a probe reads a middle layer's hidden state; a transformers classification head reads the "
                "last layer")
    if spec.get("pooling") not in ("auto", "cls"):
        return (f"it pools with {spec.get('pooling')!r}; a transformers classification head reads the first row "
                f"([CLS], <s>) only")
    return ""


def _check_exportable(job: JobRecord, workdir: Path) -> None:
    from labcore.engine.run import BEST_WEIGHTS

    what = f"run {job.key[:12]}"
    if job.kind != "run":
        raise LabError(f"{what} is a {job.kind} job, not a training run; only runs have a fine-tuned model")
    if not job.finished or not (workdir / BEST_WEIGHTS).is_file():
        raise LabError(f"{what} is {job.status} and has no fine-tuned weights in {workdir}; export a finished "
                       f"run (run it again if its folder was cleared)")
    why = refusal(job.spec)
    if why:
        raise LabError(f"{what} cannot be written as a transformers model: {why}")


def _full_table(prepared) -> Any:
    """The backbone's whole word table with the run's trained rows in place (float32, [vocab, hidden])."""
    import torch

    from labcore.models import load_backbone

    spec, adapter = prepared.spec, prepared.model.adapter
    if adapter.rows is None:
        return adapter.embedding.weight.detach().float().clone()
    base, _, _ = load_backbone(spec.model, spec.init, seed=spec.seed)
    table = base.get_input_embeddings().weight.detach().float().clone()
    with torch.no_grad():
        table[torch.tensor(adapter.rows)] = adapter.embedding.weight.detach().float()
    return table


def _classifier(prepared, label_names: list[str]):
    """The transformers classifier holding the run's body, table and head (see the module's docstring)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    model = prepared.model
    config = model.backbone.config.__class__.from_dict(model.backbone.config.to_dict())
    config.num_labels = len(label_names)
    config.id2label = dict(enumerate(label_names))
    config.label2id = {name: i for i, name in enumerate(label_names)}
    config.problem_type = "single_label_classification"
    config.architectures = None
    out = AutoModelForSequenceClassification.from_config(config).float().eval()
    table = _full_table(prepared)
    if prepared.mapping is not None and prepared.mapping.is_text:
        table = table[torch.tensor(prepared.mapping.ids)]  # tokenizer id i feeds the row of mapped id i
    body = {name: tensor.float() for name, tensor in model.backbone.state_dict().items()}
    missing, unexpected = out.base_model.load_state_dict(body, strict=False)
    missing = [m for m in missing if not m.startswith("pooler.") and m != "embeddings.word_embeddings.weight"]
    if missing or unexpected:
        raise LabError(f"the run's body does not fill a {config.model_type} classifier (missing "
                       f"{missing[:4]}, unexpected {unexpected[:4]}); export writes the families "
                       f"{', '.join(HEADS)}")
    before, after = (out.get_submodule(path) for path in HEADS[config.model_type])
    hidden, classes = before.out_features, len(label_names)
    if classes > hidden:
        raise LabError(f"{classes} classes do not fit the {hidden}-wide layer that carries the head")
    weight, bias = model.head.weight.detach().float(), model.head.bias.detach().float()
    with torch.no_grad():
        out.get_input_embeddings().weight.copy_(table)
        before.weight.zero_()
        before.bias.zero_()
        before.weight[:classes] = EPSILON * weight
        before.bias[:classes] = EPSILON * bias
        after.weight.zero_()
        after.weight[:, :classes] = torch.eye(classes) / EPSILON
        after.bias.zero_()
    return out


def _tokenizer(prepared):
    """A fast tokenizer for the run's raw inputs: the discipline's symbols to the mapped ids, or for text the
    model's own tokenizer (its ids are permuted in the table instead)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    source, mapping, binfo = prepared.tokenizer, prepared.mapping, prepared.backbone_info
    if mapping.is_text:
        source.model_max_length = prepared.max_length  # truncation=True cuts where the run cut, not at the body's limit
        return source
    specials = {"unk_token": source.unk_token, "pad_token": source.pad_token, "cls_token": source.cls_token,
                "sep_token": source.sep_token}
    vocab = {symbol: int(i) for symbol, i in zip(mapping.alphabet, mapping.ids)}
    vocab.update({token: source.convert_tokens_to_ids(token) for token in specials.values() if token})
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=source.unk_token))
    if all(len(symbol) == 1 for symbol in mapping.alphabet):  # DNA, proteins: one character a symbol
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                           pre_tokenizers.Split(Regex("."), "isolated")])
    else:  # longer symbols (pitches, words of a corpus) are written separated by spaces
        tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if binfo.cls_id is not None and binfo.sep_id is not None:
        cls, sep = specials["cls_token"], specials["sep_token"]
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{cls} $A {sep}", special_tokens=[(cls, binfo.cls_id), (sep, binfo.sep_id)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, model_max_length=prepared.max_length,
                                   **{k: v for k, v in specials.items() if v})


def raw_examples(prepared, split: str = "test") -> list[str]:
    """A split's examples as raw strings, the way the written tokenizer reads them."""
    alphabet = prepared.info.alphabet
    if prepared.info.input_kind == "text":
        return list(prepared.dataset[split]["text"])
    joiner = "" if all(len(symbol) == 1 for symbol in alphabet) else " "
    return [joiner.join(alphabet[t] for t in tokens) for tokens in prepared.dataset[split]["tokens"]]


def lab_logits(prepared, split: str = "test", limit: int | None = None) -> np.ndarray:
    """The lab model's logits on a split's encoded examples, in fp32 (the exported model's precision)."""
    from labcore.engine.evaluate import predict

    data = prepared.splits[split]
    if limit is not None:
        data = data.subset(range(min(limit, len(data))))
    return predict(prepared.model, data, 64, "cpu", "fp32").numpy()


def exported_logits(classifier, tokenizer, texts: list[str]) -> np.ndarray:
    import torch

    with torch.inference_mode():
        batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
        return classifier(**batch).logits.float().numpy()


def model_card(job: JobRecord, prepared, folder_name: str) -> str:
    """README.md: what the model is, how it was trained and measured, and how to feed it."""
    record, info, spec = job.result, prepared.info, prepared.spec
    binfo_family = prepared.backbone_info.family
    metric = record.get("metric", "")
    mapping = prepared.mapping
    rows = ("\n".join(f"| `{s}` | {i} | `{t}` |" for s, i, t in zip(mapping.alphabet, mapping.ids, mapping.tokens))
            if not mapping.is_text else "")
    windows = ("Long records were cut into windows whose predictions voted in the lab; this model classifies "
               "one window (the first max-length tokens) per input." if info.vote_by_group else
               "Each record was one input (no windows).")
    symbols = ("one character a symbol, spaces ignored" if all(len(s) == 1 for s in (mapping.alphabet or ("xx",)))
               else "symbols separated by spaces")
    return f"""---
library_name: transformers
pipeline_tag: text-classification
tags: [transfer-lab, {spec.discipline}]
---
# {spec.model} fine-tuned on {info.title}

Transfer Lab run `{job.key}` ({job.label}): a `{spec.model}` body ({spec.init} init) trained
with the `{spec.protocol}` protocol on **{spec.discipline}**, classes {', '.join(info.class_names)}.

```python
from transformers import pipeline
classify = pipeline("text-classification", model="{folder_name}")
classify(["{(raw_examples(prepared)[:1] or [''])[0]}"], truncation=True)
```

## Inputs
- {'Text, tokenised by the body’s own tokenizer' if mapping.is_text else f'Raw {info.input_kind}: {symbols}'};
  the token mapping is `{spec.mapping}`{f' (seed {spec.mapping_seed})' if spec.mapping == 'random' else ''}.
- Max length: {prepared.max_length} tokens with the specials (pass `truncation=True` for longer inputs).
- {windows}
{('| symbol | id | token of the body vocabulary |' + chr(10) + '|---|---|---|' + chr(10) + rows) if rows else ''}

## Results (best checkpoint, step {record.get('best_step')})
| split | {metric} |
|---|---|
| validation | {record.get('validation', {}).get(metric, float('nan')):.4f} |
| test | {record.get('test', {}).get(metric, float('nan')):.4f} |
| majority class (test) | {record.get('baseline', {}).get('majority', float('nan')):.4f} |

Test examples: {record.get('test_examples', 0)}; trained on {record.get('train_examples', 0)} examples for
{record.get('steps_done', 0)} steps on {record.get('device_name') or record.get('device', '')} ({record.get('precision', '')}).

## Head
The lab's head is one linear layer on the first row (`[CLS]`, `<s>`). The {binfo_family} classification head
passes that row through tanh(dense(...)) first, so that dense layer holds the lab's head scaled by {EPSILON:g}
(where tanh is linear) and the layer after the tanh scales it back: the predicted class is the lab's, logits
agree to about 1e-7 relative.

## Data
{info.source}. Licence: {info.licence}. Citation: {info.citation}.

## Spec
```json
{json.dumps(spec.to_dict(), indent=1, sort_keys=True)}
```
Rerun it: `{spec.cli()}`
"""


def export_run(job: JobRecord, workdir: Path, folder: str | Path) -> Path:
    """Write the run of stored record ``job`` (its files in ``workdir``) to ``folder``; returns the folder."""
    from labcore.engine.run import load_trained
    from labcore.runspec import make_spec

    _check_exportable(job, workdir)
    prepared = load_trained(make_spec(**job.spec), workdir)
    info, binfo = prepared.info, prepared.backbone_info
    if binfo.family not in HEADS:
        raise LabError(f"run {job.key[:12]} has a {binfo.family} body; export writes the families "
                       f"{', '.join(HEADS)} (a decoder's transformers head reads its last token without a bias, "
                       f"which the lab's head has)")
    if info.output_kind != "class":
        raise LabError(f"run {job.key[:12]} predicts {info.output_kind} outputs; a text-classification model "
                       f"predicts one class")
    if prepared.model.pool_layer is not None or prepared.model.pooling != "cls":
        raise LabError(f"run {job.key[:12]} pools layer {prepared.model.pool_layer} with "
                       f"{prepared.model.pooling!r}; a transformers head reads the last layer's first row")
    classifier, tokenizer = _classifier(prepared, list(info.class_names)), _tokenizer(prepared)
    texts = raw_examples(prepared)[:CHECK_EXAMPLES]
    ours, theirs = lab_logits(prepared, limit=CHECK_EXAMPLES), exported_logits(classifier, tokenizer, texts)
    if not np.array_equal(ours.argmax(1), theirs.argmax(1)):
        raise LabError(f"the written model predicts differently from the lab on {int((ours.argmax(1) != theirs.argmax(1)).sum())} "
                       f"of the first {len(texts)} test examples; nothing was written")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    classifier.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "README.md").write_text(model_card(job, prepared, out.name), encoding="utf-8")
    return out


def export_stored(store: Any, key: str, folder: str | Path) -> Path:
    """Write the stored run ``key`` (a prefix will do) to ``folder``: what the API and the command call."""
    key = store.resolve_key(key)
    return export_run(store.record(key), store.workdir(key), folder)
