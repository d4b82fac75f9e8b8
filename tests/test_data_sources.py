"""The disciplines built from fetched files: sizes, classes, disjoint splits, and the splice GT/AG check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from labcore import data

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parent.parent


def _disjoint(dataset, column):
    seen = {}
    for split in dataset:
        values = dataset[split][column]
        keys = {tuple(v) if isinstance(v, list) else v for v in values}
        for other, other_keys in seen.items():
            assert not keys & other_keys, f"{split} and {other} share {column} values"
        seen[split] = keys


def test_dna_splice_sizes_classes_and_junction_motifs(fetched_assets):
    dataset, info = data.load("dna-splice")
    sizes = {s: len(dataset[s]) for s in dataset}
    assert sum(sizes.values()) == 3186 and sizes == {"train": 2868, "validation": 159, "test": 159}
    counts = {name: 0 for name in info.class_names}
    gt = ag = 0
    for split in dataset:
        for tokens, label in zip(dataset[split]["tokens"], dataset[split]["label"]):
            assert len(tokens) == 60
            seq = "".join(info.alphabet[t] for t in tokens)
            name = info.class_names[label]
            counts[name] += 1
            gt += name == "EI" and seq[30:32] == "GT"  # positions 31-32: the donor's GT
            ag += name == "IE" and seq[28:30] == "AG"  # positions 29-30: the acceptor's AG
    assert counts == {"EI": 767, "IE": 765, "N": 1654}
    assert gt == 759 and ag == 761


def test_splits_of_a_seeded_source_are_stable(fetched_assets):
    a, _ = data.load("dna-splice")
    b, _ = data.load("dna-splice", {"seed": 1})
    assert a["test"]["tokens"] != b["test"]["tokens"]
    again, _ = data.load("dna-splice")
    assert again["test"]["tokens"] == a["test"]["tokens"]


def test_protein_malonylation(fetched_assets):
    dataset, info = data.load("protein-malonylation")
    sizes = {s: len(dataset[s]) for s in dataset}
    assert sum(sizes.values()) == 10576 and sizes["test"] == 2092
    assert all(len(t) == 31 for s in dataset for t in dataset[s]["tokens"])
    labels = [y for s in dataset for y in dataset[s]["label"]]
    assert labels.count(0) == labels.count(1) == 5288
    centre = {info.alphabet[t[15]] for t in dataset["train"]["tokens"]}
    assert centre == {"K"}  # every window is centred on the lysine in question


def test_protein_amp(fetched_assets):
    dataset, info = data.load("protein-amp")
    assert sum(len(dataset[s]) for s in dataset) == 5200
    lengths = [len(t) for s in dataset for t in dataset[s]["tokens"]]
    assert min(lengths) == 7 and max(lengths) == 174
    labels = [y for s in dataset for y in dataset[s]["label"]]
    assert labels.count(1) == labels.count(0) == 2600


def test_text_sentiment_split_by_movie(fetched_assets):
    dataset, info = data.load("text-sentiment")
    assert sum(len(dataset[s]) for s in dataset) == 12808
    assert info.input_kind == "text" and info.class_names == ("rotten", "fresh")
    _disjoint(dataset, "group")


def test_data_list_shows_every_discipline_available(fetched_assets):
    out = subprocess.run([sys.executable, "-m", "labcore", "data", "list"], cwd=REPO, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    for name in ("dna-splice", "protein-malonylation", "protein-amp", "music-composer", "bits-xor",
                 "bits-memory", "listops", "image-mnist", "image-digits", "text-sentiment"):
        line = next(line for line in out.stdout.splitlines() if line.startswith(name + " "))
        assert "available" in line and "unavailable" not in line, line


def test_data_show_dna_splice(fetched_assets):
    out = subprocess.run([sys.executable, "-m", "labcore", "data", "show", "dna-splice"], cwd=REPO,
                         capture_output=True, text=True, timeout=300, check=True).stdout
    assert "3,186 sequences" in out and "EI 767 / IE 765 / N 1,654" in out
    assert "min 60, mean 60.0, max 60" in out and out.count("e.g.") == 3


def test_data_list_builds_nothing_and_says_what_is_not_built(tmp_path, fetched_assets):
    # A fresh cache with the fetched assets only: the listing reads, it never builds (the music corpus alone
    # would parse for minutes).
    from labcore import paths

    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "assets").symlink_to(paths.cache_dir() / "assets")
    out = subprocess.run([sys.executable, "-m", "labcore", "data", "list"], cwd=REPO, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "TRANSFERLAB_CACHE": str(cache)})
    assert out.returncode == 0, out.stderr[-2000:]
    for name in ("dna-splice", "music-composer", "bits-xor", "listops", "text-sentiment"):
        line = next(line for line in out.stdout.splitlines() if line.startswith(name + " "))
        assert f"available  not built yet: `python -m labcore data show {name}` builds it" in line, line
    assert not any((cache / "datasets").glob("*/*"))
