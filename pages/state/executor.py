"""The lab and the executor as one browser session uses them: the door's :class:`Lab` handle (which store the
pages read, as data) and its :class:`Desk` (whatever this session submits, resumes or withdraws is in the
requester's name, and a student's submissions are held to the teacher's settings first)."""

from __future__ import annotations

from labcore.door.desk import Desk, desk_on, on_change
from labcore.door.runs import Lab, open_lab
from pages.state.identity import requester, student_limits
from pages.state.summary import forget_summary

on_change(forget_summary)  # a change made at any desk: the next status line reads the queue again


def get_lab() -> Lab:
    """The lab of the current cache (tests move the cache between apps)."""
    return open_lab()


def get_executor() -> Desk:
    """The process's executor on the current lab, as this browser session uses it."""
    return desk_on(get_lab(), requester(), student_limits())
