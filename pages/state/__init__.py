"""What the pages keep and read between reruns: the lab and the executor as this session uses them, who is
asking, query parameters and remembered choices, live curves and progress, and background tasks.

Why these exist (Streamlit facts): a rerun interrupts the script thread, so nothing slow runs in it;
``st.session_state`` is lost on a browser refresh, so the run or group a page shows lives in
``st.query_params``; a widget's value is dropped when its page is left, so choices are kept in keys of
our own and written back before the widget is drawn. No torch is imported here or by the pages.

Each module holds one of these jobs; this package names them all, so a page reads ``state.<name>``.
"""

from __future__ import annotations

from pages.state.eta import Progress, progress
from pages.state.executor import get_executor, get_lab
from pages.state.identity import (TEACHER, classroom_limits, is_teacher, passcode_guard, requester, sign_in_ids,
                                  student_limits, teacher_passcode, who_label)
from pages.state.query import keep, persist_widgets, qp, qp_external, remember, remembered, set_qp
from pages.state.streams import StreamCache, run_curves, stream_cache
from pages.state.summary import SUMMARY_COST_SHARE, SUMMARY_TTL_S, worker_summary
from pages.state.tasks import Task, get_task, start_task

__all__ = ["SUMMARY_COST_SHARE", "SUMMARY_TTL_S", "TEACHER", "Progress", "StreamCache", "Task",
           "classroom_limits", "get_executor", "get_lab", "get_task", "is_teacher", "keep", "passcode_guard",
           "persist_widgets", "progress", "qp", "qp_external", "remember", "remembered", "requester", "run_curves",
           "set_qp", "sign_in_ids", "start_task", "stream_cache", "student_limits", "teacher_passcode",
           "who_label", "worker_summary"]
