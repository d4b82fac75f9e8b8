"""What the store refuses, and why (each a LabError: the CLI and the pages show the message, not a traceback)."""

from labcore.errors import LabError

REPAIR_HINT = "python -m labcore store repair"


class StoreDamaged(LabError):
    """The store's database cannot be read; the message names the repair command."""


class UnsafeValue(StoreDamaged):
    """A pickled value in the store: refused, since reading it could run code."""


class Fenced(LabError):
    """A write by an attempt that no longer holds its job (it was resumed elsewhere after a stall)."""


class StoreLocked(LabError):
    """SQLite's write lock stayed held past the store's wait (a lab process suspended while writing)."""
