"""Transfer Lab core: assets, disciplines, token mappings, engine, store and worker.

A plain library: nothing here imports Streamlit, so the CLI, the worker and the tests use it alike.
"""

# No OMP_WAIT_POLICY is set here: OpenMP's default waiting (spin briefly, then sleep) trains about
# 25 % faster on idle cores than PASSIVE, and a run gives up threads when other processes keep cores
# busy (labcore.cores), which is when spinning hurts. An OMP_WAIT_POLICY in the environment still rules.

__version__ = "0.1.0"
