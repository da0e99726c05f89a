"""``python -m proofs [IDS...]``: replay the derivations (same as ``attnbounds prove``)."""

import sys

from proofs.cli import main

sys.exit(main())
