"""Small C kernels, built on this machine with its C compiler, kept per machine, loaded with ctypes.

A kernel's source lives beside the Python that calls it (``labcore/models/cpu_dropout.c``). :func:`load` builds
it once with ``$CC`` (else ``cc``) at ``-O3 -march=native -fopenmp`` into the lab cache (``native/``), under a
name that hashes the source, the flags, the compiler's version and the CPU's model and flags, so a changed
source, compiler or CPU builds anew and a cache shared by two machines never hands one the other's code. A
build is written to a temporary file and renamed into place: workers that start together each get a whole
library.

Where no compiler is found, the build fails, or ``TRANSFERLAB_NATIVE=0``, :func:`load` raises
:class:`NativeUnavailable` with the reason, and the caller keeps its pure-torch path: a native kernel only ever
makes a step faster, never makes a run possible.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from labcore import paths
from labcore.machine.hardware import cpu_flags, describe

NATIVE_SETTING = "TRANSFERLAB_NATIVE"
FLAGS = ("-O3", "-march=native", "-fopenmp", "-std=c11", "-shared", "-fPIC")
BUILD_TIMEOUT_S = 120


class NativeUnavailable(RuntimeError):
    """No native build here; the message says why (for the run's record)."""


def native_enabled() -> bool:
    """``TRANSFERLAB_NATIVE=0`` keeps every step on torch's own kernels; unset or 1 uses native ones."""
    return paths.env_switch(NATIVE_SETTING, True, "0 to train with torch's kernels only, or 1 (the default) to "
                                                  "build the lab's C kernels with this machine's compiler")


def compiler() -> str | None:
    """The C compiler: ``$CC`` where set, else ``cc`` on the PATH."""
    return os.environ.get("CC") or shutil.which("cc")


def _version(cc: str) -> str:
    try:
        done = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NativeUnavailable(f"the C compiler {cc!r} does not run ({exc})") from None
    if done.returncode != 0:
        raise NativeUnavailable(f"the C compiler {cc!r} does not run ({done.stderr.strip()[:200]})")
    return done.stdout.splitlines()[0] if done.stdout else cc


def library_path(source: Path, cc: str, version: str) -> Path:
    """Where the build of ``source`` for this compiler and CPU lives."""
    key = hashlib.sha256()
    for part in (source.read_bytes(), " ".join(FLAGS).encode(), cc.encode(), version.encode(),
                 describe("cpu").encode(), " ".join(sorted(cpu_flags())).encode()):
        key.update(part)
        key.update(b"\0")
    return paths.cache_dir() / "native" / f"{source.stem}-{key.hexdigest()[:16]}.so"


def build(source: Path) -> Path:
    """``source`` built for this machine (once; later calls find the file). Raises :class:`NativeUnavailable`."""
    cc = compiler()
    if cc is None:
        raise NativeUnavailable("no C compiler (install gcc, or set CC)")
    version = _version(cc)
    target = library_path(source, cc, version)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}-", suffix=".so")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        done = subprocess.run([cc, *FLAGS, str(source), "-o", str(tmp)], capture_output=True, text=True,
                              timeout=BUILD_TIMEOUT_S)
        if done.returncode != 0:
            raise NativeUnavailable(f"{source.name} did not build with {version} "
                                    f"({done.stderr.strip().splitlines()[-1:] or ['no message']})")
        os.replace(tmp, target)
    except subprocess.TimeoutExpired:
        raise NativeUnavailable(f"{source.name} took over {BUILD_TIMEOUT_S} s to build") from None
    finally:
        tmp.unlink(missing_ok=True)
    return target


def load(source: Path) -> ctypes.CDLL:
    """The library built from ``source``, loaded once per process. Raises :class:`NativeUnavailable`, whose
    reason is also found once per process (a missing compiler is not looked for again at every call)."""
    if not native_enabled():
        raise NativeUnavailable(f"{NATIVE_SETTING}=0")
    library, reason = _load(source)
    if library is None:
        raise NativeUnavailable(reason)
    return library


@functools.cache
def _load(source: Path) -> tuple[ctypes.CDLL | None, str]:
    # torch first: the library's OpenMP runtime then resolves to the one torch already has loaded.
    importlib.import_module("torch")

    try:
        path = build(source)
        return ctypes.CDLL(str(path)), ""
    except NativeUnavailable as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"{source.stem} did not load ({exc})"


def takes(x, dtypes: tuple) -> bool:
    """Whether a C kernel can take the tensor ``x``: on the CPU, of one of ``dtypes``, and outside torch.compile
    (which makes its own kernels) and torch.func's transforms (vmap cannot look inside a C call)."""
    import torch

    return x.device.type == "cpu" and x.dtype in dtypes and not torch.compiler.is_compiling() and \
        not torch._C._are_functorch_transforms_active()
