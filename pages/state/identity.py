"""Who is asking: a browser session (or a signed-in user), and whether it is the teacher (the passcode of
``.streamlit/secrets.toml``), with the class's limits for everyone else."""

from __future__ import annotations

import hmac
import secrets
import threading

import streamlit as st

from labcore.door.runs import SECRETS_TABLE, ClassroomLimits, PasscodeGuard

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
_GUARDS_LOCK = threading.Lock()


def passcode_guard() -> PasscodeGuard:
    """The server's one guard on the passcode (per setting, so a changed secrets.toml takes effect)."""
    limits = classroom_limits()
    setting = (limits.passcode_attempts, limits.passcode_pause_s)
    with _GUARDS_LOCK:
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
