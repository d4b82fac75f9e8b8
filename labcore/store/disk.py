"""How the store writes values to SQLite: JSON, never pickle.

diskcache pickles every value it does not store natively, and unpickling runs code: anyone who could
write into the database (a shared folder, a copied store) could run code in the app, the CLI and every
worker on their next read. :class:`JSONDisk` keeps diskcache's native strings and numbers and writes
every other value as JSON bytes, so a read can only ever give back plain data. It refuses to read a
pickle (a store from before this rule is converted once, by :mod:`.migrate`, with an unpickler that
can build nothing but plain containers).
"""

from __future__ import annotations

import io
import json
import pickle
import sqlite3
from typing import Any

import diskcache
from diskcache.core import MODE_BINARY, MODE_PICKLE, MODE_RAW, UNKNOWN

from labcore.store.errors import REPAIR_HINT, UnsafeValue


class JSONDisk(diskcache.Disk):
    """diskcache ``Disk`` whose values are native strings and numbers, or JSON (as bytes); keys are strings."""

    def store(self, value: Any, read: bool, key: Any = UNKNOWN):
        if read or type(value) in (str, int, float):
            return super().store(value, read, key=key)
        if type(value) is bytes:
            raise TypeError("the lab's store keeps JSON values: bytes are written as files in a job's folder")
        data = json.dumps(value, separators=(",", ":"), allow_nan=True).encode("utf-8")
        return super().store(data, False, key=key)  # bytes: raw in SQLite when small, else a file

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool):
        if mode == MODE_PICKLE:
            raise UnsafeValue("the store holds a pickled value, which the lab never reads (it could run code); "
                              f"run `{REPAIR_HINT}` to convert or rebuild the store")
        data = super().fetch(mode, filename, value, read)
        if read or mode not in (MODE_RAW, MODE_BINARY) or type(data) is not bytes:
            return data
        return json.loads(data.decode("utf-8"))

    def get(self, key: Any, raw: bool):
        if not raw:
            raise UnsafeValue("the store holds a pickled key, which the lab never reads (it could run code); "
                              f"run `{REPAIR_HINT}`")
        return super().get(key, raw)


class _PlainUnpickler(pickle.Unpickler):
    """Builds dicts, lists, tuples, strings, numbers, booleans and None; refuses any class or function."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from the store")


def plain_unpickle(data: bytes) -> Any:
    return _PlainUnpickler(io.BytesIO(data)).load()


def json_blob(value: Any) -> sqlite3.Binary:
    return sqlite3.Binary(json.dumps(value, separators=(",", ":"), allow_nan=True).encode("utf-8"))
