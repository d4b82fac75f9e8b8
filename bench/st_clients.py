"""Clients that speak Streamlit's own protocol to the app, without a browser: many students on one machine.

A browser costs a core; a room of them cannot share two cores with the server it measures. This client does
what the browser's frontend does on the wire and nothing more: it opens ``/_stcore/stream`` (a websocket,
subprotocol ``streamlit``), asks for a page with a ``rerun_script`` BackMsg, reads the ForwardMsgs (protobuf)
that build the page, keeps the page's elements by their delta path, and reruns each fragment at the interval
the server's ``auto_rerun`` message gives (what keeps a page's live curves moving). It can press a button
or set a widget by its label, as a student would. A dropped connection (the server killed or restarted) is
retried with a growing pause, and the client asks for its page again.

Used by ``bench/soak.py`` (students watching through a term of faults). Needs the ``websockets`` package
(installed with Streamlit) and Streamlit's own protobuf modules.

    python bench/st_clients.py --url http://127.0.0.1:8501 --clients 30 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

SHARED_CACHE: dict[str, Any] = {}
RETRY_S = (0.5, 1.0, 2.0, 4.0, 8.0)  # pauses before reconnecting after a dropped connection, then the last again


@dataclass
class ClientStats:
    """What one client saw: counts, and the seconds it spent without a connection."""

    connects: int = 0
    drops: int = 0  # connections lost after the client had one
    refused: int = 0  # tries before the first connection (a server still starting), not counted as drops
    runs_finished: int = 0  # script_finished messages: the page (or a fragment) was drawn to its end
    deltas: int = 0  # elements and blocks the server sent
    fragment_reruns: int = 0  # auto reruns this client asked for
    exceptions: int = 0  # exception elements: the page raised (a server-side error a student would see)
    offline_s: float = 0.0
    first_page_s: float | None = None  # from the first connect to the first finished run
    errors: list[str] = field(default_factory=list)


class StudentClient:
    """One browser session's worth of protocol: a page, its fragments' reruns, its widgets."""

    def __init__(self, url: str, page: str = "", query: str = "", follow_query: bool = False) -> None:
        self.stream = url.replace("http://", "ws://").replace("https://", "wss://").rstrip("/") + "/_stcore/stream"
        self.page = page  # the page's url path ("" for the main page), e.g. "runs"
        self.query = query
        # follow the query string the server sets (st.query_params), as a browser's address bar does: a page
        # that keeps who a student is in the address needs it on every later rerun
        self.follow_query = follow_query
        self.stats = ClientStats()
        self.elements: dict[tuple[int, ...], Any] = {}  # delta path -> Element of the last run
        self._pages: dict[str, str] = {}  # url path -> page script hash
        self._fragments: dict[str, float] = {}  # fragment id -> rerun interval (s)
        self._ws: Any = None
        # hash -> ForwardMsg the server may refer to again; shared by the clients of this process, as the server
        # may refer one session to a message another session received (a browser's cache is per browser, but
        # these clients all stand for browsers of one machine)
        self._cached = SHARED_CACHE

    # ------------------------------------------------------------------------------------------ sending
    async def _send(self, msg: BackMsg) -> None:
        await self._ws.send(msg.SerializeToString())

    def _rerun(self, fragment: str = "", widgets: list[Any] = ()) -> BackMsg:
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query
        state.page_script_hash = self._pages.get(self.page, "")
        state.page_name = self.page
        if fragment:
            state.fragment_id = fragment
            state.is_auto_rerun = True
        for widget in widgets:
            state.widget_states.widgets.append(widget)
        return msg

    async def press(self, label: str) -> bool:
        """Press the button labelled ``label`` (True if the page has one)."""
        for element in list(self.elements.values()):
            if element.WhichOneof("type") == "button" and element.button.label == label:
                msg = self._rerun()
                widget = msg.rerun_script.widget_states.widgets.add()
                widget.id, widget.trigger_value = element.button.id, True
                await self._send(msg)
                return True
        return False

    async def submit(self, values: dict[str, Any], label: str = "") -> bool:
        """Set the widgets labelled as ``values``' keys (text inputs, sliders, radios by option) and press the
        button labelled ``label`` in the same rerun, as a form's submit does ("": only set them). False if a
        widget or the button is not on the page."""
        msg = self._rerun()
        widgets = msg.rerun_script.widget_states.widgets
        found = set()
        for element in list(self.elements.values()):
            kind = element.WhichOneof("type")
            if kind not in ("text_input", "slider", "radio", "button"):
                continue
            proto = getattr(element, kind)
            if kind == "button" and proto.label == label:
                widget = widgets.add()
                widget.id, widget.trigger_value = proto.id, True
                found.add(label)
            elif kind != "button" and proto.label in values:
                widget, value = widgets.add(), values[proto.label]
                widget.id = proto.id
                if kind == "text_input":
                    widget.string_value = str(value)
                elif kind == "slider":
                    widget.double_array_value.data.append(float(value))
                else:
                    widget.int_value = list(proto.options).index(value)
                found.add(proto.label)
        if found != set(values) | ({label} if label else set()):
            return False
        await self._send(msg)
        return True

    async def submit_soon(self, values: dict[str, Any], label: str = "", timeout_s: float = 60.0) -> bool:
        """:meth:`submit` once the widgets and the button are all on the page: a form arrives over several deltas,
        and under load its button can come a page run after its inputs. False if they never did in ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not await self.submit(values, label):
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.5)
        return True

    def texts(self) -> list[str]:
        """The page's markdown, text and heading bodies as drawn by the last run."""
        out = []
        for element in self.elements.values():
            kind = element.WhichOneof("type")
            if kind in ("markdown", "text", "heading"):
                out.append(getattr(element, kind).body)
        return out

    # ---------------------------------------------------------------------------------------- receiving
    def _read(self, raw: bytes) -> None:
        msg = ForwardMsg()
        msg.ParseFromString(raw)
        kind = msg.WhichOneof("type")
        # The server sends an element it sent this session before as a reference to it (ForwardMsg caching):
        # keep every cacheable message by its hash and read a reference as the message, at the reference's path.
        if msg.hash:
            self._cached[msg.hash] = msg
        elif kind == "ref_hash" and msg.ref_hash in self._cached:
            original = ForwardMsg()
            original.CopyFrom(self._cached[msg.ref_hash])
            original.metadata.CopyFrom(msg.metadata)
            msg, kind = original, original.WhichOneof("type")
        if kind == "navigation":
            self._pages = {p.url_pathname: p.page_script_hash for p in msg.navigation.app_pages}
        elif kind == "auto_rerun":
            self._fragments[msg.auto_rerun.fragment_id] = msg.auto_rerun.interval
        elif kind == "stop_auto_rerun":
            for fragment in msg.stop_auto_rerun.fragment_ids or list(self._fragments):
                self._fragments.pop(fragment, None)
        elif kind == "page_info_changed" and self.follow_query:
            self.query = msg.page_info_changed.query_string
        elif kind == "delta":
            self.stats.deltas += 1
            if msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                self.elements[tuple(msg.metadata.delta_path)] = element
                if element.WhichOneof("type") == "exception":
                    self.stats.exceptions += 1
                    self.stats.errors.append(element.exception.message[:200])
        elif kind == "script_finished":
            self.stats.runs_finished += 1

    # ------------------------------------------------------------------------------------------ a session
    async def run(self, until: float, actions: Any = None) -> ClientStats:
        """Stay on the page until the clock reads ``until`` (reconnecting as needed); ``actions(client)``, a
        coroutine, runs once the first page is drawn (press a button, set a value)."""
        started = time.time()
        attempt = 0
        acted = False
        while time.time() < until:
            try:
                async with websockets.connect(self.stream, subprotocols=["streamlit"], max_size=None,
                                              open_timeout=20) as ws:
                    self._ws = ws
                    self.stats.connects += 1
                    attempt = 0
                    self._fragments.clear()
                    await self._send(self._rerun())
                    if self._pages.get(self.page) is None and self.page:
                        # The page's hash comes with the first navigation message: ask again once it is known.
                        await self._await_navigation(ws, until)
                        await self._send(self._rerun())
                    acted = await self._serve(ws, until, started, actions, acted)
            except (OSError, asyncio.TimeoutError, websockets.WebSocketException) as exc:
                if self.stats.connects:
                    self.stats.drops += 1
                else:
                    self.stats.refused += 1
                pause = RETRY_S[min(attempt, len(RETRY_S) - 1)]
                attempt += 1
                if len(self.stats.errors) < 20:
                    self.stats.errors.append(f"{type(exc).__name__}: {exc}"[:200])
                lost = time.time()
                await asyncio.sleep(max(0.0, min(pause, until - time.time())))
                self.stats.offline_s += time.time() - lost
        return self.stats

    async def _await_navigation(self, ws: Any, until: float) -> None:
        while not self._pages and time.time() < until:
            self._read(await asyncio.wait_for(ws.recv(), 30))

    async def _serve(self, ws: Any, until: float, started: float, actions: Any, acted: bool) -> bool:
        due: dict[str, float] = {}
        while time.time() < until:
            now = time.time()
            for fragment, interval in list(self._fragments.items()):
                if due.setdefault(fragment, now + interval) <= now:
                    due[fragment] = now + interval
                    self.stats.fragment_reruns += 1
                    await self._send(self._rerun(fragment))
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=0.25)
            except asyncio.TimeoutError:
                continue
            self._read(raw)
            if self.stats.runs_finished and self.stats.first_page_s is None:
                self.stats.first_page_s = time.time() - started
            if actions is not None and not acted and self.stats.runs_finished:
                acted = True
                await actions(self)
        return acted


async def watch(url: str, clients: int, seconds: float, page: str = "") -> list[ClientStats]:
    """``clients`` students on ``page`` for ``seconds``, all at once; each one's stats."""
    until = time.time() + seconds
    room = [StudentClient(url, page) for _ in range(clients)]
    return list(await asyncio.gather(*(c.run(until) for c in room)))


def summary(stats: list[ClientStats]) -> dict[str, float]:
    """A room's figures: how many stayed live, their runs, drops and time offline."""
    live = sum(1 for s in stats if s.runs_finished > 1)
    return {"clients": len(stats), "live": live, "runs": sum(s.runs_finished for s in stats),
            "drops": sum(s.drops for s in stats), "refused_before_first": sum(s.refused for s in stats),
            "exceptions": sum(s.exceptions for s in stats),
            "offline_s": round(sum(s.offline_s for s in stats), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8501")
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--page", default="", help="the page's url path (default: the main page)")
    args = parser.parse_args()
    print(summary(asyncio.run(watch(args.url, args.clients, args.seconds, args.page))))


if __name__ == "__main__":
    main()
