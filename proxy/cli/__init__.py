"""The ``areamem`` command line (:mod:`.main`; memory's history in :mod:`.history`)."""

from .main import main

__all__ = ["main"]
