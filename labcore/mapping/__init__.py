"""Token mappings: which model vocabulary id each discipline symbol (or each text token) is fed as.

Kao & Lee ask what a text-pretrained model carries over when token meanings change. §2.1 permutes the
tokens of text with ``T(i) = (i + 1000) mod D``; §2.2 feeds non-text symbols (bases, amino acids,
pitches) as randomly chosen vocabulary tokens, and warns that mapping them to the ``[unused]`` tokens
makes the model no better than one trained from scratch. A :class:`MappingSpec` names one such rule,
:func:`build_mapping` turns it into a concrete, validated :class:`TokenMapping` for one vocabulary,
and the mapping's :attr:`TokenMapping.key` goes into a run's cache key, so changing the mapping reruns
exactly the work that depends on it.

Two shapes of mapping:

* **alphabet** (``alphabet`` is a tuple of symbols, e.g. ``("A", "C", "G", "T")``): one id per symbol;
  :meth:`TokenMapping.apply` turns symbol indices (the ``tokens`` column of a discipline) into ids.
* **text** (``alphabet is None``): the discipline's text is tokenised by the model's own tokenizer, so
  the "alphabet" is the vocabulary itself and the mapping is a permutation of all ``D`` ids.
  Special ids ([CLS], [SEP], [PAD], ...) always map to themselves there, so sequence structure is kept.

Kinds (see :data:`KINDS` and :func:`describe_kind`): ``identity``, ``shift``, ``random``, ``unused``,
``letters`` and ``table``. Every kind's result goes through one check, :func:`validate`.

The parts: :mod:`.vocab` (the vocabulary), :mod:`.spec` (the rule and the registry of rules),
:mod:`.kinds` (the rules), :mod:`.build` (building and the one check), :mod:`.result` (the mapping).
"""

from __future__ import annotations

# kinds registers every rule in KINDS: importing the package is enough to build any mapping.
from labcore.mapping import kinds  # noqa: F401
from labcore.mapping.build import RUN_SPECIAL_FIX, SPECIAL_FIX, build_mapping, validate
from labcore.mapping.common import MAPPING_VERSION
from labcore.mapping.result import TokenMapping
from labcore.mapping.spec import KINDS, Builder, Kind, MappingSpec, default_spec, describe_kind, of_run
from labcore.mapping.vocab import DEFAULT_SPECIAL_TOKENS, Vocab, model_vocab, unused_ids

__all__ = ["DEFAULT_SPECIAL_TOKENS", "KINDS", "MAPPING_VERSION", "RUN_SPECIAL_FIX", "SPECIAL_FIX", "Builder", "Kind",
           "MappingSpec", "TokenMapping", "Vocab", "build_mapping", "default_spec", "describe_kind", "model_vocab", "of_run",
           "unused_ids", "validate"]
