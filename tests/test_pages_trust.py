"""What the pages say about data they cannot be trusted on: inputs longer than the model's positions,
test sets too small to measure (issue 13). A tiny BERT saved on disk and small uploads the tests write."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from labcore.data import upload
from test_data_page_upload import APP, TIMEOUT, own_cache  # noqa: F401 - own_cache: an empty cache per test


@pytest.fixture
def tiny_bert(tmp_path):
    from test_pages import save_tiny_bert

    return save_tiny_bert(tmp_path / "tiny-bert")  # 128 positions


def page(path: str) -> AppTest:
    return AppTest.from_file(APP, default_timeout=TIMEOUT).run().switch_page(path).run()


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [e.value for e in at.error] + [w.value for w in at.warning]
    return "\n".join(str(p) for p in parts + [c.value for c in at.caption])


def long_fasta(n=12, length=300):
    return "".join(f">r{i}|{'ab'[i % 2]}\n{('ACGT' if i % 2 else 'TTGA') * (length // 4)}\n" for i in range(n)).encode()


def test_new_experiment_states_the_position_limit_where_inputs_are_longer(tiny_bert):
    upload.save_upload("long", "l.fasta", long_fasta(), max_length=300, windows=False)
    at = page("pages/new_experiment.py")
    at.selectbox(key="w:exp.discipline").select("upload:long").run()
    at.text_input(key="exp.adv.model").input(f"local:{tiny_bert}").run()
    assert not at.exception, [e.message for e in at.exception]
    shown = texts(at)
    assert f"local:{tiny_bert} takes 128 positions (with [CLS] and [SEP])" in shown
    assert "The longest example has 300 symbols" in shown and "cut to 126 symbols" in shown
    assert "'cut into windows'" in shown
