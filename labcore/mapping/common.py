"""What every part of the token mappings shares: the version in every mapping key, the canonical hash that
makes those keys, and the way an error message lists its offenders."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

# Bump when a builder's output changes for the same spec, alphabet and vocabulary, so cached runs that
# depended on the old mapping are not served for the new one.
MAPPING_VERSION = 1

MAX_LISTED = 10  # offenders named in one error message; the rest are counted


def listing(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    more = len(items) - MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def sha256_of(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
