"""The door is narrow: every public name of every ``labcore.door`` module is data, a function, or a class of
rows, never a ``Store``, an executor or another class of the engine, a torch object, or a module."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import types
import typing

import labcore.door
from labcore.store import Store

MACHINERY = ("labcore.engine", "labcore.execution", "labcore.store", "torch")


def door_modules() -> list[types.ModuleType]:
    names = [info.name for info in pkgutil.iter_modules(labcore.door.__path__)]
    return [importlib.import_module(f"labcore.door.{name}") for name in sorted(names)]


def public(module: types.ModuleType) -> dict[str, typing.Any]:
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    return {name: getattr(module, name) for name in names}


def machinery(value: typing.Any) -> str:
    """Why ``value`` is machinery, or "" where it is data, a function or a class of rows."""
    cls = value if isinstance(value, type) else type(value)
    home = getattr(cls, "__module__", "") or ""
    if cls is Store or (isinstance(value, type) and issubclass(value, Store)):
        return "a Store"
    if not home.startswith(MACHINERY):
        return ""
    if home.startswith("labcore.store") and dataclasses.is_dataclass(cls):
        return ""  # a record of the store (JobRecord, JobStatus, DeletePlan, Usage): rows
    return f"a {home}.{cls.__name__}"


def returned(function: typing.Any) -> list[typing.Any]:
    """The classes a function's return annotation names (none where it has no readable annotation)."""
    try:
        hint = typing.get_type_hints(function).get("return")
    except Exception:
        return []
    out, todo = [], [hint]
    while todo:
        hint = todo.pop()
        if isinstance(hint, type):
            out.append(hint)
        todo.extend(typing.get_args(hint))
    return out


def test_the_door_hands_out_no_store_executor_engine_class_torch_object_or_module():
    found = []
    for module in door_modules():
        for name, value in public(module).items():
            if isinstance(value, types.ModuleType):
                found.append(f"{module.__name__}.{name} is the module {value.__name__}")
                continue
            if why := machinery(value):
                found.append(f"{module.__name__}.{name} is {why}")
            if inspect.isfunction(value):
                found += [f"{module.__name__}.{name}() returns {why}" for c in returned(value) if (why := machinery(c))]
            if isinstance(value, type) and value.__module__.startswith("labcore.door"):
                for attr, member in vars(value).items():
                    target = member.fget if isinstance(member, property) else member
                    if not attr.startswith("_") and inspect.isfunction(target):
                        found += [f"{module.__name__}.{name}.{attr} returns {why}" for c in returned(target)
                                  if (why := machinery(c))]
    assert not found, "\n".join(found)

