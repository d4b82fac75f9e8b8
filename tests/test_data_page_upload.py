"""The Data page's upload tab: the caps it states, and a save checked in a subprocess while it polls."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from labcore.data import upload

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TIMEOUT = 120  # seconds a single page run may take on a busy 2-core machine (a guard, not a measurement)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def data_page(**state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    for key, value in state.items():
        at.session_state[key] = value
    return at.switch_page("pages/data.py").run()


def shown(at: AppTest) -> str:
    parts = [e.value for e in at.error] + [i.value for i in at.info] + [s.value for s in at.success]
    return "\n".join(str(p) for p in parts + [c.value for c in at.caption])


def rows(n_classes: int, per_class: int) -> bytes:
    lines = ["sequence,label"] + [f"ACGT{'T' * (i % 5)},c{i % n_classes}" for i in range(n_classes * per_class)]
    return ("\n".join(lines) + "\n").encode()


def test_the_page_states_the_caps():
    at = data_page()
    assert not at.exception, [e.message for e in at.exception]
    text = shown(at)
    limits = upload.UploadLimits()
    assert f"at most {limits.max_bytes // 2**20} MB" in text and f"{limits.max_rows:,} examples" in text
    assert f"{limits.max_classes} classes" in text and f"{limits.max_total_symbols:,} symbols in all" in text
    assert f"at least {limits.min_per_class} examples" in text


def test_the_page_polls_a_save_running_in_a_subprocess():
    job = upload.start_save("page", "genes.csv", rows(2, 10))
    at = data_page(**{"upload.job": job})
    assert not at.exception, [e.message for e in at.exception]
    job.wait()
    at.run()
    assert "Saved as discipline **upload:page**: 20 examples, 2 classes" in shown(at)
    assert "`upload:page`" in "\n".join(m.value for m in at.markdown)

    job = upload.start_save("page", "tiny.csv", rows(12, 1))
    at = data_page(**{"upload.job": job})
    job.wait()
    at.run()
    assert "The upload was not saved" in shown(at) and "12 of 12 classes have fewer than 6" in shown(at)


def test_a_name_already_saved_asks_before_it_is_replaced():
    upload.save_upload("genes", "genes.csv", rows(2, 10))
    at = data_page()
    at.text_input(key="w:upload.name").set_value("genes").run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("Replace the saved upload **upload:genes**" in c.label for c in at.checkbox)
    at.text_input(key="w:upload.name").set_value("other").run()
    assert not any("Replace the saved upload" in c.label for c in at.checkbox)


def test_a_save_with_a_suspicious_label_is_not_shown_as_plain_success():
    data = "".join(f">s{i}|{i % 2}|{('training', 'testing')[i % 2]}\nACGT\n" for i in range(24)).encode()
    job = upload.start_save("bars", "t.fasta", data + b">z|0|training\nAC\n>y|1|testing\nAC\n")
    job.wait()
    at = data_page(**{"upload.job": job})
    at.run()
    assert not at.success
    assert any("split names, not classes" in w.value for w in at.warning)
