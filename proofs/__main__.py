"""``python -m attnbounds.proofs [IDS...]``: replay the derivations (same as ``attnbounds prove``)."""

import sys

from attnbounds.proofs.cli import main

sys.exit(main())
