"""The command line run in-process for the tests: exit code, standard output and standard error."""

from __future__ import annotations

import contextlib
import io

from attnbounds.theory.running.cli import main


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``attnbounds ARGV`` in this process: ``(exit code, stdout, stderr)`` (a ``SystemExit`` is an exit code)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()
