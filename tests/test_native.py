"""C kernels built on this machine: once per source, compiler and CPU, into the lab cache, with a clear reason
where they cannot be built (the caller then keeps torch's own kernels)."""

from __future__ import annotations

import ctypes

import pytest

from labcore.errors import LabError
from labcore.machine import native

SOURCE = """
#include <stdint.h>
int64_t lab_twice(int64_t x) { return 2 * x; }
"""


@pytest.fixture
def source(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "twice.c"
    path.write_text(SOURCE)
    return path


def test_a_source_is_built_once_and_loads(source):
    built = native.build(source)
    assert built.parent.name == "native" and built.name.startswith("twice-")
    stamp = built.stat().st_mtime_ns
    assert native.build(source) == built and built.stat().st_mtime_ns == stamp  # found, not built again
    library = ctypes.CDLL(str(built))
    library.lab_twice.restype = ctypes.c_int64
    library.lab_twice.argtypes = [ctypes.c_int64]
    assert library.lab_twice(21) == 42
    assert [p.name for p in built.parent.iterdir()] == [built.name]  # no temporary file left beside it
    source.write_text(SOURCE + "\n/* changed */\n")
    assert native.build(source) != built  # a changed source is a new build


def test_no_compiler_and_a_failed_build_say_why(source, monkeypatch):
    monkeypatch.setenv("CC", str(source.parent / "no-such-cc"))
    with pytest.raises(native.NativeUnavailable, match="does not run"):
        native.build(source)
    monkeypatch.delenv("CC")
    source.write_text("this is not C\n")
    with pytest.raises(native.NativeUnavailable, match="did not build"):
        native.build(source)
    assert not list((source.parent / "cache" / "native").iterdir())  # nothing half-written kept


def test_the_setting_turns_native_kernels_off_and_checks_its_value(source, monkeypatch):
    monkeypatch.setenv(native.NATIVE_SETTING, "0")
    with pytest.raises(native.NativeUnavailable, match="TRANSFERLAB_NATIVE=0"):
        native.load(source)
    monkeypatch.setenv(native.NATIVE_SETTING, "yes")
    with pytest.raises(LabError, match="set it to 0"):
        native.load(source)
    monkeypatch.setenv(native.NATIVE_SETTING, "1")
    assert native.load(source).lab_twice(4) == 8
