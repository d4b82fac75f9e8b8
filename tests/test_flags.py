"""Flags that would train on wrong input or crash are refused before any data or model loads, with the valid
range in the command line's own words; the resolved spec records the effective values."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from labcore.errors import LabError
from labcore.runspec import MIN_MAX_LENGTH, make_spec

# Each case: the flags, then words the error must hold. Every one is refused by `labcore.cli.main.main`.
REFUSED = [
    (["--max-length", "1"], ["--max-length", "0", f"at least {MIN_MAX_LENGTH}"]),
    (["--max-length", "2"], ["--max-length", f"at least {MIN_MAX_LENGTH}", "[CLS], [SEP]"]),
    (["--mapping", "table", "--mapping-table", "A=10"], ["--mapping-table", "'A=10'", "SYMBOL:ID,SYMBOL:ID"]),
    (["--mapping", "table", "--mapping-table", "A:x"], ["--mapping-table", "'A:x'", "SYMBOL:ID,SYMBOL:ID"]),
    (["--mapping", "shift", "--mapping-k", "1e30"], ["--mapping-k", "whole number from 0 to 2,147,483,647"]),
    (["--mapping", "shift", "--mapping-k", str(2**63 - 1)], ["--mapping-k", "from 0 to 2,147,483,647"]),
    (["--lr", "nan"], ["--lr", "finite"]),
    (["--lr", "inf"], ["--lr", "finite"]),
    (["--lr", "-1"], ["--lr", "positive"]),
    (["--protocol", "fulll"], ["unknown protocol 'fulll'", "valid names: full"]),
    (["--protocol", "probe", "--pparam", "layr=1"], ["protocol 'probe' has no parameter(s) layr"]),
]
# What only `tune` reads: ranges of number flags (LOW:HIGH[:log]) and lists, each value checked as a spec.
TUNE_REFUSED = [
    (["--lr", "1e-3:1e-5:log"], ["--lr", "'1e-3:1e-5:log'", "from a lower to a higher value"]),
    (["--lr", "0:1e-3:log"], ["--lr", "above 0 on a log scale"]),
    (["--lr", "1e-5:1e-3:ln"], ["--lr", "'1e-5:1e-3:ln' is not a range", "LOW:HIGH:log"]),
    (["--lr=-1:1e-3"], ["--lr", "positive"]),
    (["--warmup-ratio", "0,x"], ["--warmup-ratio", "'x' is not a valid value"]),
    (["--batch-size", "16,0", "--lr", "1e-5:1e-3:log"], ["--batch-size", "positive"]),
]

_PROBE = """
import contextlib, io, json, sys
from labcore.cli import main as cli
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    loaded = sorted(m for m in ("torch", "transformers", "datasets", "ray") if m in sys.modules)
    out.append({"rc": rc, "stderr": err.getvalue(), "loaded": loaded})
print(json.dumps(out))
"""


def test_bad_flags_are_refused_before_anything_loads():
    base = ["run", "--model", "tiny:bert", "--discipline", "bits-xor", "--precision", "fp32"]
    for sub, cases in ((["run"], REFUSED), (["sweep"], REFUSED), (["tune"], REFUSED + TUNE_REFUSED)):
        argvs = [sub + base[1:] + flags for flags, _ in cases]
        done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argvs)], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        for (flags, needles), result in zip(cases, json.loads(done.stdout)):
            assert result["rc"] == 2, (flags, result)
            assert result["stderr"].startswith("error: "), (flags, result)
            for needle in needles:
                assert needle in result["stderr"], (flags, needle, result["stderr"])
            # refused before any model or data library (or Ray) loads
            assert result["loaded"] == [], (flags, result)


def test_tune_flags_are_a_search_space_in_ray_tunes_words_around_a_fixed_spec():
    from labcore.cli.main import build_parser
    from labcore.cli.args import search_from_args

    args = build_parser().parse_args(["tune", "--model", "tiny:bert", "--discipline", "bits-xor", "--max-steps", "200",
                                      "--lr", "1e-5:1e-3:log", "--warmup-ratio", "0,0.06,0.1",
                                      "--weight-decay", "0:0.1", "--batch-size", "16,32"])
    base, searched = search_from_args(args)
    assert searched == {"lr": ("loguniform", 1e-5, 1e-3), "warmup_ratio": ("grid_search", (0.0, 0.06, 0.1)),
                        "weight_decay": ("uniform", 0.0, 0.1), "batch_size": ("grid_search", (16, 32))}
    assert (base.model, base.max_steps, base.lr, base.warmup_ratio) == ("tiny:bert", 200, None, None)
    # A model name holds a colon: only number flags read LOW:HIGH as a range.
    assert search_from_args(build_parser().parse_args(["tune", "--model", "tiny:bert"]))[1] == {}


@pytest.mark.parametrize("values,needle", [
    ({"max_length": 3}, f"max_length must be 0 (the discipline's own length) or at least {MIN_MAX_LENGTH}"),
    ({"max_length": -1}, "max_length must be a whole number from 0"),
    ({"mapping_k": 1e30}, "mapping_k must be a whole number from 0 to 2,147,483,647"),
    ({"mapping_k": 2**63 - 1}, "mapping_k must be a whole number from 0 to 2,147,483,647"),
    ({"mapping_k": -5}, "mapping_k must be a whole number"),
    ({"lr": float("nan")}, "lr must be a finite number"),
    ({"lr": float("inf")}, "lr must be a finite number"),
    ({"weight_decay": float("nan")}, "weight_decay must be a finite number"),
    ({"mapping": "table", "mapping_table": [("A", "x")]}, "write the table as SYMBOL:ID,SYMBOL:ID"),
    ({"mapping": "table", "mapping_table": [("A",)]}, "write the table as SYMBOL:ID,SYMBOL:ID"),
    ({"mapping": "table", "mapping_table": [("A", -3)]}, "vocabulary ids are counts from 0"),
])
def test_make_spec_refuses_out_of_range_values(values, needle):
    with pytest.raises(LabError) as raised:
        make_spec(**values)
    assert needle in str(raised.value)


def test_the_smallest_max_length_and_the_largest_shift_are_accepted():
    assert make_spec(max_length=MIN_MAX_LENGTH).max_length == MIN_MAX_LENGTH
    assert make_spec(mapping="shift", mapping_k=2**31 - 1).mapping_k == 2**31 - 1
    assert make_spec(mapping="table", mapping_table=[["A", 1012]]).mapping_table == (("A", 1012),)


def test_submit_refuses_an_unknown_protocol_and_queues_nothing(tmp_path):
    store = tmp_path / "store"
    argv = [["submit", "--store", str(store), "--model", "tiny:bert", "--discipline", "bits-xor",
             "--protocol", "fulll"]]
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    [result] = json.loads(done.stdout)
    assert result["rc"] == 2 and "unknown protocol 'fulll'" in result["stderr"] and result["loaded"] == []

    from labcore.store import Store

    opened = Store(store)
    try:
        assert opened.jobs() == []
    finally:
        opened.close()


def test_a_max_length_beyond_a_local_models_positions_keys_as_the_model_s_limit(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "roberta", "max_position_embeddings": 130,
                                                    "pad_token_id": 1}))
    code = f"""
import sys
from labcore.engine.resolve import resolve_spec
from labcore.runspec import make_spec
spec = dict(model="local:{folder}", discipline="bits-xor")
long = resolve_spec(make_spec(**spec, max_length=100000))
exact = resolve_spec(make_spec(**spec, max_length=128))
assert long.max_length == 128 and long.key == exact.key, (long.max_length,)
assert resolve_spec(long) == long  # resolving twice changes nothing
assert resolve_spec(make_spec(**spec, max_length=100)).max_length == 100
assert resolve_spec(make_spec(**spec)).max_length == 0  # the discipline's own length stays 0
assert "torch" not in sys.modules
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_positions_are_read_from_config_json_as_the_loaded_model_states_them():
    from labcore.models.backbones import positions_of

    assert positions_of({"model_type": "bert", "max_position_embeddings": 512}) == 512
    assert positions_of({"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1}) == 512
    assert positions_of({"model_type": "gpt2", "n_positions": 1024}) == 1024
    assert positions_of({"model_type": "llama", "max_position_embeddings": 8192}) is None
    assert positions_of({"model_type": "other"}) is None
