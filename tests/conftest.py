"""Test configuration: the oracle's hypothesis profiles and one BLAS/torch thread per xdist worker.

Profiles (select with ``--hypothesis-profile NAME`` or the environment variable ``ATTNBOUNDS_PROFILE``):
``ci`` (default, used by ``.ci/run``) and ``thorough`` (see :func:`tests.oracle.check.register_profiles`).
The verdict table at the end of a run comes from the attnbounds pytest plugin (:mod:`attnbounds.pytest_plugin`).
"""

from __future__ import annotations

import os
import sys

from hypothesis import settings

from tests.oracle.check import register_profiles

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")

register_profiles(os.path.join(os.path.dirname(os.path.dirname(__file__)), ".hypothesis", "examples"))
settings.load_profile(os.environ.get("ATTNBOUNDS_PROFILE", "ci"))  # --hypothesis-profile overrides this
# the CLI's verify starts one worker per core by itself for 8 or more readings; xdist already shares the cores, so the
# tests run it in process unless a test asks for a scheduler (tests/acceptance/test_cluster.py)
os.environ.setdefault("ATTNBOUNDS_SCHEDULER", "none")


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


def pytest_runtest_setup(item) -> None:
    if hasattr(item.config, "workerinput") and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)  # torch imported lazily by a test: limit it now


def pytest_collection_modifyitems(items) -> None:
    """Tests marked ``early`` first (a stable sort): under ``pytest -n`` a test of minutes started last would run
    alone at the end, one core idle."""
    items.sort(key=lambda item: item.get_closest_marker("early") is None)
