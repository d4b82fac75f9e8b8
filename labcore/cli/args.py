"""The spec flags shared by ``run``, ``sweep``, ``submit`` and ``tune``: one flag per RunSpec field
(``--model``, ``--init``, ``--lr`` …), ``--dparam k=v`` and ``--pparam k=v`` for discipline and protocol
parameters. In a sweep any flag takes a comma list and the sweep is their product; in ``tune`` a number flag
also takes a range to sample, ``LOW:HIGH`` or ``LOW:HIGH:log``."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any, Callable, Sequence

from labcore.errors import LabError
from labcore.runspec import (BUDGET_PARAMS, BUDGETS, COUNT_LIMIT, COUNTS, INPUT_ADAPTERS, MAPPING_KINDS, POOLINGS,
                          PRECISIONS, TABLE_FORM, TRAIN_SIZES, RunSpec, make_spec)

def add_store_argument(parser: argparse.ArgumentParser) -> None:
    """``--store DIR``: every command that reads or writes the store takes one (scripts and tests use their own)."""
    parser.add_argument("--store", default=None, help="store folder (default: <TRANSFERLAB_CACHE>/store)")


_SPEC_FIELDS = [f for f in dataclasses.fields(RunSpec)
                if f.name not in ("discipline_params", "protocol_params", "mapping_table")]


def _convert(name: str, text: str) -> Any:
    """Turn a flag's text into the RunSpec field's type."""
    default = getattr(RunSpec(), name)
    field_type = {f.name: f.type for f in dataclasses.fields(RunSpec)}[name]
    try:
        if isinstance(default, bool):
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if isinstance(default, int) or "int" in str(field_type) and "float" not in str(field_type):
            return int(text)
        if isinstance(default, float) or "float" in str(field_type):
            return float(text)
    except ValueError:
        kind = ("true or false" if isinstance(default, bool) else "a whole number"
                if isinstance(default, int) or "float" not in str(field_type) else "a number")
        if name in COUNTS:
            kind += f" from 0 to {COUNT_LIMIT - 1:,}"
        raise LabError(f"--{name.replace('_', '-')}: {text!r} is not a valid value; give {kind}") from None
    return text


def key_values(items: Sequence[str] | None, flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise LabError(f"{flag} takes key=value, got {item!r}")
        key, value = item.split("=", 1)
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def listed(lookup: Callable[[str], Any]) -> str:
    """The valid names a registry lists in its error for an unknown name: --help shows the same list (with
    the forms a name may take, such as ``tiny:<family>``) as the error, from one place."""
    try:
        lookup("?")
    except LabError as error:
        return str(error).partition("valid names: ")[2] or str(error)
    return ""


def models_help() -> str:
    from labcore.models.backbones import resolve_backbone

    return "the body: " + listed(resolve_backbone)


def disciplines_help() -> str:
    from labcore import data
    from labcore.data import glue

    return "the data: " + ", ".join(data.names()) + "; or glue-<task> (" + ", ".join(glue.names()) + ")"


def protocols_help() -> str:
    from labcore.protocols import PROTOCOLS

    return "what trains: " + listed(PROTOCOLS.__getitem__) + " (--pparam KEY=VALUE sets its switches)"


def _field_help() -> dict[str, str]:
    """--help text of the flags that name things: the valid values, as the errors list them."""
    from labcore.models import INITS

    out = {"model": models_help(), "init": listed(INITS.__getitem__), "discipline": disciplines_help(),
           "protocol": protocols_help(), "mapping": ", ".join(MAPPING_KINDS),
           "input_adapter": ", ".join(INPUT_ADAPTERS), "pooling": ", ".join(POOLINGS),
           "precision": ", ".join(PRECISIONS), "budget": ", ".join(BUDGETS),
           # argparse formats help with %: a percentage is written %%
           "train_size": (", ".join(TRAIN_SIZES) + ", or any count or percentage").replace("%", "%%")}
    out.update({f.name: ", ".join(f.metadata["choices"]) for f in BUDGET_PARAMS if "choices" in f.metadata})
    return out


def add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per RunSpec field (text; converted by spec_from_args); the flags that name things list the
    valid names in --help."""
    helps = _field_help()
    for f in _SPEC_FIELDS:
        parser.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=None, help=helps.get(f.name))
    parser.add_argument("--dparam", action="append", metavar="KEY=VALUE", help="discipline parameter")
    parser.add_argument("--pparam", action="append", metavar="KEY=VALUE", help="protocol parameter")
    parser.add_argument("--mapping-table", dest="mapping_table", default=None,
                        help="symbol:id pairs, comma separated (mapping kind table)")


def _spec_values(args: argparse.Namespace) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f in _SPEC_FIELDS:
        text = getattr(args, f.name, None)
        if text is not None:
            values[f.name] = text
    values["discipline_params"] = key_values(getattr(args, "dparam", None), "--dparam")
    values["protocol_params"] = key_values(getattr(args, "pparam", None), "--pparam")
    table = getattr(args, "mapping_table", None)
    if table:
        values["mapping_table"] = tuple(_table_row(pair) for pair in table.split(","))
    return values


def _table_row(pair: str) -> tuple[str, int]:
    symbol, colon, ident = pair.strip().rpartition(":")
    try:
        if not colon or not symbol:
            raise ValueError
        return symbol, int(ident)
    except ValueError:
        raise LabError(f"--mapping-table: {pair.strip()!r} is not SYMBOL:ID; write {TABLE_FORM}") from None


def _in_flag_words(error: LabError) -> LabError:
    """make_spec names a field (``max_length must be ...``); on the command line it is a flag (``--max-length``)."""
    text = str(error)
    for f in dataclasses.fields(RunSpec):
        if text.startswith(f"{f.name} "):
            return LabError(f"--{f.name.replace('_', '-')}{text[len(f.name):]}")
    return error


def _make_spec(**values: Any) -> RunSpec:
    try:
        return make_spec(**values)
    except LabError as error:
        raise _in_flag_words(error) from None


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    values = _spec_values(args)
    for f in _SPEC_FIELDS:
        if f.name in values:
            values[f.name] = _convert(f.name, values[f.name])
    return _make_spec(**values)


def _options(name: str, text: Any) -> list[Any]:
    """A flag's comma-separated values, each converted to the field's type."""
    return [_convert(name, v) for v in str(text).split(",")]


def specs_from_sweep_args(args: argparse.Namespace) -> list[RunSpec]:
    """The cartesian product of every comma-separated flag (and --seeds)."""
    values = _spec_values(args)
    if getattr(args, "seeds", None):
        values["seed"] = args.seeds
    lists: list[tuple[str, list[Any]]] = []
    for f in _SPEC_FIELDS:
        if f.name in values:
            lists.append((f.name, _options(f.name, values[f.name])))
    specs = [dict(discipline_params=values["discipline_params"], protocol_params=values["protocol_params"],
                  mapping_table=values.get("mapping_table", ()))]
    for name, options in lists:
        specs = [{**s, name: option} for s in specs for option in options]
    return [_make_spec(**s) for s in specs]


RANGE_FORM = "LOW:HIGH (uniform) or LOW:HIGH:log (log-uniform)"


def search_from_args(args: argparse.Namespace) -> tuple[RunSpec, dict[str, tuple[Any, ...]]]:
    """A hyper-parameter search space from the spec flags, in Ray Tune's words, and the spec it varies.

    ``--lr 1e-5:1e-3:log`` samples a number field log-uniformly (``("loguniform", low, high)``),
    ``--warmup-ratio 0:0.1`` uniformly (``("uniform", low, high)``), and ``--warmup-ratio 0,0.06,0.1`` tries
    each value (``("grid_search", values)``, as a sweep's comma list does); every other flag is fixed in the
    returned spec. Each range's ends and each listed value are checked as a spec before anything runs.
    """
    values = _spec_values(args)
    searched: dict[str, tuple[Any, ...]] = {}
    for f in _SPEC_FIELDS:
        text = str(values.get(f.name, ""))
        flag = f"--{f.name.replace('_', '-')}"
        if ":" in text and "float" in str(f.type):
            low, high, *log = text.split(":")
            if log not in ([], ["log"]):
                raise LabError(f"{flag}: {text!r} is not a range; write {RANGE_FORM}")
            low, high = _convert(f.name, low), _convert(f.name, high)
            if not low < high or (log and low <= 0):
                raise LabError(f"{flag}: the range {text!r} must run from a lower to a higher value"
                               + (", both above 0 on a log scale" if log else ""))
            searched[f.name] = ("loguniform" if log else "uniform", low, high)
        elif "," in text:
            searched[f.name] = ("grid_search", tuple(_options(f.name, text)))
        else:
            continue
        del values[f.name]
    for f in _SPEC_FIELDS:
        if f.name in values:
            values[f.name] = _convert(f.name, values[f.name])
    base = _make_spec(**values)
    for name, (how, *rest) in searched.items():
        for value in rest[0] if how == "grid_search" else rest:
            _make_spec(**{**values, name: value})
    return base, searched
