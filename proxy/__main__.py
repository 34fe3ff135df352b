"""``python -m proxy`` is ``areamem``."""

from .cli import main

raise SystemExit(main())
