"""Transfer Lab core: assets, disciplines, token mappings, engine, store and worker.

A plain library: nothing here imports Streamlit, so the CLI, the worker and the tests use it alike.
"""

# No OMP_WAIT_POLICY is set here: OpenMP's default waiting (spin briefly, then sleep) trains about
# 25 % faster on idle cores than PASSIVE, and a run gives up threads when other processes keep cores
# busy (labcore.machine.cores), which is when spinning hurts. An OMP_WAIT_POLICY in the environment still rules.

__version__ = "0.1.0"

# The Python API (labcore.api), reached as ``labcore.runs(...)`` without importing it, pandas or the store
# until first use, so ``import labcore`` stays light for the worker and the pages. run, sweep, spec, compare
# and atlas share their names with modules of this package, so they are reached as ``labcore.api.run`` (or
# ``import labcore.api as lab``); every other public function of the API is here too.
_API = ("analyze", "curves", "export_model", "export_tensorboard", "recipe", "records", "runs", "specs", "submit",
        "wait")


def __getattr__(name: str):
    if name == "api" or name in _API:
        import importlib

        api = importlib.import_module("labcore.api")
        return api if name == "api" else getattr(api, name)
    raise AttributeError(f"module 'labcore' has no attribute {name!r}")
