"""Child processes that a test interrupts with SIGINT, as a user's Ctrl-C would."""

from __future__ import annotations

import signal


def interruptible() -> None:
    """``preexec_fn`` of a child the test sends SIGINT: SIGINT back at its default disposition, so that Python installs
    its KeyboardInterrupt handler in the child even where the test run itself inherited SIGINT ignored (a job started in
    the background by a non-interactive shell: there the child would ignore the signal and run to the end)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
