"""The Ray executor process: the one Ray driver that runs the store's queued jobs on a cluster.

``python -m labcore ray-executor`` (started by :class:`labcore.execution.executor.RayExecutor` when none is alive)
connects to ``RAY_ADDRESS`` or starts a Ray cluster of this machine's own, then loops (the loop itself:
registration, reaping, the queue gate, heartbeats, a full disk, is :class:`labcore.execution.claim_loop.ClaimLoop`'s,
shared with the local worker; this module launches and pumps Ray tasks):

* claim queued jobs from the store while the cluster has CPUs free (the same claim as a local worker:
  attempt numbers, fencing and ``dead`` detection are the store's);
* launch each as a Ray generator task (``num_returns="streaming"``, ``max_retries=0``: the lab resumes
  from its own checkpoints, a Ray retry would start over) with the resources its kind states;
  the task runs :func:`labcore.execution.attempt.run_attempt` on its node and yields the job's events;
* pump the generators with ``ray.wait`` and hand each event to the job's :class:`EventSink`, so events
  reach the store in order, batched as a local worker batches them;
* heartbeat every running job (it stays ``running`` in the store's eyes while its task runs; if this
  process dies the heartbeats stop and the store says ``dead``, as for a local worker);
* cancel: the store's cancel flag becomes a stop file in the job's folder, which the task's
  ``should_stop`` reads (a training run finishes its step, checkpoints and ends ``cancelled``); a task
  that does not stop within ``cancel_grace_s`` gets ``ray.cancel``, then ``ray.cancel(force=True)``.
  (Ray's own non-force cancel ends a generator task at once, before it can checkpoint: hence the file.)
* a task whose process or node died (``WorkerCrashedError``, ``NodeDiedError`` …) is recorded ``dead``;
  ``resume`` queues it again and the next attempt continues from its checkpoint.

Job folders are read and written by the tasks on their nodes: the store folder must be on a filesystem
every node mounts at the same path. The process checks that at start (a probe file read on every node)
and publishes the cluster's nodes and their resources in the store, which the executor reads to refuse
a job no node could run. Only this process imports Ray; the pages never do.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from labcore import jobs, paths
from labcore.paths import env_number
from labcore.execution.attempt import EventSink, Outcome
from labcore.execution import lifetime as lifetimes
from labcore.execution.claim_loop import ClaimLoop, Identity, Launched
from labcore.execution.lifetime import Lifetime
from labcore.errors import LabError
from labcore.events import LOG, NODE, LogEvent
from labcore.jobs import Resources
from labcore.execution.ray_task import PROBE, TASK, stop_file
from labcore.store import HOST, Claim, Store, open_store

ROLE = "ray-executor"
# A task whose process, node or owner is gone: the job is dead (resume continues it), not failed.
CRASHED = (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.LocalRayletDiedError,
           ray.exceptions.ObjectLostError, ray.exceptions.OwnerDiedError, ray.exceptions.RaySystemError)


@dataclass(frozen=True)
class RaySettings:
    """The Ray executor's knobs, with units (the store's own timings are :class:`StoreSettings`)."""

    wait_s: float = 0.05  # longest a ray.wait blocks while tasks run (the loop's tick for heartbeats, cancels)
    drain_max: int = 1000  # events taken from one task per tick, at most
    cancel_grace_s: float = 10.0  # after the stop file: time to finish a step and checkpoint before ray.cancel
    force_after_s: float = 5.0  # after ray.cancel: time before ray.cancel(force=True) kills the process
    info_every_s: float = 5.0  # how often the cluster's nodes are published in the store
    probe_timeout_s: float = 60.0  # how long the start-up check waits for each node to read the probe file
    # CPUs of a local cluster (0: this machine's)
    local_cpus: int = int(env_number("TRANSFERLAB_RAY_CPUS", 0, "the CPUs of the lab's local Ray cluster (default: all)"))
    # Ray's socket paths live under this folder and must stay below 107 bytes: keep it short.
    temp_dir: str = os.environ.get("TRANSFERLAB_RAY_TMP", f"/tmp/tl-ray-{os.getuid()}")


def connect(address: str, *, temp_dir: str, local_cpus: int = 0) -> bool:
    """Join the Ray cluster at ``address``, or start one of this machine's own (``local_cpus`` CPUs, 0: all;
    dashboard off; session folder ``temp_dir``), unless this process is connected already. True when this
    call connected: the caller then shuts Ray down when it is done with it."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return False
    # Tasks and actors import the lab: they find this checkout (on a shared path, the same on every node).
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(paths.REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p),
           "TRANSFERLAB_CACHE": str(paths.cache_dir()), "RAY_USAGE_STATS_ENABLED": "0"}
    options: dict[str, Any] = dict(runtime_env={"env_vars": env}, log_to_driver=False, include_dashboard=False)
    if address:
        ray.init(address=address, **options)
    else:
        Path(temp_dir).mkdir(parents=True, exist_ok=True)
        ray.init(address="local", num_cpus=local_cpus or os.cpu_count(), _temp_dir=temp_dir, **options)
    return True


@dataclass
class _Running:
    """A launched attempt and what the loop knows of it."""

    claim: Claim
    ref: Any  # the task's ObjectRefGenerator
    sink: EventSink
    need: Resources
    outcome: Outcome | None = None
    node: str = ""
    stop_at: float | None = None  # when the stop file was written
    reason: str = ""  # why it was asked to stop
    cancel_at: float | None = None  # when ray.cancel was called
    forced: bool = False

    def task_ended(self) -> bool:
        """Has the task itself ended? (Its last events may still wait to be drained.)"""
        return bool(ray.wait([self.ref.completed()], timeout=0)[0])


class RayPump(ClaimLoop):
    """Claims the store's jobs and runs them as Ray tasks until stopped (see the module's text)."""

    def __init__(self, store: Store, *, address: str = "", settings: RaySettings = RaySettings(),
                 lifetime: Lifetime = Lifetime()) -> None:
        pid = os.getpid()
        super().__init__(store, Identity(pid, f"ray executor {pid}", role=ROLE, command=" ".join(sys.argv)), lifetime)
        self.address = address
        self.settings = settings
        # (key, attempt) -> its task: a job resumed after a false "dead" may briefly have two attempts here
        self.running: dict[tuple[str, int], _Running] = {}
        self.owns_ray = False
        self.error = ""  # why no job can run (no cluster, a node that cannot reach the store)
        self.total_cpus = 0.0  # of the alive nodes, as last published
        self._signals = False  # install_signal_handlers was called: install them again after ray.init
        self._last_info = self._last_cancel_check = 0.0

    # ------------------------------------------------------------------------------- the cluster
    def connect(self) -> None:
        """Join ``address``, or start a cluster of this machine's own (dashboard off), unless Ray is up."""
        if connect(self.address, temp_dir=self.settings.temp_dir, local_cpus=self.settings.local_cpus):
            self.owns_ray = True

    def nodes(self) -> list[dict[str, Any]]:
        """The alive nodes: id, host name, address and total resources (CPU, GPU, memory in bytes)."""
        return [{"node_id": n["NodeID"], "host": n.get("NodeManagerHostname", ""), "ip": n.get("NodeManagerAddress", ""),
                 "resources": {k: float(n["Resources"].get(k, 0.0)) for k in ("CPU", "GPU", "memory")}}
                for n in ray.nodes() if n.get("Alive")]

    def check_shared_store(self) -> str:
        """Every node must read the store's folder at the same path; the reason it does not, or ""."""
        token = uuid.uuid4().hex
        probe = self.store.root / f".ray-probe-{self.pid}-{token[:8]}"
        probe.write_text(token)
        try:
            refs = [(n, PROBE.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["node_id"], soft=False))
                     .remote(str(probe))) for n in self.nodes()]
            bad = []
            for node, ref in refs:
                try:
                    seen = ray.get(ref, timeout=self.settings.probe_timeout_s)
                except Exception as exc:
                    seen = f"({type(exc).__name__})"
                if seen != token:
                    bad.append(f"{node['host']} ({node['ip']}) {seen if seen.startswith('(') else ''}".strip())
        finally:
            probe.unlink(missing_ok=True)
        if bad:
            return (f"the store folder {self.store.root} is not the same folder on node(s) {', '.join(bad)}; job "
                    f"folders (checkpoints, artifacts) are written there by the tasks, so it must be on a "
                    f"filesystem every node mounts at the same path (TRANSFERLAB_CACHE=/shared/…)")
        return ""

    def publish(self) -> None:
        nodes = self.nodes() if ray.is_initialized() else []
        self.total_cpus = sum(n["resources"]["CPU"] for n in nodes)
        self.store.put_executor_info("ray", {"pid": self.pid, "host": HOST, "address": self.address or "local",
                                             "nodes": nodes, "error": self.error})

    # ------------------------------------------------------------------------- the claim loop's hooks
    def serve(self) -> int:
        """Run until :meth:`stop` (or SIGTERM/SIGINT with :meth:`install_signal_handlers`); jobs handled."""
        try:
            return super().serve()
        finally:
            if self.owns_ray:
                ray.shutdown()

    def start(self) -> str:
        try:
            self.connect()
            if self._signals:
                self.install_signal_handlers()
            self.error = self.check_shared_store()
        except Exception as exc:
            self.error = f"cannot use the Ray cluster at {self.address or 'a local address'}: {type(exc).__name__}: {exc}"
        self.publish()
        return self.error or f"ready on {self.address or 'a local cluster'} (store {self.store.root})"

    def tick(self, now: float) -> None:
        if now - self._last_info >= self.settings.info_every_s:
            self.publish()
            self._last_info = now
        if self.stop_reason:
            for run in list(self.running.values()):
                self._ask_stop(run, "interrupted")

    def capacity(self) -> float:
        """The CPUs free (a job that needs more than are free waits in Ray's queue, ``running``)."""
        if self.error:
            return 0.0
        return self.total_cpus - sum(run.need.num_cpus for run in self.running.values())

    def poll(self) -> None:
        self._watch_stops()
        self._pump()

    def launched(self) -> list[Launched]:
        return [Launched(run.claim, run.sink, handle=run) for run in self.running.values()]

    def lost(self, run: Launched) -> None:
        ray.cancel(run.handle.ref, force=True)
        self.running.pop((run.claim.key, run.claim.attempt), None)

    def beat(self) -> None:
        super().beat()
        for run in list(self.running.values()):
            if run.sink.write_error:
                self._ask_stop(run, "interrupted")

    def close(self) -> None:
        for run in list(self.running.values()):  # stopped without waiting: nothing more is recorded
            ray.cancel(run.ref, force=True)
            self._end(run, Outcome(run.reason or "interrupted", error="the Ray executor stopped"))

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT stop the loop gently (running tasks checkpoint and end ``interrupted``).

        ray.init installs a SIGTERM handler of its own in a driver that exits at once, so serve()
        installs these again once connected."""
        self._signals = True
        signal.signal(signal.SIGTERM, lambda *_: self.stop())
        signal.signal(signal.SIGINT, lambda *_: self.stop())

    # ---------------------------------------------------------------------------------- launching
    def launch(self, claim: Claim) -> None:
        for slot, older in list(self.running.items()):
            if slot[0] == claim.key:
                # An earlier attempt of this job (marked dead while only slow, then resumed): its task must
                # not write into the folder the new attempt uses (a local worker's writes are fenced instead).
                ray.cancel(older.ref, force=True)
                del self.running[slot]
        need = Resources.from_dict(claim.resources)
        sink = EventSink(self.store, claim.key, self.store.settings, attempt=claim.attempt)
        try:
            inputs = {key: (self.store.record(key).to_dict(), str(self.store.workdir(key))) for key in claim.requires}
            spec = {"key": claim.key, "attempt": claim.attempt, "kind": claim.kind, "spec": claim.spec,
                    "workdir": str(claim.workdir), "resume": claim.resume, "inputs": inputs,
                    "checkpoint_every": self.store.settings.checkpoint_every,
                    "threads": max(1, int(need.num_cpus)), "store_root": str(self.store.root),
                    "min_free_mb": self.store.settings.min_free_mb,
                    "capture_join_s": self.store.settings.capture_join_s,
                    "modules": os.environ.get(jobs.MODULES_VARIABLE, "")}
            options: dict[str, Any] = {"num_cpus": need.num_cpus, "num_gpus": need.num_gpus,
                                       "name": f"{claim.kind}-{claim.key[:8]}-{claim.attempt}"}
            if need.memory_mb:
                options["memory"] = int(need.memory_mb * 2**20)
            ref = TASK.options(**options).remote(spec)
        except Exception as exc:
            run = _Running(claim, None, sink, need)
            self._end(run, Outcome("failed", error=f"could not start the Ray task: {type(exc).__name__}: {exc}",
                                   traceback=traceback.format_exc()))
            return
        self.running[(claim.key, claim.attempt)] = _Running(claim, ref, sink, need)

    # ------------------------------------------------------------------------------------ pumping
    def _pump(self) -> None:
        # After a non-force ray.cancel a generator reads "ready" with nothing to take, and asking whether
        # it is finished blocks until its task really ends: such a task is only drained once it has.
        cancelling = [run for run in self.running.values() if run.cancel_at is not None and not run.forced]
        for run in cancelling:
            if run.task_ended():
                self._drain(run)
        runs = [run for run in self.running.values() if run not in cancelling]
        if not self.running:
            self.wake.wait(self.store.settings.poll_every_s)  # idle: until the next look at the queue, or stop()
            return
        if not runs:
            time.sleep(self.settings.wait_s)
            return
        refs = [run.ref for run in runs]
        ready, _ = ray.wait(refs, num_returns=1, timeout=self.settings.wait_s)
        if ready:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            for ref in ready:
                self._drain(runs[refs.index(ref)])

    def _drain(self, run: _Running) -> int:
        """Take every event the task has produced so far (how many); end the job when its stream ends."""
        taken = 0
        while taken < self.settings.drain_max:  # a chatty task must not starve the others' heartbeats
            if run.ref.is_finished():
                self._end(run, run.outcome or Outcome(run.reason or "failed",
                                                      error="" if run.reason else "the task ended without a result"))
                return taken + 1
            if not run.ref.next_ready():
                return taken
            taken += 1
            try:
                item = ray.get(next(run.ref))
            except StopIteration:
                continue  # is_finished says so on the next round
            except ray.exceptions.TaskCancelledError:
                self._end(run, run.outcome or Outcome(run.reason or "cancelled"))
                return taken
            except CRASHED as exc:
                if run.forced:
                    self._end(run, Outcome(run.reason, error=f"stopped by force: it did not reach a step boundary "
                                                             f"within {self.settings.cancel_grace_s:g} s"))
                else:
                    where = f" on {run.node}" if run.node else ""
                    self._end(run, Outcome("dead", error=f"the Ray task{where} died ({type(exc).__name__}); resume it "
                                                         f"to continue from its last checkpoint"))
                return taken
            except Exception as exc:
                self._end(run, Outcome("failed", error=f"{type(exc).__name__}: {str(exc).splitlines()[0]} (the "
                                                       f"traceback is in the run's log)", traceback=str(exc)))
                return taken
            self._take(run, item)
        return taken

    def _take(self, run: _Running, item: dict[str, Any] | Outcome) -> None:
        if isinstance(item, Outcome):
            run.outcome = item
        elif item.get("type") == NODE:
            run.node = f"{item['host']} ({item['ip']})"
            self.store.annotate(run.claim.key, run.claim.attempt, node=run.node, node_id=item["node_id"],
                                task_pid=item["pid"])
            run.sink.add(LogEvent(source="ray", message=f"running on {run.node}, pid {item['pid']}",
                                  t=item["t"]).to_dict())
        elif item.get("type") == LOG and item.get("source") in ("stdout", "stderr"):
            run.sink.log(item["message"], item["source"])  # the log's length limit applies
        else:
            run.sink.add(item)

    def _end(self, run: _Running, outcome: Outcome) -> None:
        """Record how an attempt ended (unless it was fenced: another attempt owns the job)."""
        claim, sink = run.claim, run.sink
        self.running.pop((claim.key, claim.attempt), None)
        if sink.write_error:
            outcome.status, outcome.error = "failed", sink.write_error
        if outcome.status == "dead":
            sink.add(LogEvent(source="ray", message=outcome.error).to_dict())
        else:
            sink.add(outcome.event())
        sink.flush()
        stop_file(claim.workdir, claim.attempt).unlink(missing_ok=True)
        if not (outcome.lost or sink.fenced):
            self.store.finish(claim.key, claim.attempt, outcome.status, result=outcome.result, error=outcome.error,
                              traceback=outcome.traceback)
        print(f"ray executor {self.pid}: {claim.kind} {claim.key} {outcome.status}"
              + (f" ({outcome.error})" if outcome.error else ""), flush=True)

    # ------------------------------------------------------------------------------------ stopping
    def _ask_stop(self, run: _Running, reason: str) -> None:
        if run.stop_at is not None:
            return
        run.reason, run.stop_at = reason, time.time()
        try:
            stop_file(run.claim.workdir, run.claim.attempt).write_text(reason)
        except OSError:
            run.stop_at -= self.settings.cancel_grace_s  # no file, no graceful stop: ray.cancel at once

    def _watch_stops(self) -> None:
        now = time.time()
        check = now - self._last_cancel_check >= self.store.settings.poll_every_s
        if check:
            self._last_cancel_check = now
        for run in list(self.running.values()):
            if check and run.stop_at is None and run.claim.deadline and now > run.claim.deadline:
                self.store.cancel(run.claim.key, run.claim.deadline_note)  # its requester's time limit
            if check and run.stop_at is None and self.store.cancel_requested(run.claim.key, run.claim.attempt):
                self._ask_stop(run, "cancelled")
            if (run.stop_at is not None and run.cancel_at is None and now - run.stop_at >= self.settings.cancel_grace_s
                    and not run.task_ended()):
                # Only a task still running: one that ended on its own may still have its last events (its
                # result among them) waiting to be drained here, which a busy machine delays, and a cancel
                # would drop them.
                ray.cancel(run.ref)
                run.cancel_at = now
            elif run.cancel_at is not None and not run.forced and now - run.cancel_at >= self.settings.force_after_s:
                ray.cancel(run.ref, force=True)
                run.forced = True


# ------------------------------------------------------------------------------------------ command line
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=None, help="store folder (default: <TRANSFERLAB_CACHE>/store); it "
                                                      "must be on a path every node of the cluster mounts")
    parser.add_argument("--address", default=os.environ.get("RAY_ADDRESS", ""),
                        help="the Ray cluster (default RAY_ADDRESS; empty: a cluster of this machine's own)")
    parser.add_argument("--cpus", type=int, default=RaySettings.local_cpus,
                        help="CPUs of a local cluster (default TRANSFERLAB_RAY_CPUS, else this machine's)")
    parser.add_argument("--temp-dir", default=RaySettings.temp_dir,
                        help=f"Ray's session folder for a local cluster (short: socket paths; default "
                             f"TRANSFERLAB_RAY_TMP, else {RaySettings.temp_dir})")
    lifetimes.add_arguments(parser)


def run_command(args: argparse.Namespace) -> int:
    pump = RayPump(open_store(args.store), address=args.address,
                   settings=RaySettings(local_cpus=args.cpus, temp_dir=args.temp_dir),
                   lifetime=Lifetime.from_arguments(args))
    pump.install_signal_handlers()
    pump.serve()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labcore.execution.ray_pump", description="Run queued jobs on Ray")
    add_arguments(parser)
    try:
        return run_command(parser.parse_args(argv))
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
