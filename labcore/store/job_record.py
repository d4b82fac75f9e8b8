"""A job's record as the store's reading API gives it: one typed field per key a record holds.

The table stores plain dicts (the JSON on disk never changes); :meth:`JobRecord.from_dict` reads one and
:meth:`JobRecord.to_dict` gives back exactly that dict: the same keys in the same order, an absent key still
absent (a field's default only stands in for it when read), and keys this version does not know (an older
or newer store's) kept in ``extra``.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from labcore.store.settings import ACTIVE, FINISHED, STOPPED

# Stores of format 1 knew one kind of job, the training run, and their records name no kind and no checkpoint
# (the upgrade adds both, a record rebuilt from an old job folder may still lack them). Such a record is read
# as a run's: the one place the store names a kind, as data of old stores, never as a default of new jobs.
LEGACY_KIND = "run"
LEGACY_CHECKPOINT = "resume.pt"  # the file a format-1 run's training loop resumed from


def stored_kind(record: dict[str, Any]) -> str:
    """The kind of job a stored record is (an old store's record without one: a run)."""
    return record.get("kind", LEGACY_KIND)


@dataclass(frozen=True)
class JobRecord:
    """One job: what it is (kind, spec, label), where it stands (status, attempt, times, error, result) and
    who asked for it (``started_by``, ``requesters``, ``cancelled_by``, ``history``)."""

    key: str
    kind: str = LEGACY_KIND  # read for a record that names none (see LEGACY_KIND)
    spec: dict[str, Any] = field(default_factory=dict)  # the resolved spec as JSON-able values
    label: str = ""
    status: str = ""
    requires: list[str] = field(default_factory=list)  # keys of the jobs whose results are its inputs
    checkpoint: str = ""  # the file in its folder a resumed attempt continues from ("": none)
    priority: str = "interactive"
    attempt: int = 0  # the fencing token: each claim increments it
    resume: bool = False  # the next attempt continues from the checkpoint
    pid: int | None = None
    host: str | None = None
    submitted_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    error: str = ""
    result: dict[str, Any] | None = None  # the engine's result (labcore.results.record.RunRecord as a dict)
    groups: list[str] = field(default_factory=list)  # sweeps, demos and recipes it belongs to
    resources: dict[str, float] = field(default_factory=dict)  # what a cluster node must offer
    started_by: str = ""  # "" : the command line
    requesters: list[str] = field(default_factory=list)  # who still waits for it (a withdraw removes one)
    history: list[dict[str, Any]] = field(default_factory=list)  # {t, who, did}, the newest last
    cancelled_by: str | None = None
    node: str | None = None  # where its attempt runs (a cluster node, or this host)
    node_id: str | None = None
    task_pid: int | None = None
    cancel_requested: bool = False  # a cancel waits for the running attempt's next step
    traceback: str = ""
    # keys this version does not know, kept so that to_dict gives back what was stored
    extra: dict[str, Any] = field(default_factory=dict)
    # the stored dict's keys in their order (None: built here, every field is written)
    stored_keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> "JobRecord":
        # Filled in directly, not through __init__: a page lists 10,000 records, and the generated __init__
        # of 30 fields took 30-40 us a record, five times this.
        if "key" not in record:
            raise ValueError(f"a job record needs its key; this one has {sorted(record)}")
        values = dict(_DEFAULTS)
        for name, make in _FACTORIES.items():
            if name not in record:
                values[name] = make()  # each record its own list or dict
        extra = {}
        for name, value in record.items():
            if name in _FIELD_SET:
                values[name] = value
            else:
                extra[name] = value
        values.update(extra=extra, stored_keys=tuple(record))
        self = object.__new__(cls)
        self.__dict__.update(values)
        return self

    def to_dict(self) -> dict[str, Any]:
        """The record as the table stores it (and as ``--json``, the API and archives show it)."""
        names = self.stored_keys if self.stored_keys is not None else (*_FIELDS, *self.extra)
        return {k: getattr(self, k) if k in _FIELD_SET else self.extra[k] for k in names}

    def holds(self, name: str) -> bool:
        """Whether the stored dict has the key ``name`` (a field's default stands in for one it lacks)."""
        return name in self.stored_keys if self.stored_keys is not None else name in _FIELD_SET or name in self.extra

    def label_or(self, default: str) -> str:
        """Its label, or ``default`` where its record has none (a stored "" is a label)."""
        return self.label if self.holds("label") else default

    @property
    def active(self) -> bool:
        """Queued or running: someone will still work on it."""
        return self.status in ACTIVE

    @property
    def finished(self) -> bool:
        """Done or diverged: it has its final result."""
        return self.status in FINISHED

    @property
    def stopped(self) -> bool:
        """Cancelled, interrupted or dead: it can be resumed."""
        return self.status in STOPPED


# the stored keys a field holds (extra and stored_keys are not stored keys)
_FIELDS = tuple(f.name for f in fields(JobRecord) if f.name not in ("extra", "stored_keys"))
_FIELD_SET = frozenset(_FIELDS)
_DEFAULTS = {f.name: f.default for f in fields(JobRecord) if f.default is not MISSING}
_FACTORIES = {f.name: f.default_factory for f in fields(JobRecord) if f.name in _FIELD_SET and
              f.default_factory is not MISSING}


def job_record(record: dict[str, Any] | None) -> JobRecord | None:
    """A stored dict as a JobRecord (None stays None)."""
    return None if record is None else JobRecord.from_dict(record)
