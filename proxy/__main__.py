"""``python -m proxy`` is ``areamem``."""

from .cli.main import main

raise SystemExit(main())
