"""Token mappings: every kind, every validation error, JSON and keys; then the real MiniLM vocabulary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from labcore.errors import MappingError
from labcore.mapping import (
    KINDS, MAPPING_VERSION, MappingSpec, TokenMapping, Vocab, build_mapping, default_spec, describe_kind,
    validate,
)

REPO = Path(__file__).resolve().parent.parent
DNA = ("A", "C", "G", "T")

# A tiny BERT-shaped vocabulary: specials scattered (0, 4-7), [unusedN] out of numeric order,
# lower-case letters, a sub-word piece.
TOKENS = ("[PAD]", "[unused0]", "[unused10]", "[unused2]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
          "a", "c", "g", "t", "the", "of", "##s", "[unused1]", "x", "y")
SPECIAL = frozenset({0, 4, 5, 6, 7})
NON_SPECIAL = [i for i in range(len(TOKENS)) if i not in SPECIAL]


@pytest.fixture()
def vocab() -> Vocab:
    return Vocab.from_tokens(TOKENS, name="tiny")


def errors(spec: MappingSpec, alphabet, vocab: Vocab) -> str:
    with pytest.raises(MappingError) as info:
        build_mapping(spec, alphabet, vocab)
    return str(info.value)


# --------------------------------------------------------------------------------------------------
# vocabulary


def test_vocab_from_tokens_finds_specials_and_orders_unused_by_number(vocab):
    assert vocab.size == len(TOKENS)
    assert vocab.special_ids == SPECIAL
    assert vocab.unused_ids == (1, 15, 3, 2)  # [unused0], [unused1], [unused2], [unused10]
    assert vocab.non_special_ids.tolist() == NON_SPECIAL
    assert vocab.index["##s"] == 14


def test_vocab_from_file_matches_from_tokens(tmp_path, vocab):
    path = tmp_path / "tiny" / "vocab.txt"
    path.parent.mkdir()
    path.write_text("\n".join(TOKENS) + "\n", encoding="utf-8")
    loaded = Vocab.from_file(path)
    assert loaded.tokens == TOKENS  # the final newline adds no empty token
    assert loaded.name == "tiny"
    assert loaded.fingerprint == vocab.fingerprint


def test_vocab_from_file_missing_names_file(tmp_path):
    with pytest.raises(MappingError, match="cannot read vocabulary file"):
        Vocab.from_file(tmp_path / "nope.txt")


def test_fingerprint_depends_on_tokens_and_specials_not_name(vocab):
    renamed = Vocab(tokens=vocab.tokens, special_ids=vocab.special_ids, unused_ids=vocab.unused_ids, name="other")
    assert renamed.fingerprint == vocab.fingerprint
    changed = Vocab.from_tokens(TOKENS[:-1] + ("z",))
    assert changed.fingerprint != vocab.fingerprint
    fewer_special = Vocab(tokens=vocab.tokens, special_ids=frozenset({0}), unused_ids=vocab.unused_ids)
    assert fewer_special.fingerprint != vocab.fingerprint
    assert len(vocab.fingerprint) == 64


def test_vocab_rejects_empty_and_out_of_range_ids():
    with pytest.raises(MappingError, match="vocabulary is empty"):
        Vocab(tokens=())
    with pytest.raises(MappingError, match=r"\[9\] lie outside \[0, 2\)"):
        Vocab(tokens=("a", "b"), special_ids=frozenset({9}))


def test_vocab_normalises_lists_and_sets():
    made = Vocab(tokens=["[PAD]", "a"], special_ids={0}, unused_ids=[])
    assert made.tokens == ("[PAD]", "a") and made.special_ids == frozenset({0})
    hash(made)


# --------------------------------------------------------------------------------------------------
# spec


def test_kinds_registry_and_descriptions():
    assert KINDS.names() == ["identity", "shift", "random", "unused", "letters", "native", "table"]
    for kind in KINDS:
        line = describe_kind(kind)
        assert line and "\n" not in line
    assert "1000" in describe_kind("shift") and "§2.1" in describe_kind("shift")
    assert "§2.2" in describe_kind("random")
    with pytest.raises(MappingError, match="valid kinds: identity, shift, random, unused, letters, native, table"):
        describe_kind("rot13")


def test_unknown_kind_lists_valid_kinds():
    with pytest.raises(MappingError, match="unknown mapping kind 'rot13'; valid kinds: identity, shift"):
        MappingSpec("rot13")


@pytest.mark.parametrize("field, value, message", [
    ("k", 1.5, "mapping k must be an integer"),
    ("k", True, "mapping k must be an integer"),
    ("seed", "1", "mapping seed must be an integer"),
    ("seed", -1, "seed must be >= 0"),
    ("allow_special", "yes", "allow_special must be True or False"),
])
def test_spec_rejects_bad_scalars(field, value, message):
    with pytest.raises(MappingError, match=message):
        MappingSpec("shift", **{field: value})


def test_spec_table_rules():
    with pytest.raises(MappingError, match="not a \\(symbol, id\\) pair"):
        MappingSpec("table", table=(("A", 1, 2),))
    with pytest.raises(MappingError, match="not a \\(symbol, id\\) pair"):
        MappingSpec("table", table=((1, 1),))
    with pytest.raises(MappingError, match="needs a table"):
        MappingSpec("table")
    with pytest.raises(MappingError, match="used only by kind 'table'.*set kind='table'"):
        MappingSpec("random", table=(("A", 1),))
    listed = MappingSpec("table", table=[["A", np.int64(8)]])  # as JSON or a form hands it over
    assert listed.table == (("A", 8),)
    hash(listed)


def test_spec_json_round_trip_is_canonical():
    spec = MappingSpec("table", table=(("C", 9), ("A", 8)), allow_special=True)
    text = spec.to_json()
    assert json.loads(text) == {"allow_special": True, "k": 1000, "kind": "table", "seed": 0,
                                "table": [["C", 9], ["A", 8]]}
    assert list(json.loads(text)) == sorted(json.loads(text))
    assert MappingSpec.from_json(text) == spec
    for kind in ("identity", "shift", "random", "unused", "letters"):
        other = MappingSpec(kind, k=7, seed=3)
        assert MappingSpec.from_json(other.to_json()) == other


def test_spec_from_json_errors():
    with pytest.raises(MappingError, match="not valid JSON"):
        MappingSpec.from_json("{kind")
    with pytest.raises(MappingError, match="must be an object"):
        MappingSpec.from_json("[1]")
    with pytest.raises(MappingError, match="unknown field\\(s\\) shift; valid fields"):
        MappingSpec.from_json('{"kind": "shift", "shift": 3}')
    with pytest.raises(MappingError, match="needs a kind"):
        MappingSpec.from_json('{"k": 3}')


def test_spec_key_uses_only_the_fields_the_kind_reads():
    assert MappingSpec("shift", k=1000).key == MappingSpec("shift").key
    assert MappingSpec("shift", k=1000).key != MappingSpec("shift", k=999).key
    assert MappingSpec("random", seed=1).key != MappingSpec("random", seed=2).key
    # A leftover k on a random mapping changes nothing, so it must not split the cache.
    assert MappingSpec("random", k=5).key == MappingSpec("random").key
    assert MappingSpec("unused", seed=4, allow_special=True).key == MappingSpec("unused").key
    assert MappingSpec("letters", allow_special=True).key != MappingSpec("letters").key
    # A table is a set of pairs: its order does not matter.
    assert (MappingSpec("table", table=(("A", 8), ("C", 9))).key
            == MappingSpec("table", table=(("C", 9), ("A", 8))).key)
    assert MappingSpec("shift").key != MappingSpec("random").key


def test_default_spec():
    assert default_spec(True) == MappingSpec("identity")
    assert default_spec(False) == MappingSpec("random")


# --------------------------------------------------------------------------------------------------
# kinds


def test_identity_text_is_the_identity(vocab):
    mapping = build_mapping(MappingSpec("identity"), None, vocab)
    assert mapping.ids == tuple(range(vocab.size))
    assert mapping.is_text


def test_identity_decimal_symbols_are_ids(vocab):
    mapping = build_mapping(MappingSpec("identity"), ("8", "12", "16"), vocab)
    assert mapping.ids == (8, 12, 16)


def test_identity_on_letters_suggests_letters_or_random(vocab):
    message = errors(MappingSpec("identity"), DNA, vocab)
    assert "'A', 'C', 'G', 'T'" in message and "'letters'" in message and "'random'" in message


def test_identity_decimal_symbol_on_special_id_is_named(vocab):
    message = errors(MappingSpec("identity"), ("8", "5"), vocab)
    assert "'5' -> [CLS] (id 5)" in message and "allow_special=True" in message
    assert build_mapping(MappingSpec("identity", allow_special=True), ("8", "5"), vocab).ids == (8, 5)


def test_a_run_is_told_the_fixes_a_run_has_not_allow_special(vocab):
    # RunSpec has no allow_special: a run (command line, pages) gets advice it can follow.
    from labcore.mapping import RUN_SPECIAL_FIX

    with pytest.raises(MappingError) as raised:
        build_mapping(MappingSpec("table", table=(("A", 5), ("C", 9))), ("A", "C"), vocab,
                      special_fix=RUN_SPECIAL_FIX)
    message = str(raised.value)
    assert "'A' -> [CLS] (id 5)" in message and "allow_special" not in message
    assert "give those symbols other ids" in message and "random, shift or unused" in message


def test_shift_text_permutes_non_special_ids_and_keeps_specials(vocab):
    k = 3
    ids = np.array(build_mapping(MappingSpec("shift", k=k), None, vocab).ids)
    for i in SPECIAL:
        assert ids[i] == i
    m = len(NON_SPECIAL)
    for j, i in enumerate(NON_SPECIAL):
        assert ids[i] == NON_SPECIAL[(j + k) % m]
    assert sorted(ids.tolist()) == list(range(vocab.size))
    assert not set(ids[NON_SPECIAL].tolist()) & SPECIAL


def test_shift_zero_and_full_cycle_are_identity(vocab):
    assert build_mapping(MappingSpec("shift", k=0), None, vocab).ids == tuple(range(vocab.size))
    full = len(NON_SPECIAL)
    assert build_mapping(MappingSpec("shift", k=full), None, vocab).ids == tuple(range(vocab.size))
    negative = build_mapping(MappingSpec("shift", k=-1), None, vocab).ids
    assert negative[NON_SPECIAL[0]] == NON_SPECIAL[-1]


def test_shift_alphabet_starts_at_the_first_non_special_ids(vocab):
    assert build_mapping(MappingSpec("shift", k=0), DNA, vocab).ids == tuple(NON_SPECIAL[:4])
    assert build_mapping(MappingSpec("shift", k=2), DNA, vocab).ids == tuple(NON_SPECIAL[2:6])
    wrapped = build_mapping(MappingSpec("shift", k=len(NON_SPECIAL) - 1), DNA, vocab).ids
    assert wrapped == (NON_SPECIAL[-1],) + tuple(NON_SPECIAL[:3])


def test_shift_alphabet_larger_than_vocabulary(vocab):
    alphabet = tuple(f"s{i}" for i in range(len(NON_SPECIAL) + 1))
    assert "shift needs 14 distinct non-special ids, vocabulary 'tiny' has 13" in errors(
        MappingSpec("shift"), alphabet, vocab)


def test_random_is_seeded(vocab):
    first = build_mapping(MappingSpec("random", seed=1), DNA, vocab)
    again = build_mapping(MappingSpec("random", seed=1), DNA, vocab)
    assert first.ids == again.ids
    assert len(set(first.ids)) == 4 and not set(first.ids) & SPECIAL
    others = {build_mapping(MappingSpec("random", seed=s), DNA, vocab).ids for s in range(2, 8)}
    assert others - {first.ids}  # at least one other seed gives another table


def test_random_text_is_a_permutation_fixing_specials(vocab):
    ids = build_mapping(MappingSpec("random", seed=0), None, vocab).ids
    assert sorted(ids) == list(range(vocab.size))
    assert all(ids[i] == i for i in SPECIAL)
    assert ids != build_mapping(MappingSpec("random", seed=1), None, vocab).ids


def test_random_alphabet_larger_than_vocabulary(vocab):
    alphabet = tuple(f"s{i}" for i in range(20))
    assert "random needs 20 distinct non-special ids" in errors(MappingSpec("random"), alphabet, vocab)


def test_unused_maps_in_numeric_order(vocab):
    mapping = build_mapping(MappingSpec("unused"), ("A", "C", "G"), vocab)
    assert [token for _, _, token in mapping.rows()] == ["[unused0]", "[unused1]", "[unused2]"]


def test_unused_with_too_few_or_none(vocab):
    message = errors(MappingSpec("unused"), tuple("ACGTU"), vocab)
    assert "vocabulary 'tiny' has only 4 [unusedN] tokens, the alphabet needs 5" in message
    assert "'random'" in message
    gpt_like = Vocab.from_tokens(("<|endoftext|>", "a", "b", "c", "d"), name="gpt2")
    message = errors(MappingSpec("unused"), DNA, gpt_like)
    assert "vocabulary 'gpt2' has no [unusedN] tokens" in message and "'random'" in message


def test_unused_rejects_text(vocab):
    assert "for text use 'shift' or 'random'" in errors(MappingSpec("unused"), None, vocab)


def test_letters_exact_then_lower_case(vocab):
    mapping = build_mapping(MappingSpec("letters"), ("A", "c", "##s"), vocab)
    assert mapping.rows() == [("A", 8, "a"), ("c", 9, "c"), ("##s", 14, "##s")]


def test_letters_names_symbols_without_a_token(vocab):
    message = errors(MappingSpec("letters"), ("A", "Q", "Z"), vocab)
    assert "spells 'Q', 'Z'" in message and "'table'" in message


def test_letters_rejects_text(vocab):
    assert "use 'identity'" in errors(MappingSpec("letters"), None, vocab)


def test_letters_onto_a_special_token_needs_allow_special(vocab):
    message = errors(MappingSpec("letters"), ("A", "[MASK]"), vocab)
    assert "'[MASK]' -> [MASK] (id 7)" in message
    assert build_mapping(MappingSpec("letters", allow_special=True), ("A", "[MASK]"), vocab).ids == (8, 7)


def test_letters_collision_names_both_symbols():
    # Both 'A' and 'a' are spelled by the token 'a' when the vocabulary has no 'A'.
    cased = Vocab.from_tokens(("[PAD]", "a", "b"))
    message = errors(MappingSpec("letters"), ("A", "a"), cased)
    assert "not one-to-one: 'A' and 'a' share id 1 (a)" in message


def test_table_maps_as_given(vocab):
    spec = MappingSpec("table", table=(("T", 11), ("A", 8), ("G", 10), ("C", 9)))
    assert build_mapping(spec, DNA, vocab).ids == (8, 9, 10, 11)


def test_table_missing_and_unknown_symbols(vocab):
    message = errors(MappingSpec("table", table=(("A", 8), ("C", 9), ("N", 12))), DNA, vocab)
    assert "has no id for 'G', 'T'" in message and "names 'N', not in the alphabet" in message
    assert "'A', 'C', 'G', 'T'" in message


def test_table_two_ids_for_one_symbol(vocab):
    message = errors(MappingSpec("table", table=(("A", 8), ("A", 9))), ("A",), vocab)
    assert "more than one id for 'A' (8 and 9)" in message


def test_table_collision_names_symbols_and_id(vocab):
    message = errors(MappingSpec("table", table=(("A", 8), ("C", 8), ("G", 12), ("T", 12))), DNA, vocab)
    assert "'A' and 'C' share id 8 (a)" in message and "'G' and 'T' share id 12 (the)" in message


def test_table_ids_outside_vocabulary(vocab):
    message = errors(MappingSpec("table", table=(("A", -1), ("C", 9), ("G", 18), ("T", 99))), DNA, vocab)
    assert "outside [0, 18): 'A' -> -1, 'G' -> 18, 'T' -> 99" in message and "below 18" in message


def test_table_onto_special(vocab):
    spec = MappingSpec("table", table=(("A", 5), ("C", 9), ("G", 10), ("T", 0)))
    message = errors(spec, DNA, vocab)
    assert "'A' -> [CLS] (id 5), 'T' -> [PAD] (id 0)" in message
    allowed = MappingSpec("table", table=spec.table, allow_special=True)
    assert build_mapping(allowed, DNA, vocab).ids == (5, 9, 10, 0)


def test_table_on_text_swaps_listed_tokens(vocab):
    spec = MappingSpec("table", table=(("the", 13), ("of", 12)))
    ids = build_mapping(spec, None, vocab).ids
    assert ids[12] == 13 and ids[13] == 12
    assert all(ids[i] == i for i in range(vocab.size) if i not in (12, 13))


def test_table_on_text_must_stay_a_permutation(vocab):
    message = errors(MappingSpec("table", table=(("the", 13),)), None, vocab)
    assert "'the' and 'of' share id 13 (of)" in message


def test_table_on_text_names_unknown_tokens(vocab):
    assert "names 'zebra', not tokens of vocabulary 'tiny'" in errors(
        MappingSpec("table", table=(("zebra", 3),)), None, vocab)


def test_table_on_text_onto_special(vocab):
    message = errors(MappingSpec("table", table=(("the", 5), ("[CLS]", 12))), None, vocab)
    assert "'the' -> [CLS] (id 5)" in message


@pytest.mark.parametrize("alphabet, message", [
    ((), "alphabet is empty"),
    (("A", "C", "A"), "lists 'A' more than once"),
    (("A", ""), "non-empty strings, got ''"),
    (("A", 3), "non-empty strings, got 3"),
])
def test_alphabet_checks(vocab, alphabet, message):
    assert message in errors(MappingSpec("random"), alphabet, vocab)


def test_validate_wants_one_id_per_symbol(vocab):
    with pytest.raises(MappingError, match="3 ids for 4 symbols"):
        validate(MappingSpec("random"), DNA, np.array([8, 9, 10]), vocab)
    with pytest.raises(MappingError, match="for 18 vocabulary ids"):
        validate(MappingSpec("random"), None, np.arange(5), vocab)


def test_error_lists_are_capped():
    big = Vocab.from_tokens(tuple(f"w{i}" for i in range(40)))
    alphabet = tuple(f"s{i}" for i in range(30))
    table = tuple((s, 100 + i) for i, s in enumerate(alphabet))
    message = errors(MappingSpec("table", table=table), alphabet, big)
    assert "and 20 more" in message


# --------------------------------------------------------------------------------------------------
# the result


def test_apply_is_vectorised_over_any_shape(vocab):
    mapping = build_mapping(MappingSpec("letters"), DNA, vocab)
    batch = np.array([[0, 1, 2, 3], [3, 3, 0, 1]])
    assert mapping.apply(batch).tolist() == [[8, 9, 10, 11], [11, 11, 8, 9]]
    assert mapping.apply([2]).tolist() == [10]
    assert mapping.apply(np.zeros((0, 5), dtype=np.int64)).shape == (0, 5)
    text = build_mapping(MappingSpec("shift", k=1), None, vocab)
    assert text.apply([5, 8, 6]).tolist() == [5, 9, 6]  # [CLS] a [SEP] -> [CLS] c [SEP]


def test_apply_rejects_bad_indices(vocab):
    mapping = build_mapping(MappingSpec("letters"), DNA, vocab)
    with pytest.raises(MappingError, match="-1, 4 are symbol indices outside the alphabet of 4 symbols"):
        mapping.apply([0, 4, -1, 4])
    with pytest.raises(MappingError, match="must be integers"):
        mapping.apply([0.0, 1.0])
    text = build_mapping(MappingSpec("identity"), None, vocab)
    with pytest.raises(MappingError, match="18 are ids outside the vocabulary of 18.*tiny model's own tokenizer"):
        text.apply([18])


def test_rows(vocab):
    mapping = build_mapping(MappingSpec("shift", k=1), None, vocab)
    assert mapping.rows(limit=2) == [("[PAD]", 0, "[PAD]"), ("[unused0]", 2, "[unused10]")]
    assert len(mapping.rows()) == vocab.size


def test_mapping_json_round_trip(vocab):
    for spec, alphabet in [(MappingSpec("random", seed=3), DNA), (MappingSpec("shift", k=2), None),
                           (MappingSpec("table", table=(("A", 8),)), ("A",))]:
        mapping = build_mapping(spec, alphabet, vocab)
        again = TokenMapping.from_json(mapping.to_json())
        assert again == mapping and again.key == mapping.key
        assert again.apply([0]).tolist() == mapping.apply([0]).tolist()


def test_mapping_from_json_errors(vocab):
    with pytest.raises(MappingError, match="not a saved token mapping"):
        TokenMapping.from_json('{"alphabet": null}')
    with pytest.raises(MappingError, match="not a saved token mapping"):
        TokenMapping.from_json("nonsense")
    data = json.loads(build_mapping(MappingSpec("letters"), DNA, vocab).to_json())
    data["v"] = MAPPING_VERSION + 1
    with pytest.raises(MappingError, match="rebuild it with build_mapping"):
        TokenMapping.from_json(json.dumps(data))
    data["v"] = MAPPING_VERSION
    data["ids"] = data["ids"][:3]
    with pytest.raises(MappingError, match="inconsistent"):
        TokenMapping.from_json(json.dumps(data))


def test_mapping_key_depends_on_spec_alphabet_and_vocabulary(vocab):
    base = build_mapping(MappingSpec("random", seed=0), DNA, vocab).key
    assert base == build_mapping(MappingSpec("random", seed=0, k=3), DNA, vocab).key
    assert base != build_mapping(MappingSpec("random", seed=1), DNA, vocab).key
    assert base != build_mapping(MappingSpec("random", seed=0), ("A", "C", "G", "U"), vocab).key
    other_vocab = Vocab.from_tokens(TOKENS + ("z",))
    assert base != build_mapping(MappingSpec("random", seed=0), DNA, other_vocab).key
    assert base != build_mapping(MappingSpec("random", seed=0), None, vocab).key
    assert base != MappingSpec("random").key


_KEY_SCRIPT = """
from labcore.mapping import MappingSpec, Vocab, build_mapping
vocab = Vocab.from_tokens({tokens!r})
print(MappingSpec("shift", k=3).key)
print(build_mapping(MappingSpec("random", seed=5), ("A", "C", "G", "T"), vocab).key)
"""


def test_keys_are_stable_across_processes(vocab):
    # Another interpreter with another string-hash seed must compute the same keys (they name cache entries).
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", _KEY_SCRIPT.format(tokens=TOKENS)], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == [MappingSpec("shift", k=3).key,
                   build_mapping(MappingSpec("random", seed=5), DNA, vocab).key]


# --------------------------------------------------------------------------------------------------
# the real MiniLM vocabulary (BERT uncased WordPiece, 30,522 ids)


@pytest.fixture(scope="module")
def minilm(fetched_assets):
    from transformers import AutoTokenizer

    from labcore import assets

    tokenizer = AutoTokenizer.from_pretrained(str(assets.require("minilm")))
    return tokenizer, Vocab.from_tokenizer(tokenizer)


@pytest.mark.integration
def test_minilm_vocab(minilm):
    from labcore import assets

    tokenizer, vocab = minilm
    assert vocab.size == 30522 and vocab.name == "minilm"
    assert vocab.special_ids == frozenset({0, 100, 101, 102, 103})
    assert len(vocab.unused_ids) == 994 and vocab.tokens[vocab.unused_ids[993]] == "[unused993]"
    assert Vocab.from_file(assets.require("minilm") / "vocab.txt").fingerprint == vocab.fingerprint


@pytest.mark.integration
def test_minilm_shift_never_hits_a_special_id(minilm):
    _, vocab = minilm
    ids = np.array(build_mapping(MappingSpec("shift"), None, vocab).ids)
    special = sorted(vocab.special_ids)
    assert ids[special].tolist() == special
    others = np.setdiff1d(np.arange(vocab.size), special)
    assert not np.isin(ids[others], special).any()
    assert np.array_equal(np.sort(ids), np.arange(vocab.size))
    # Above the specials and below the wrap, it is Kao & Lee's T(i) = i + 1000 exactly.
    assert np.array_equal(ids[104:vocab.size - 1000], np.arange(104, vocab.size - 1000) + 1000)


@pytest.mark.integration
def test_minilm_shift_reproduces_kao_and_lee_example(minilm):
    # §2.1: "his healthy sense of satire is light and fun..." becomes
    # "canadian franzme 1988pia leader watch sports czech at at at".
    tokenizer, vocab = minilm
    mapping = build_mapping(MappingSpec("shift", k=1000), None, vocab)
    encoded = tokenizer("his healthy sense of satire is light and fun...")["input_ids"]
    shifted = mapping.apply(encoded)
    assert shifted[0] == tokenizer.cls_token_id and shifted[-1] == tokenizer.sep_token_id
    words = tokenizer.convert_ids_to_tokens(shifted[1:-1].tolist())
    assert " ".join(words).replace(" ##", "") == "canadian franzme 1988pia leader watch sports czech at at at"


@pytest.mark.integration
def test_minilm_unused_letters_random(minilm):
    _, vocab = minilm
    unused = build_mapping(MappingSpec("unused"), DNA, vocab)
    assert [t for _, _, t in unused.rows()] == ["[unused0]", "[unused1]", "[unused2]", "[unused3]"]
    letters = build_mapping(MappingSpec("letters"), DNA, vocab)
    assert [t for _, _, t in letters.rows()] == ["a", "c", "g", "t"]
    first = build_mapping(MappingSpec("random", seed=0), DNA, vocab)
    assert first.ids == build_mapping(MappingSpec("random", seed=0), DNA, vocab).ids
    assert first.ids != build_mapping(MappingSpec("random", seed=1), DNA, vocab).ids
    assert not set(first.ids) & vocab.special_ids
    text = build_mapping(MappingSpec("random", seed=0), None, vocab)
    assert np.array_equal(np.sort(text.array), np.arange(vocab.size))
    assert text.ids != build_mapping(MappingSpec("random", seed=1), None, vocab).ids


@pytest.mark.integration
def test_minilm_json_round_trip_and_keys_across_processes(minilm):
    _, vocab = minilm
    text = build_mapping(MappingSpec("shift"), None, vocab)
    assert TokenMapping.from_json(text.to_json()) == text
    # vocab.txt gives the same fingerprint as the tokenizer (test_minilm_vocab) and skips importing transformers.
    script = ("from labcore import assets\n"
              "from labcore.mapping import MappingSpec, Vocab, build_mapping\n"
              "v = Vocab.from_file(assets.require('minilm') / 'vocab.txt')\n"
              "print(build_mapping(MappingSpec('shift'), None, v).key)\n"
              "print(build_mapping(MappingSpec('shift', k=999), None, v).key)\n")
    env = dict(os.environ, PYTHONHASHSEED="7")
    keys = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          check=True).stdout.split()
    assert keys[0] == text.key
    assert keys[1] != text.key


@pytest.mark.integration
def test_antiberty_vocab_letters_and_no_unused(fetched_assets):
    from labcore import assets

    vocab = Vocab.from_file(assets.require("antiberty") / "vocab.txt", name="antiberty")
    assert vocab.size == 25 and vocab.special_ids == frozenset(range(5)) and vocab.unused_ids == ()
    residues = tuple("ACDEFGHIKLMNPQRSTVWY")
    assert build_mapping(MappingSpec("letters"), residues, vocab).ids == tuple(range(5, 25))
    message = errors(MappingSpec("unused"), residues, vocab)
    assert "'antiberty' has no [unusedN] tokens" in message and "'random'" in message
    message = errors(MappingSpec("letters"), residues + ("X", "B"), vocab)
    assert "spells 'X', 'B'" in message


def test_native_reads_symbols_as_the_models_tokenizer_does():
    vocab = Vocab(tokens=("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "A", "C", "D"),
                  special_ids=frozenset(range(5)), name="protein")
    mapping = build_mapping(MappingSpec(kind="native"), ("A", "C", "D", "-", "X"), vocab)
    assert mapping.tokens == ("A", "C", "D", "[UNK]", "[UNK]")  # unspelled symbols share the unknown token
    no_unknown = Vocab(tokens=("[PAD]", "A"), special_ids=frozenset({0}), name="tiny")
    with pytest.raises(MappingError, match="no unknown token"):
        build_mapping(MappingSpec(kind="native"), ("A", "-"), no_unknown)
    with pytest.raises(MappingError, match="not one-to-one"):  # letters still refuses to share
        build_mapping(MappingSpec(kind="table", table=(("A", 5), ("C", 5))), ("A", "C"), vocab)
