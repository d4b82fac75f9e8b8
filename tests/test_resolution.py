"""A spec is resolved once, at submission, and its key is the one it always had.

The keys below were computed before the resolution was made one function; a change that moves any of them
would make every finished run with that spec run again (and its record unreachable under its old key).
"""

from __future__ import annotations

import pytest

from labcore import jobs
from labcore.machine import device as devices
from labcore.spec import make_spec

PINNED = [  # (device the budget is resolved for, the spec's fields, its key)
    ("cpu", {}, "d1afca60d5aca6694d37"),
    ("cpu", {"discipline": "dna-splice", "seed": 3}, "4c47ba65310b82c53601"),
    ("cpu", {"discipline": "text-sentiment"}, "86b6e3ecf594014f612b"),
    ("cpu", {"discipline": "text-sentiment", "budget": "standard"}, "7eb03805200b0f9ab658"),
    ("cuda", {"discipline": "text-sentiment", "budget": "standard"}, "e6db8cf0b2d9a29a299f"),
    ("cpu", {"discipline": "bits-xor", "mapping_seed": 4}, "7ad779e1267a5a86640d"),
    ("cpu", {"model": "tiny:bert", "discipline": "listops", "lr": 1e-3, "max_steps": 20, "max_length": 64},
     "fcc8965474fb03ea3c67"),
    ("cpu", {"discipline": "dna-splice", "protocol": "frozen", "budget": "paper"}, "7253ca53ea212e178029"),
    ("cpu", {"discipline": "protein-amp", "protocol": "reinit_after", "protocol_params": {"k": 2}, "budget": "paper"},
     "4b2223661688878d3035"),
    ("cpu", {"discipline": "dna-splice", "budget": "standard", "mapping": "shift", "mapping_k": 7, "epochs": 3},
     "2f0e08caf42a42a3d714"),
    ("cuda", {"discipline": "dna-splice", "budget": "standard", "mapping": "shift", "mapping_k": 7, "epochs": 3},
     "3576094cb0ca9244f362"),
    ("cpu", {"discipline": "dna-splice", "mapping": "table",
             "mapping_table": [["A", 1012], ["C", 1013], ["G", 1014], ["T", 1015]]}, "aec4df3604a2f27fb60f"),
    ("cuda", {"discipline": "image-digits", "protocol": "output_only", "deterministic": True, "train_size": "1%"},
     "83a6cb8e1dcccd8c98b2"),
]


@pytest.mark.parametrize("device,fields,key", PINNED)
def test_keys_stay_what_they_were(monkeypatch, device, fields, key):
    monkeypatch.setattr(devices, "budget_device", lambda: device)
    assert jobs.new_job(make_spec(**fields)).key == key
