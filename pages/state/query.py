"""Query parameters and remembered choices: what a link or a reload names, and what a widget showed last.

A browser refresh loses ``st.session_state``, so what a page shows lives in ``st.query_params``; a widget's
value is dropped when its page is left, so choices are kept in keys of our own and written back before the
widget is drawn.
"""

from __future__ import annotations

from typing import Any, Sequence

import streamlit as st

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
