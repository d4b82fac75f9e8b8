"""A griffe extension for the API reference: the library's docstrings are written for ``help()`` and Sphinx's
conventions (roles such as :func:`name`, reStructuredText simple tables), while mkdocstrings renders Markdown.
It rewrites the two before they are rendered, so the docstrings stay as they are: a role becomes inline code
of its target, and a simple table a Markdown table."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|data|attr|exc|obj|const):`~?([^`]+)`")
RULE = re.compile(r"^\s*=+(?:\s+=+)+\s*$")  # a simple table's border: runs of '=' with spaces between


def roles(text: str) -> str:
    return ROLE.sub(r"`\1`", text)


def table(block: list[str]) -> list[str]:
    """A simple table (its borders included) as Markdown: a line with an empty first column continues the row
    above, and a border between rows ends the header."""
    starts = [m.start() for m in re.finditer(r"=+", block[0])]
    spans = list(zip(starts, starts[1:] + [None]))
    rows: list[list[str]] = []
    header: list[str] = []
    for line in block[1:-1]:
        if RULE.match(line):
            header, rows = rows[0] if rows else [], []
            continue
        cells = [line[a:b].strip() for a, b in spans]
        if rows and not cells[0]:
            rows[-1] = [f"{old} {new}".strip() for old, new in zip(rows[-1], cells)]
        else:
            rows.append(cells)
    header = header or [""] * len(spans)
    lines = [header] + [["---"] * len(spans)] + rows
    return ["", *("| " + " | ".join(roles(cell) for cell in cells) + " |" for cells in lines), ""]


def markdown(text: str) -> str:
    """``text`` with its roles as inline code and its simple tables as Markdown tables."""
    lines = text.split("\n")
    out: list[str] = []
    block: list[str] = []
    for i, line in enumerate(lines):
        if block or RULE.match(line):
            block.append(line)
            last = i + 1 == len(lines) or not lines[i + 1].strip()
            if len(block) > 1 and RULE.match(line) and last:  # the table's bottom border
                out += table(block)
                block = []
        else:
            out.append(roles(line))
    return "\n".join(out + block)


class RstDocstrings(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
