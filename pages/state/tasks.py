"""Background tasks (fetching assets, building data sets): threads of the server process, so no page waits."""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from labcore.errors import LabError

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
