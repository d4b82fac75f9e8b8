"""Transfer Lab core: assets, disciplines, token mappings, engine, store and worker.

A plain library: nothing here imports Streamlit, so the CLI, the worker and the tests use it alike.
"""

import os

# Set before torch loads its OpenMP runtime (labcore is imported first everywhere): threads that
# spin-wait lose badly whenever another process shares the cores. Measured on 2 cores under load: a
# tiny model's step took 2 s instead of 0.05 s, a MiniLM step 2-3x longer. Passive waiting costs
# little on an idle machine. An explicit setting in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
