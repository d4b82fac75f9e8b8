"""What the pages keep and read between reruns: the store, query parameters, remembered choices, live curves,
progress, background tasks, and torch-free catalogues of models, inits and protocols.

Why these exist (Streamlit facts): a rerun interrupts the script thread, so nothing slow runs in it;
``st.session_state`` is lost on a browser refresh, so the run or group a page shows lives in
``st.query_params``; a widget's value is dropped when its page is left, so choices are kept in keys of
our own and written back before the widget is drawn. No torch is imported here or by the pages.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
import threading
import time
import traceback
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import streamlit as st

from labcore import data as disciplines
from labcore.classroom import SECRETS_TABLE, ClassroomLimits, PasscodeGuard
from labcore.errors import LabError
from labcore.fmt import fmt_duration
from labcore.mapping import MappingSpec, TokenMapping, build_mapping, model_vocab
from labcore.record import RunRecord
from labcore.events import curves_from_events
from labcore.store import FINISHED, STOPPED, Store, open_store

# --------------------------------------------------------------------------------------------------
# the store and the executor


def get_store() -> Store:
    return open_store()


def get_executor() -> "AskingExecutor":
    """The process's executor, on the store of the current cache (tests move the cache between apps), as
    this browser session uses it: whatever it submits, resumes or withdraws is in the requester's name."""
    from labcore.executor import LocalExecutor
    from labcore.executor import get_executor as shared

    executor = shared()
    store = get_store()
    if isinstance(executor, LocalExecutor) and Path(executor.store.root) != Path(store.root):
        executor = executor.on_store(store)
    return AskingExecutor(executor, requester(), student_limits())


class AskingExecutor:
    """An executor seen by one requester: submissions, resumes and withdrawals carry ``who``; a cancel
    (for everyone: the teacher's control) records ``who`` as the one who cancelled. Everything else is the
    executor's own. A student's submissions (``limits`` set) are held to the teacher's settings first."""

    def __init__(self, executor, who: str, limits: ClassroomLimits | None = None) -> None:
        self.executor = executor
        self.who = who
        self.limits = limits

    def submit(self, spec: Any, **options: Any):
        self._admit([spec])
        return self._changed(self.executor.submit(spec, who=self.who, **options))

    def submit_group(self, name: str, specs: Iterable[Any], **options: Any):
        specs = list(specs)
        self._admit(specs)
        return self._changed(self.executor.submit_group(name, specs, who=self.who, **options))

    def _admit(self, specs: list[Any], adding: int | None = None) -> None:
        """A student's specs against the teacher's limits, before anything is queued; ``adding``: the queue
        entries they make (None: those not finished already)."""
        if self.limits is None:
            return
        from labcore import jobs

        for spec in specs:
            self.limits.check(spec)
        store = self.executor.store
        if adding is None:
            adding = sum(1 for spec in specs if (store.get(jobs.key_of(spec)) or {}).get("status") not in FINISHED)
        self.limits.check_queue(len(store.waiting_for(self.who)), adding)
        if adding and self.limits.max_disk_mb_per_student:
            from labcore.store.usage import requester_bytes

            self.limits.check_disk(requester_bytes(store, self.who))
        store.limit_requester(self.who, max_job_s=self.limits.max_job_s, note=self.limits.time_limit_note())

    def resume(self, key: str):
        self._admit_resume(key)
        return self._changed(self.executor.resume(key, who=self.who))

    def _admit_resume(self, key: str) -> None:
        """A student's resume queues the job again, as a submission does, so it meets the same limits (a job
        someone else asked for at a budget or model students may not use, the queue cap, the disk quota)."""
        if self.limits is None:
            return
        from labcore import jobs

        record = self.executor.store.get(key)
        if record is None or record["status"] not in STOPPED:
            return  # nothing to queue: the store names the problem, or the job is already active
        self._admit([jobs.get_kind(record.get("kind", "run")).from_dict(record["spec"])], adding=1)

    def withdraw(self, key: str):
        return self._changed(self.executor.withdraw(key, self.who))

    def cancel(self, key: str, who: str | None = None):
        return self._changed(self.executor.cancel(key, who or self.who))

    def clear_queue(self, who: str | None = None):
        return self._changed(self.executor.clear_queue(who or self.who))

    def _changed(self, outcome: Any) -> Any:
        """The queue changed: the next status line reads it again instead of the shared reading."""
        with _SUMMARIES_LOCK:
            _SUMMARIES.pop(str(self.executor.store.root), None)
        return outcome

    def __getattr__(self, name: str) -> Any:
        return getattr(self.executor, name)


# --------------------------------------------------------------------------------------------------
# who is asking: a browser session (or a signed-in user), and the teacher


TEACHER = "teacher"  # the name a teacher's cancel is recorded under


def requester() -> str:
    """Who this browser session is to the store: the signed-in user where ``st.login`` is set up, else a
    session id kept in ``st.session_state`` (a browser refresh starts a new one)."""
    try:
        if st.user.is_logged_in:
            return str(st.user.get("email") or st.user.get("name") or "user")
    except Exception:  # no authentication configured, or an older Streamlit
        pass
    if "_requester" not in st.session_state:
        st.session_state["_requester"] = f"session-{secrets.token_hex(3)}"
    return st.session_state["_requester"]


def who_label(who: str | None) -> str:
    """A requester as the pages name them."""
    if not who:
        return "the command line"
    if who == TEACHER:
        return "the teacher"
    return "you" if who == requester() else who


def teacher_passcode() -> str | None:
    """The passcode of ``.streamlit/secrets.toml`` (``teacher_passcode = "..."``); None when there is none."""
    try:
        value = st.secrets.get("teacher_passcode")
    except Exception:  # no secrets.toml anywhere: no teacher controls
        return None
    return str(value) if value else None


def classroom_limits() -> ClassroomLimits:
    """The teacher's ``[classroom]`` settings of ``.streamlit/secrets.toml`` (the defaults where there are none)."""
    try:
        values = st.secrets.get(SECRETS_TABLE)
    except Exception:  # no secrets.toml anywhere
        values = None
    return ClassroomLimits.from_settings(values)


def student_limits() -> ClassroomLimits | None:
    """The limits this session is held to: a class's (a passcode is set) for anyone who has not entered it."""
    return classroom_limits() if teacher_passcode() is not None and not is_teacher() else None


_GUARDS: dict[tuple[int, float], PasscodeGuard] = {}


def passcode_guard() -> PasscodeGuard:
    """The server's one guard on the passcode (per setting, so a changed secrets.toml takes effect)."""
    limits = classroom_limits()
    setting = (limits.passcode_attempts, limits.passcode_pause_s)
    with _SUMMARIES_LOCK:
        return _GUARDS.setdefault(setting, PasscodeGuard(*setting))


def sign_in_ids() -> tuple[str, ...]:
    """Who tries the passcode: this session and, where Streamlit knows it, the browser's address."""
    try:
        address = st.context.ip_address
    except Exception:
        address = None
    return (f"session:{requester()}",) + ((f"address:{address}",) if address else ())


def is_teacher() -> bool:
    """Has this session entered the teacher's passcode?"""
    code = teacher_passcode()
    entered = st.session_state.get("_teacher_code", "")
    return bool(code) and hmac.compare_digest(str(entered).encode(), code.encode())


def result_of(store: Store, key: str, record: dict[str, Any] | None = None) -> RunRecord | None:
    """``key``'s result, from ``record`` where the page read it already."""
    try:
        return store.get_result(key) if record is None else Store.result_in(record)
    except Exception:  # a half-written or foreign record must not break a page
        return None


def results(store: Store, keys: Iterable[str], read: dict[str, dict[str, Any]] | None = None) -> list[RunRecord]:
    """The results of ``keys`` that have one; ``read``: records by key the page read already."""
    read = read or {}
    return [r for r in (result_of(store, k, read.get(k)) for k in keys) if r is not None]


_SUMMARIES: dict[str, tuple[float, dict[str, Any]]] = {}
_SUMMARIES_LOCK = threading.Lock()
SUMMARY_TTL_S = 1.0  # how long one reading of the workers and the queue serves every session, at least
SUMMARY_COST_SHARE = 0.1  # ... and at least ten times what it took: the status line takes at most a tenth of a core


def worker_summary(store: Store) -> dict[str, Any]:
    """Alive workers and what the queue holds, for the status line every page shows: read at most once a
    second per server (less often where reading takes longer) and shared by every session (it reads every
    record, and each viewer's sidebar asks); a submission reads it again at once."""
    root = str(store.root)
    with _SUMMARIES_LOCK:
        found = _SUMMARIES.get(root)
        if found is None or time.monotonic() > found[0]:
            started = time.monotonic()
            workers = store.workers()
            records = store.runs()  # every record: about 0.7 s at 10,000 jobs, hence the longer life below
            cost = time.monotonic() - started
            found = _SUMMARIES[root] = (time.monotonic() + max(SUMMARY_TTL_S, cost / SUMMARY_COST_SHARE), {
                "workers": workers, "queued": sum(r["status"] == "queued" for r in records),
                "running": sum(r["status"] == "running" for r in records), "total": len(records)})
    return dict(found[1])


# --------------------------------------------------------------------------------------------------
# query parameters and remembered choices


def qp(name: str, default: str | None = None) -> str | None:
    value = st.query_params.get(name)
    return value if value not in (None, "") else default


def set_qp(**values: str | Sequence[str] | None) -> None:
    """Set (or with None, remove) query parameters; lists are stored comma-separated."""
    written = st.session_state.setdefault("_qp_written", {})
    for name, value in values.items():
        if value is None or value == "" or value == []:
            written[name] = None
            if name in st.query_params:
                del st.query_params[name]
        else:
            text = ",".join(value) if isinstance(value, (list, tuple)) else str(value)
            written[name] = text
            if st.query_params.get(name) != text:
                st.query_params[name] = text


def qp_external(name: str) -> str | None:
    """The query parameter ``name`` if it did not come from this session's own :func:`set_qp`: a link, a
    reload, a second tab or the first visit. A page then moves its widget to it; otherwise the widget
    (the user's latest choice) wins."""
    value = st.query_params.get(name) or None
    written = st.session_state.setdefault("_qp_written", {})
    if name in written and written[name] == value:
        return None
    written[name] = value
    return value


def remember(key: str, default: Any, options: Sequence[Any] | None = None) -> str:
    """Prepare widget ``w:<key>`` to show the remembered choice ``key`` (or ``default``); returns its key.

    Create the widget with ``key=remember(...)`` and no ``value``/``index`` argument, then call
    :func:`keep` with its value. A remembered value no longer among ``options`` falls back to ``default``.
    """
    kept = st.session_state.setdefault("_kept", {})
    widget = f"w:{key}"
    value = kept.get(key, default)
    if options is not None and value not in options:
        value = default if default in options else (options[0] if options else default)
    if widget not in st.session_state or (options is not None and st.session_state[widget] not in options):
        st.session_state[widget] = value
    return widget


def keep(key: str, value: Any) -> Any:
    st.session_state.setdefault("_kept", {})[key] = value
    return value


def persist_widgets(prefixes: Sequence[str]) -> None:
    """Keep the values of widgets whose keys start with ``prefixes`` while their page is not shown.

    Streamlit drops a widget's value at the end of a run that did not draw it; assigning the value to
    itself marks it as ours, so it survives a visit to another page. Buttons and uploaders cannot be
    assigned: give them keys outside these prefixes.
    """
    for key in list(st.session_state.keys()):
        if isinstance(key, str) and key.startswith(tuple(prefixes)):
            st.session_state[key] = st.session_state[key]


def remembered(key: str, default: Any = None) -> Any:
    return st.session_state.get("_kept", {}).get(key, default)


# --------------------------------------------------------------------------------------------------
# curves and progress


@dataclass
class _RunStream:
    """One run's events as read so far, and its curves at that cursor (computed once per cursor)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    cursor: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    curves: tuple[list, list, str] | None = None
    pace: tuple[int, list[dict[str, Any]]] = (-1, [])  # (cursor, first and last timed step of its attempt)


def _pace(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events :func:`progress` needs for an ETA, at most two: the current attempt's first and last timed
    steps (so thirty viewers do not each walk a long run's whole stream on every refresh)."""
    start = max((i for i, e in enumerate(events) if e.get("type") == "attempt"), default=-1)
    timed = [e for e in events[start + 1:] if e.get("type") == "step" and "t" in e]
    return timed[:1] + timed[-1:] if len(timed) > 1 else timed


class StreamCache:
    """Each run's event stream, read once per server process and shared by every session.

    A live view looks at the stream's chunk count (:meth:`Store.stream_length`, one read); only the first
    view to find that it moved reads the new chunks and rebuilds the run's curves, under the run's own lock,
    while every other session (30 students watching one demo) gets the same lists: the server's work
    grows with the runs watched, not with the viewers. Callers treat what they get as read-only.
    """

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit  # runs kept (the least recently read go first)
        self._runs: dict[tuple[str, str], _RunStream] = {}
        self._lock = threading.Lock()

    def _entry(self, store: Store, key: str) -> _RunStream:
        name = (str(store.root), key)
        with self._lock:
            entry = self._runs.pop(name, None) or _RunStream()
            self._runs[name] = entry  # most recently used last
            while len(self._runs) > self.limit:
                self._runs.pop(next(iter(self._runs)))
        return entry

    def _fresh(self, store: Store, key: str) -> _RunStream:
        entry = self._entry(store, key)
        length = store.stream_length(key)
        if length != entry.cursor:
            with entry.lock:
                if length < entry.cursor:  # a store rebuilt under us: read it again
                    entry.cursor, entry.events = 0, []
                if entry.cursor < length:
                    new, cursor = store.read_events(key, entry.cursor)
                    entry.events = entry.events + new  # a new list: readers holding the old one keep theirs
                    entry.cursor, entry.curves = cursor, None
        return entry

    def read(self, store: Store, key: str) -> list[dict[str, Any]]:
        """The run's events up to now (read-only)."""
        return self._fresh(store, key).events

    def cursor(self, store: Store, key: str) -> int:
        """The cursor the shared view of the run is at, after catching up."""
        return self._fresh(store, key).cursor

    def pace(self, store: Store, key: str, *, read: bool = True) -> list[dict[str, Any]]:
        """What :func:`progress` needs of the run's events for its ETA, computed once per cursor. With
        ``read=False`` only what was already read (nothing for a run no view follows)."""
        entry = self._fresh(store, key) if read else self._runs.get((str(store.root), key))
        if entry is None:
            return []
        cursor, pace = entry.pace
        if cursor != entry.cursor:
            with entry.lock:
                entry.pace = (entry.cursor, _pace(entry.events))
                pace = entry.pace[1]
        return pace

    def curves(self, store: Store, key: str) -> tuple[list, list, str]:
        """``(train_loss, validation_metric, metric_name)`` at the current cursor, computed once per cursor."""
        entry = self._fresh(store, key)
        curves = entry.curves
        if curves is None:
            with entry.lock:
                curves = entry.curves or _curves(store, key, entry.events)
                if curves[0]:  # nothing yet (a run without a stream, before its result lands): ask again
                    entry.curves = curves
        return curves


_STREAMS = StreamCache()


def stream_cache() -> StreamCache:
    """The server process's shared stream cache (the same for every session)."""
    return _STREAMS


def run_curves(store: Store, key: str, cache: StreamCache | None = None) -> tuple[list, list, str]:
    """``(train_loss, validation_metric, metric_name)`` of a run, live from its event stream.

    A run recorded without a stream (an in-process sweep) falls back to its result's thinned curves.
    """
    return (cache or _STREAMS).curves(store, key)


def _curves(store: Store, key: str, events: list[dict[str, Any]]) -> tuple[list, list, str]:
    curves = curves_from_events(events)
    metric = ""
    validation: list = []
    for name, points in curves.items():
        if name.startswith("validation_") and name != "validation_loss":
            metric, validation = name[len("validation_"):], points
    train = curves.get("train_loss", [])
    if not train:
        result = result_of(store, key)
        if result is not None:
            train = [tuple(p) for p in result.train_loss]
            validation = [tuple(p) for p in result.val_curve]
            metric = result.metric
    return list(train), list(validation), metric


@dataclass(frozen=True)
class Progress:
    step: int
    total: int
    fraction: float
    eta_s: float | None
    text: str


def progress(status: str, step: int, total: int, events: Sequence[dict[str, Any]] = (),
             now: float | None = None) -> Progress:
    """Progress and ETA of a run from its step counts and the wall times of its step events.

    The rate comes from the step events of the current attempt (model loading is not training speed);
    with fewer than two timed steps there is no ETA yet.
    """
    now = time.time() if now is None else now
    fraction = min(1.0, step / total) if total else (1.0 if status in FINISHED else 0.0)
    attempt_start = max((i for i, e in enumerate(events) if e.get("type") == "attempt"), default=-1)
    timed = [e for i, e in enumerate(events) if i > attempt_start and e.get("type") == "step" and "t" in e]
    eta = None
    if status == "running" and total and len(timed) >= 2:
        first, last = timed[0], timed[-1]
        span_steps = int(last["step"]) - int(first["step"])
        span_time = float(last["t"]) - float(first["t"])
        if span_steps > 0 and span_time > 0:
            eta = max(0.0, (total - step) / (span_steps / span_time))
    if status == "queued":
        text = "queued"
    elif status == "running":
        text = f"step {step}" + (f" of {total}" if total else "") + (f", about {fmt_duration(eta)} left"
                                                                     if eta is not None else "")
    else:
        text = status + (f" at step {step}" + (f" of {total}" if total else "") if step else "")
    return Progress(step, total, fraction, eta, text)


# --------------------------------------------------------------------------------------------------
# background tasks (fetching assets, building data sets): threads of the server process


@dataclass
class Task:
    """A slow job run in a thread of the server, so no page waits for it; pages poll its messages."""

    name: str
    messages: list[str] = field(default_factory=list)
    done: bool = False
    error: str = ""
    result: Any = None
    started: float = field(default_factory=time.time)
    finished: float | None = None

    def progress(self, message: str) -> None:
        self.messages.append(str(message))
        del self.messages[:-200]


_TASKS: dict[str, Task] = {}
_TASKS_LOCK = threading.Lock()


def start_task(name: str, work: Callable[[Callable[[str], None]], Any]) -> Task:
    """Run ``work(progress)`` in a daemon thread unless a task of that name is already running.

    A finished task of that name is replaced (so a failed fetch can be tried again).
    """
    with _TASKS_LOCK:
        current = _TASKS.get(name)
        if current is not None and not current.done:
            return current
        task = _TASKS[name] = Task(name)

    def body() -> None:
        try:
            task.result = work(task.progress)
        except LabError as exc:
            task.error = str(exc)
        except Exception as exc:  # shown on the page with its type; the traceback goes to the server log
            task.error = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        finally:
            task.finished = time.time()
            task.done = True

    threading.Thread(target=body, name=f"task-{name}", daemon=True).start()
    return task


def get_task(name: str) -> Task | None:
    return _TASKS.get(name)


# --------------------------------------------------------------------------------------------------
# catalogues without torch (the registries load their names and descriptions without it)


def backbones() -> dict[str, str]:
    """Backbone name -> description: the packaged ones, then the models pretrained here (``lab:``)."""
    from labcore.models import BACKBONES, made_here_names, model_folder, read_card

    named = {name: BACKBONES[name].description for name in BACKBONES.names()}
    for name in made_here_names("lab"):
        named[name] = read_card(model_folder(name)).get("description", "pretrained in the lab")
    return named


def inits() -> dict[str, str]:
    from labcore.models import INITS

    return {name: INITS[name] for name in INITS.names()}


def protocols() -> dict[str, tuple[str, list[tuple[str, type, Any]]]]:
    """Protocol name -> (one-line description with paper section, [(switch, type, default), ...])."""
    from labcore.protocols import PROTOCOLS  # registers every protocol; loads no torch

    out = {}
    for name in PROTOCOLS.names():
        protocol = PROTOCOLS[name]
        hints = typing.get_type_hints(protocol.Params)
        params = [(f.name, hints[f.name], f.default) for f in dataclasses.fields(protocol.Params)]
        out[name] = (protocol.description, params)
    return out


# --------------------------------------------------------------------------------------------------
# disciplines and token mappings without torch


def discipline_info(name: str, params: dict[str, Any] | None = None):
    discipline = disciplines.get(name)
    return discipline.info(disciplines.parse_params(discipline, dict(params or {})))


def render_example(info, row: dict[str, Any], limit: int = 200) -> str:
    """An example in its own symbols: :func:`labcore.data.render`, except that one-number vectors (bit
    strings) are written as their bits (bits-xor's two strings apart: ``info.bit_groups``), not as "10 vectors of dimension 1"."""
    if info.input_kind == "vectors" and info.vector_dim == 1 and row.get("vectors") is not None:
        return info.show_bits("".join(f"{float(v[0]):g}" for v in row["vectors"][:limit]))
    return disciplines.render(info, row, limit=limit)


def _mapping_spec_of(spec: dict[str, Any]) -> MappingSpec:
    table = tuple(tuple(r) for r in spec.get("mapping_table") or ())
    return MappingSpec(kind=spec["mapping"], k=int(spec.get("mapping_k", 1000)), seed=int(spec.get("mapping_seed", 0)),
                       table=table if spec["mapping"] == "table" else ())


def run_mapping(store: Store, record: dict[str, Any]) -> TokenMapping | None:
    """The TokenMapping a run used: ``mapping.json`` in its folder when the engine wrote one, else rebuilt
    from its spec (same rule, same vocabulary); None for runs that feed vectors or own embeddings."""
    spec = record["spec"]
    if spec.get("input_adapter") != "vocab" or spec.get("mapping") in (None, "none"):
        return None
    saved = store.workdir(record["key"]) / "mapping.json"
    if saved.is_file():
        try:
            return TokenMapping.from_json(saved.read_text(encoding="utf-8"))
        except LabError:
            pass  # an older format: rebuild below
    info = discipline_info(spec["discipline"], spec.get("discipline_params") or {})
    alphabet = None if info.input_kind == "text" else info.alphabet
    return build_mapping(_mapping_spec_of(spec), alphabet, model_vocab(spec["model"]))
