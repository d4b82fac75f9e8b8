"""Deleting jobs: runs by key, a group (a sweep, a demo) or a recipe's jobs, with what depends on them named first.

Deleting is two calls, so a person sees what goes before anything does: :func:`plan_delete` reads the store and
returns a :class:`DeletePlan` (the jobs that go, the bytes their folders hold, the running ones it will cancel,
and every job that stays but needs one that goes: a run whose body is ``run:KEY``, an analysis or attention
maps of that run, a group or a recipe that lists it). :func:`delete` carries the plan out only if the store
still matches it, so nothing that was not shown is lost: a job that gained a dependent meanwhile is refused.

A deleted job's record, events, heartbeat and folder go, and every index and group entry naming it; its key
can run again. Nothing of another job is touched: a dependent keeps its own record and result (they were
computed while its input existed), and a job of a deleted group that another group also lists stays.
A queued job that needs one that goes would fail when it starts: it blocks the deletion until it is
cancelled or deleted too.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from typing import Any, Iterable

from labcore.errors import LabError
from labcore.store.job_record import stored_kind
from labcore.store.selection import Selection
from labcore.store.settings import ACTIVE
from labcore.store.usage import folder_bytes


@dataclass(frozen=True)
class Dependent:
    """A job that stays and needs one that goes (``needs``), or a group that loses one (``key`` empty)."""

    key: str
    kind: str
    label: str
    status: str
    needs: str

    def describe(self) -> str:
        if not self.key:
            return f"group {self.label!r} loses job {self.needs[:12]} (its report or table will miss it)"
        return f"{self.kind} {self.key[:12]} ({self.status}) {self.label} needs {self.needs[:12]}"


@dataclass(frozen=True)
class DeletePlan:
    selection: Selection
    keys: tuple[str, ...]  # the jobs that go, in submission order
    groups: tuple[str, ...]  # the groups that go whole
    kept: tuple[tuple[str, str], ...]  # (key, other group): a deleted group's job that another group lists
    dependents: tuple[Dependent, ...]
    running: tuple[str, ...]  # cancelled (and waited for) before anything goes
    bytes: int  # what the jobs' folders hold

    @property
    def blocking(self) -> tuple[Dependent, ...]:
        """Dependents still waiting to run: they would fail for want of their input."""
        return tuple(d for d in self.dependents if d.key and d.status in ACTIVE)

    def lines(self) -> list[str]:
        """The plan in words, for the CLI and the Runs page."""
        out = [f"delete {len(self.keys)} job(s) ({self.bytes / 2**20:,.1f} MiB of files)"
               + (f" and group(s) {', '.join(self.groups)}" if self.groups else "")]
        out += [f"  cancel first: {k[:12]} (running)" for k in self.running]
        out += [f"  keep {k[:12]}: group {g!r} also lists it" for k, g in self.kept]
        out += [f"  depends on it: {d.describe()}" for d in self.dependents]
        return out


def plan_delete(store: Any, selection: Selection) -> DeletePlan:
    """What deleting ``selection`` would do; reads only. Unknown keys, groups and recipes are refused by name."""
    if selection.empty:
        raise LabError("nothing to delete: name job keys, --group NAME, --recipe NAME or --all")
    keys = selection.keys_in(store)
    listed = {name: store.group(name)["keys"] for name in selection.groups_in(store)}
    others = {name: set(store.group(name)["keys"]) for name in store.groups() if name not in listed}
    going = set(keys)  # sets throughout: a group of 10,000 jobs is deleted as easily as one
    kept: dict[str, str] = {}  # key -> the other group that keeps it
    for members in listed.values():
        for key in members:
            if key in going or key in kept:
                continue
            also = next((g for g, ks in others.items() if key in ks), None)
            if also is None:
                going.add(key)
            else:
                kept[key] = also
    order = [k for k in store.table.keys() if k in going]  # submission order, each once
    records = {k: store.get(k) for k in order}
    dependents = [Dependent(r["key"], stored_kind(r), r.get("label", ""), r["status"], need)
                  for r in (store.table.get(k) for k in store.table.keys())
                  if r is not None and r["key"] not in going
                  for need in (r.get("requires") or []) if need in going]
    dependents += [Dependent("", "group", name, "", key) for name, ks in others.items()
                   for key in order if key in ks]
    return DeletePlan(
        selection=selection, keys=tuple(order), groups=tuple(listed),
        kept=tuple(kept.items()), dependents=tuple(dependents),
        running=tuple(k for k, r in records.items() if r and r.status == "running"),
        bytes=sum(folder_bytes(store.workdir(k)) for k in order))


def delete(store: Any, plan: DeletePlan, *, who: str | None = None, wait_s: float | None = None) -> DeletePlan:
    """Carry out a plan the person confirmed: cancel its running jobs and wait for them to stop, then delete.

    Refused, with nothing deleted, when the store no longer matches the plan (a new dependent, a new job in
    the group) or a dependent still waits to run. Returns the plan carried out."""
    now = plan_delete(store, plan.selection)
    if (now.keys, now.dependents, now.groups) != (plan.keys, plan.dependents, plan.groups):
        raise LabError("the store changed since this deletion was shown (jobs or what depends on them); nothing "
                       "was deleted: look at it again and confirm what it shows now")
    if now.blocking:
        raise LabError("nothing was deleted: " + "; ".join(d.describe() for d in now.blocking)
                       + " and would fail without it; cancel or delete those first (or include them)")
    wait_s = store.settings.stop_timeout_s if wait_s is None else wait_s
    for key in now.running:
        store.cancel(key, who)
    deadline = time.time() + wait_s
    while any((r := store.get(k)) is not None and r.status == "running" for k in now.running):
        if time.time() >= deadline:
            raise LabError(f"asked {len(now.running)} running job(s) to stop and they are still running after "
                           f"{wait_s:g} s (a checkpoint being written?); nothing was deleted: ask again once the "
                           f"Runs page shows them cancelled")
        time.sleep(0.1)
    with store.transaction():
        for key in now.keys:
            store.streams.drop(key)
            for entry in (f"hb/{key}", f"cancel/{key}"):
                store.cache.delete(entry)
        store.table.drop(now.keys)
        for name in now.groups:
            store.table.drop_group(name)
    # The folders after the records: a folder left by a crash in between holds only files nobody lists.
    for key in now.keys:
        shutil.rmtree(store.workdir(key), ignore_errors=True)
    return now


def delete_selected(store: Any, keys: Iterable[str] = (), *, group: str = "", recipe: str = "",
                    who: str | None = None) -> DeletePlan:
    """Plan and delete at once (scripts and tests that already know what goes; people get the plan first)."""
    return delete(store, plan_delete(store, Selection(tuple(keys), group, recipe)), who=who)
