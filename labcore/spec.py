"""The old name of :mod:`labcore.runspec`, kept working until 2027-03-01 and then removed.

The package was ``labcore/spec/``: test runners and editors that take a folder named ``spec/`` for a test suite
(RSpec's convention) hid the lab's most central type from their users. Code that still imports
``labcore.spec``, ``labcore.spec.budgets`` or ``labcore.spec.resolved`` gets the same objects, with a
DeprecationWarning that names the new import.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import Any

from labcore import runspec as _runspec

warnings.warn("labcore.spec is now labcore.runspec (the old name goes on 2027-03-01): import from "
              "labcore.runspec instead", DeprecationWarning, stacklevel=2)

# The submodules under their old names: ``import labcore.spec.resolved`` finds them here once this module runs.
for _part in ("budgets", "resolved"):
    sys.modules[f"{__name__}.{_part}"] = importlib.import_module(f"labcore.runspec.{_part}")


def __getattr__(name: str) -> Any:
    return getattr(_runspec, name)


def __dir__() -> list[str]:
    return dir(_runspec)
