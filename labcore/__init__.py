"""Transfer Lab core: assets, disciplines, token mappings, engine, store and worker.

A plain library: nothing here imports Streamlit, so the CLI, the worker and the tests use it alike.
"""

__version__ = "0.1.0"
