"""The paper's four experiments (arXiv:2508.17821, section 3, Figs. 2-4) on GPT-2-family tensors.

``run(model, out, ...)`` writes figures, report.md/.html and results.json; ``attnbounds empirical``
(``empirical.cli.main``) is the command. Heavy dependencies (torch, transformers, matplotlib)
are imported only when used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run", "main"]


def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """See :func:`attnbounds.empirical.pipeline.run`."""
    from attnbounds.empirical.pipeline import run as _run

    return _run(*args, **kwargs)


def main(argv: list[str] | None = None) -> int:
    """See :func:`attnbounds.empirical.cli.main`."""
    from attnbounds.empirical.cli import main as _main

    return _main(argv)
