"""The transfer atlas of the store, as the note reports it: every cell's measured gain beside its LogME estimate,
and Kendall's tau between the two.

    python bench/atlas_report.py [PROTOCOL]

Queues the LogME job of every cell that lacks one and runs them in this process (seconds each), then
prints the grid as a table and the agreement sentence.
"""

from __future__ import annotations

import sys

from labcore.recipes import atlas
from labcore.execution.executor import LocalExecutor
from labcore.store import Store
from labcore.execution.worker import Worker


def main() -> None:
    protocol = atlas.Protocol(sys.argv[1]) if len(sys.argv) > 1 else atlas.Protocol()
    store = Store()
    records = atlas.finished_runs(store)
    models, _ = atlas.present(records)
    disciplines = sorted({r.spec["discipline"] for r in records})
    grid = atlas.build_atlas(records, models=models, disciplines=disciplines, protocol=protocol)
    specs = [c.logme_spec for c in grid.cells.values() if c.comparison is not None]
    LocalExecutor(store, autostart=False).submit_group(atlas.LOGME_GROUP, specs)
    Worker(store, exit_when_idle=True).serve()
    grid = grid.with_estimates(atlas.estimates_from_store(store, specs))
    table = atlas.atlas_table(grid)
    shown = ["model", "discipline", "n_pretrained", "n_random", "pretrained", "random", "gain", "ci_low", "ci_high",
             "greyed", "logme_pretrained", "logme_random", "estimated_gain"]
    print(table[table["n_pretrained"] + table["n_random"] > 0][shown].to_string(float_format=lambda x: f"{x:.3f}"))
    print(grid.agreement.sentence())


if __name__ == "__main__":
    main()
