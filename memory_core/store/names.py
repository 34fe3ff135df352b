"""The names a store answers the trigger policy with: its aliases, and the phrases that
name the relations memory holds.

:class:`KnownNames` is the store's :class:`~memory_core.text.names.NameIndex` (what the
policy's ``mentions_entity`` rule reads): every alias, plus, for every ``has_<relation>``
claim stored, the phrases a user asks about it with ("my sister", "minha irmã", "mi
hermana" for ``has_sister``; see :mod:`memory_core.text.kinship`). It is read once when
the store opens (or its memory changes wholesale) and kept current after: formation
passes add the names they found, and :meth:`KnownNames.read_relations` reads the
relations stored since its last read, past a cursor on their ids, so keeping it current
costs what formation added.
"""

from __future__ import annotations

from ..storage import Connection, reading
from ..storage.tables import relations as relation_rows
from ..storage.tables.entities import alias_names
from ..text.names import NameIndex

__all__ = ["KnownNames"]


class KnownNames(NameIndex):
    """A store's aliases and relation phrases (see the module docstring)."""

    def __init__(self, conn: Connection) -> None:
        super().__init__(alias_names(conn))
        self._relations_read = 0
        self.read_relations(conn)

    def read_relations(self, conn: Connection) -> None:
        """Learn the relation phrases of the relations stored since the last read."""
        with reading("cannot read relations"):
            rows = relation_rows.edges_since(conn, self._relations_read)
        if rows:
            self._relations_read = int(rows[-1][0])
            self.add_relations(str(row[5]) for row in rows)
