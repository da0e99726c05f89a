"""``python -m empirical ...`` is ``attnbounds empirical ...``."""

from attnbounds.empirical.cli import main

raise SystemExit(main())
