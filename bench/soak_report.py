"""The end of a soak: drain the work, stop every process, check the store and account for every job; print
the figures (what ``bench/soak.py`` promises) and say whether anything was lost."""

from __future__ import annotations

import time
from typing import Any

DRAIN_S = 600.0  # how long the work may take to finish once the requesters stop
CANCEL_NOTE = "the soak ended before it ran"


def _drain(soak: Any) -> None:
    """Let the queued and running jobs finish (resuming what a last kill left dead), for at most DRAIN_S."""
    store, lab = soak.store, soak.lab
    deadline = time.time() + DRAIN_S
    while time.time() < deadline:
        lab.keep_up()
        lab.sample_memory()
        active = 0
        for record in store.jobs():
            if record.status in ("dead", "interrupted") and record.started_by.startswith("requester-"):
                answer = store.resume(record.key, record.started_by)
                soak.log.write(who="soak", action="resume", key=record.key, answer=answer.outcome)
                active += 1
            elif record.status in ("queued", "running"):
                active += 1
        if not active:
            return
        time.sleep(2.0)
    for record in store.jobs():
        if record.status in ("queued", "running"):
            store.cancel(record.key, CANCEL_NOTE)
            soak.log.write(who="soak", action="cancel", key=record.key, why=CANCEL_NOTE)


def close_out(soak: Any, room: list) -> int:
    from soak_check import account, read_log
    from soak_lab import command_of, kill
    from soak_work import killed_submits
    from st_clients import summary

    from labcore.store import repair

    store, lab = soak.store, soak.lab
    print("draining the queue ...", flush=True)
    _drain(soak)
    lab.stop_all()
    left = lab.leftovers()
    for pid in left:
        print(f"left running: {pid} {command_of(pid)[:160]}")
        kill(pid)
    checked = repair.check(store.root)
    repairs: list[str] = []
    if not checked.ok:
        repairs = repair.repair(store.root).actions
    after = repair.check(store.root)
    log = read_log(soak.log.path)
    for key in killed_submits(log, store):  # a killed submit that had queued its job: the soak's job too
        log.append({"action": "submit", "key": key, "kind": "cli-run", "answer": "found after a killed submit"})
    keys = sorted({e["key"] for e in log if e.get("key")})
    records = {key: store.table.get(key) for key in keys}
    streams = {key: store.events(key) for key, r in records.items() if r and r["status"] in ("done", "diverged")}
    accounts = account(log, records, streams)
    resumes = sum(1 for e in log if e.get("action") == "resume")
    minutes = soak.args.minutes
    print()
    print(f"soak: {minutes:g} min, seed {soak.args.seed}, store on "
          f"{'a tmpfs of its own' if not soak.no_mount else 'the machine disk (' + soak.no_mount + '): no disk fill'}")
    print(f"jobs submitted: {accounts.submitted}; " + ", ".join(f"{n} {s}" for s, n in sorted(accounts.states.items())))
    print("kills: " + ", ".join(f"{n} {k}" for k, n in sorted(soak.kills.items())) + f" ({sum(soak.kills.values())})")
    print(f"resumes: {resumes}; requester errors answered: {sum(r.errors for r in soak.requesters)}")
    print(f"store check: {'clean' if checked.ok else f'{len(checked.problems)} problem(s)'}"
          + (f"; repaired: {len(repairs)} action(s)" if repairs else "")
          + ("" if after.ok else f"; left after repair: {len(after.problems)}"))
    for line in checked.problems[:20] + [f"repair: {a}" for a in repairs[:20]] + after.problems[:20]:
        print(f"  {line}")
    print(f"curves checked: {accounts.curves_checked}; points lost {accounts.points_lost}, "
          f"doubled {accounts.points_doubled}")
    for line in accounts.curve_problems[:10] + accounts.unaccounted[:20] + accounts.disagree[:20]:
        print(f"  {line}")
    print(f"unaccounted jobs: {len(accounts.unaccounted)}; store and log disagree on {len(accounts.disagree)}")
    print(f"students: {summary(soak.room or [c.stats for c in room])}")
    print("memory of the processes that lived a sixth of the soak or more (resident MB at a third of their samples "
          "-> at their end; growth over their last two thirds, of all of it and of its anonymous part):")
    for role, pid, lived, third, last, growth, anon in lab.memory_growth(60 * minutes):
        print(f"  {role:14} {pid:>7}  {lived:5.1f} min  {third:7.0f} -> {last:7.0f}  {growth:+.1f} %  anonymous "
              f"{anon:+.1f} %")
    print(f"lab processes left after the stop: {len(left)}" + (" (killed now)" if left else ""))
    lost = accounts.points_lost + len(accounts.unaccounted) + len(accounts.disagree)
    print(f"lost {lost}")
    return 0 if lost == 0 and after.ok and not accounts.points_doubled else 1
