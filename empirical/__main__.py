"""``python -m empirical ...`` is ``attnbounds empirical ...``."""

from empirical.cli import main

raise SystemExit(main())
