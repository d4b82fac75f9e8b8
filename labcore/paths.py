"""Where the lab keeps its files.

Two roots and one file, each movable with one environment variable:

* ``TRANSFERLAB_CACHE`` (default ``<repo>/cache``): extracted assets, built data sets, the run store.
  Tests point it elsewhere so they never touch a user's runs.
* ``TRANSFERLAB_DOWNLOADS`` (default ``$XDG_CACHE_HOME/transferlab/downloads``, else
  ``~/.cache/transferlab/downloads``): the package files fetched from PyPI and Debian. It lives outside
  the checkout, like pip's and the hub libraries' caches, so a fresh clone extracts instead of downloading.
* ``TRANSFERLAB_DEVICE_RATES`` (default ``device-rates.json`` beside the downloads): the measured
  matrix-product rates of this machine's devices (:mod:`labcore.machine.rates`). They are facts of the
  machine, not of a lab: every cache on it reads the same figures, measured once, instead of each new cache
  spending its first runs' seconds on measuring them again.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def env_switch(name: str, default: bool, meaning: str) -> bool:
    """A switch from the environment variable ``name``: 1 on, 0 off, unset ``default``; a clear error otherwise.

    ``meaning`` completes "set it to …" in the message (what each value does, and which is the default).
    """
    from labcore.errors import LabError

    text = os.environ.get(name, "").strip()
    if text not in ("", "0", "1"):
        raise LabError(f"{name}={text!r}: set it to {meaning}")
    return default if text == "" else text == "1"


def env_number(name: str, default: float, meaning: str) -> float:
    """A number from the environment variable ``name`` (``default`` when unset); a clear error otherwise.

    ``meaning`` completes "set it to …" in the message (what the number is, and its default).
    """
    from labcore.errors import LabError

    text = os.environ.get(name, "")
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        raise LabError(f"{name}={text!r} is not a number; set it to {meaning}") from None


def cache_dir() -> Path:
    return Path(os.environ.get("TRANSFERLAB_CACHE") or REPO_ROOT / "cache").expanduser()


def _user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "transferlab"


def downloads_dir() -> Path:
    explicit = os.environ.get("TRANSFERLAB_DOWNLOADS")
    return Path(explicit).expanduser() if explicit else _user_cache_dir() / "downloads"


def device_rates_path() -> Path:
    explicit = os.environ.get("TRANSFERLAB_DEVICE_RATES")
    return Path(explicit).expanduser() if explicit else _user_cache_dir() / "device-rates.json"


def assets_dir() -> Path:
    return cache_dir() / "assets"


def datasets_dir() -> Path:
    return cache_dir() / "datasets"
