"""examples/quickstart.ipynb runs top to bottom (nbclient, a real kernel) on tiny models, in a cache of its own
that shares the fetched assets, and leaves what it promises: figures, event files, a model folder."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
from helpers import share_assets
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parent.parent
SETTING = 'MODEL, STEPS = "tiny:bert", 150'


def test_the_quickstart_notebook_executes_top_to_bottom(tmp_path, monkeypatch, fetched_assets):
    monkeypatch.setenv("TRANSFERLAB_CACHE", str(share_assets(tmp_path / "cache")))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    notebook = nbformat.read(REPO / "examples" / "quickstart.ipynb", as_version=4)
    # Its parameters cell, shortened: 150 steps leave the majority class (for a reader), 30 check every cell.
    parameters = next(cell for cell in notebook.cells if SETTING in cell.source)
    parameters.source = parameters.source.replace(SETTING, 'MODEL, STEPS = "tiny:bert", 30')
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) == 2  # the bars and the curves
    assert len(list((tmp_path / "quickstart-tensorboard").glob("*/*/events.out.tfevents.*"))) == 4
    assert (tmp_path / "quickstart-model" / "README.md").is_file()
    assert "'label':" in notebook.cells[-1].outputs[-1]["data"]["text/plain"]
