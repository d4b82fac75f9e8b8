"""How long a claiming process (a worker, the Ray executor) lives, and the flags that say so when it is started."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from labcore.store import StoreSettings


@dataclass(frozen=True)
class Lifetime:
    """When a claiming process leaves on its own. A worker a person starts serves until stopped; one started
    for someone (a page, the API, a drive) must not outlive its use: it leaves after ``idle_exit_s`` without
    a job (0: never), and once the process ``parent_pid`` has ended (0: none), if its starter asked for that.
    Whatever started it, a process whose store folder is deleted leaves at once."""

    idle_exit_s: float = 0.0
    parent_pid: int = 0

    def arguments(self) -> tuple[str, ...]:
        """The command-line flags that give a started process this lifetime."""
        return ((("--idle-exit", f"{self.idle_exit_s:g}") if self.idle_exit_s else ())
                + (("--parent", str(self.parent_pid)) if self.parent_pid else ()))

    @classmethod
    def from_arguments(cls, args: argparse.Namespace) -> "Lifetime":
        return cls(idle_exit_s=args.idle_exit, parent_pid=args.parent)


# What a page, the API or a drive starts with: it leaves after half an hour without work.
FOR_SOMEONE = Lifetime(idle_exit_s=StoreSettings.idle_exit_s)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--idle-exit", type=float, default=0.0, metavar="SECONDS",
                        help="leave after this long without a job (default 0: never; a worker the app, the API or "
                             f"a drive starts leaves after {StoreSettings.idle_exit_s:g} s)")
    parser.add_argument("--parent", type=int, default=0, metavar="PID",
                        help="leave once the process PID has ended (what a drive asks of the workers it starts)")
