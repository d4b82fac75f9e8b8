"""Protocols: what trains, what is frozen, re-initialised, permuted or probed (one module per protocol).

Use :data:`PROTOCOLS` (name -> :class:`Protocol`), :func:`parse_protocol_params` to turn a dict into a
protocol's frozen Params, and ``PROTOCOLS[name].apply(model, params, seed)`` (or :func:`apply_protocol`)
on a freshly built lab model, before building the optimiser. The returned :class:`ProtocolReport` lists
what trains and carries the flags the loop needs (``features_only``, ``body_eval``). A protocol may declare
a stage that runs before the training loop (``PROTOCOLS[name].stage``, given a :class:`StageInput`).
"""

from labcore.protocols.base import (
    PROTOCOLS,
    Protocol,
    ProtocolReport,
    StageInput,
    apply_protocol,
    parameter_groups,
    parse_protocol_params,
    protocol_names,
)

# Registration order is display order: the baselines, then FPT, then Tamkin et al., then ORCA.
from labcore.protocols import full, reemb, frozen, output_only  # noqa: E402,F401
from labcore.protocols import reinit_after, reinit_block, reinit_layer, permute_layers, probe  # noqa: E402,F401
from labcore.protocols import align_refine  # noqa: E402,F401

from labcore.protocols.align_refine import AlignRefineParams  # noqa: E402
from labcore.protocols.frozen import FrozenParams  # noqa: E402
from labcore.protocols.full import FullParams  # noqa: E402
from labcore.protocols.output_only import OutputOnlyParams  # noqa: E402
from labcore.protocols.permute_layers import PermuteLayersParams  # noqa: E402
from labcore.protocols.probe import ProbeParams  # noqa: E402
from labcore.protocols.reemb import ReembParams  # noqa: E402
from labcore.protocols.reinit_after import ReinitAfterParams  # noqa: E402
from labcore.protocols.reinit_block import ReinitBlockParams  # noqa: E402
from labcore.protocols.reinit_layer import ReinitLayerParams  # noqa: E402

__all__ = [
    "PROTOCOLS", "Protocol", "ProtocolReport", "StageInput", "apply_protocol", "parameter_groups",
    "parse_protocol_params", "protocol_names",
    "AlignRefineParams", "FrozenParams", "FullParams", "OutputOnlyParams", "PermuteLayersParams", "ProbeParams",
    "ReembParams", "ReinitAfterParams", "ReinitBlockParams", "ReinitLayerParams",
]
