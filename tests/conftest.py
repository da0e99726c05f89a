"""Test configuration: hypothesis profiles, one BLAS/torch thread per xdist worker, the verdict table.

Profiles (select with ``--hypothesis-profile NAME`` or the environment variable ``ATTNBOUNDS_PROFILE``):

- ``ci`` (default, used by ``.ci/run``): derandomised, no example database, bounded examples, so the
  run is reproducible and its verdicts cannot come from examples saved by an earlier run;
- ``thorough``: random seeds, many examples, an example database under ``.hypothesis/`` (failures are
  replayed first next time) and targeting, for people who want to hunt for counterexamples.
"""

from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    max_examples=30,
    deadline=None,
    phases=(Phase.explicit, Phase.generate, Phase.target, Phase.shrink),
    print_blob=True,
    suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large),
)
settings.register_profile(
    "thorough",
    max_examples=400,
    database=DirectoryBasedExampleDatabase(os.path.join(os.path.dirname(os.path.dirname(__file__)), ".hypothesis",
                                                        "examples")),
    deadline=None,
    phases=tuple(Phase),
    print_blob=True,
    suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large),
)
settings.load_profile(os.environ.get("ATTNBOUNDS_PROFILE", "ci"))  # --hypothesis-profile overrides this


def _limit_threads() -> None:
    """One BLAS / OpenMP / torch thread per process: xdist workers share the cores."""
    for var in _THREAD_VARS:
        os.environ.setdefault(var, "1")
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        pass
    else:
        threadpool_limits(1)
    if "torch" in sys.modules:  # never import torch just for this
        sys.modules["torch"].set_num_threads(1)


def pytest_configure(config) -> None:
    # the controller sets the variables before it spawns workers (they inherit them); workers apply them too
    if getattr(config.option, "numprocesses", None) or hasattr(config, "workerinput"):
        _limit_threads()
    from tests._verdicts import VerdictTable

    config.pluginmanager.register(VerdictTable(config), "attnbounds-verdicts")


def pytest_runtest_setup(item) -> None:
    if hasattr(item.config, "workerinput") and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)  # torch imported lazily by a test: limit it now
