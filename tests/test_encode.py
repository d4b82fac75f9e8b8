"""Encoded splits a process keeps: served again only where everything the encoding reads is the same."""

from __future__ import annotations

import numpy as np
import pytest

from labcore.data import encode
from labcore.data.base import DisciplineInfo
from labcore.mapping import MappingSpec, Vocab, build_mapping

ALPHABET = ("A", "C", "G", "T")
TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "c", "g", "t", "x", "y", "z")
INFO = DisciplineInfo(name="dna-toy", title="toy", input_kind="tokens", output_kind="class", metric="accuracy",
                      citation="", source="", licence="", alphabet=ALPHABET, class_names=("no", "yes"),
                      max_length=6)


def split(rows: int = 5, shift: int = 0):
    from datasets import Dataset

    rng = np.random.default_rng(shift)
    return Dataset.from_dict({"tokens": [rng.integers(0, 4, size=6).tolist() for _ in range(rows)],
                              "label": [i % 2 for i in range(rows)]})


def mapping(seed: int):
    return build_mapping(MappingSpec("random", seed=seed), ALPHABET, Vocab.from_tokens(TOKENS, name="toy"))


@pytest.fixture
def counted(monkeypatch):
    """The number of real encodings, on an empty store of kept ones."""
    calls = []
    real = encode.encode_split
    monkeypatch.setattr(encode, "_ENCODED", type(encode._ENCODED)())
    monkeypatch.setattr(encode, "encode_split", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def kwargs(seed: int = 0, max_length: int = 8):
    return dict(adapter="vocab", max_length=max_length, mapping=mapping(seed), tokenizer=None, cls_id=2, sep_id=3)


def test_the_same_split_and_encoding_is_served_from_what_the_process_kept(counted):
    data = split()
    first = encode.encode_split_kept(data, INFO, **kwargs())
    again = encode.encode_split_kept(data, INFO, **kwargs())  # a new but equal mapping: the random twin's
    assert len(counted) == 1
    assert [x.tolist() for x in again.inputs] == [x.tolist() for x in first.inputs]
    assert again.labels.tolist() == first.labels.tolist() == [0, 1, 0, 1, 0]
    # Each caller gets its own lists: slicing the vocabulary of one leaves the kept encoding as it was.
    encode.slice_vocabulary([again])
    third = encode.encode_split_kept(data, INFO, **kwargs())
    assert [x.tolist() for x in third.inputs] == [x.tolist() for x in first.inputs] != \
        [x.tolist() for x in again.inputs]
    assert len(counted) == 1


def test_another_mapping_length_or_data_set_is_encoded_anew(counted):
    data = split()
    base = encode.encode_split_kept(data, INFO, **kwargs())
    other_mapping = encode.encode_split_kept(data, INFO, **kwargs(seed=1))
    shorter = encode.encode_split_kept(data, INFO, **kwargs(max_length=5))
    other_data = encode.encode_split_kept(split(shift=1), INFO, **kwargs())
    assert len(counted) == 4
    assert [x.tolist() for x in other_mapping.inputs] != [x.tolist() for x in base.inputs]
    assert {len(x) for x in shorter.inputs} == {5}
    assert [x.tolist() for x in other_data.inputs] != [x.tolist() for x in base.inputs]


def test_only_the_newest_encodings_are_kept(counted):
    sets = [split(shift=i) for i in range(encode.ENCODED_KEPT + 1)]
    for data in sets:
        encode.encode_split_kept(data, INFO, **kwargs())
    assert len(encode._ENCODED) == encode.ENCODED_KEPT
    encode.encode_split_kept(sets[-1], INFO, **kwargs())  # the newest: kept
    assert len(counted) == encode.ENCODED_KEPT + 1
    encode.encode_split_kept(sets[0], INFO, **kwargs())  # the oldest: dropped, so encoded again
    assert len(counted) == encode.ENCODED_KEPT + 2
