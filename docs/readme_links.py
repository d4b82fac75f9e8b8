"""A mkdocs hook: the README is the front door and links into docs/, but it is no page of the site, so mkdocs
never checks it. Every relative link of the README must name a file of the checkout (its #anchor aside); one
that does not is a warning, which --strict makes a failed build."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.readme_links")

LINK = re.compile(r"\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)


def on_pre_build(config: Any, **kwargs: Any) -> None:
    readme = Path(config.config_file_path).parent / "README.md"
    for target in LINK.findall(readme.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:|#", target):  # a web address or an anchor of the README itself
            continue
        if not (readme.parent / target.split("#")[0]).exists():
            log.warning("README.md links to %r, which is not in the checkout", target)
