"""What differs between two snapshots, read from the changeset between them.

The changeset holds every row that differs (see :mod:`.history`), so a diff costs what
changed between the two snapshots, not the size of memory. Entities, relations and
contexts are listed as added, removed or changed, each with the fragments that support
it: a relation's own fragment; an entity's mentions and aliases that changed with it; a
context's memberships that changed with it. Names and texts come from the changeset
where it holds the row, else from memory as it is now.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from ..storage import Connection
from ..storage.changesets import UNCHANGED, Change, changes, columns, current
from ..storage.tables import contexts as context_rows
from ..storage.tables import entities as entity_rows
from ..storage.tables import fragments as fragment_rows
from ..storage.tables import relations as relation_rows
from .views import Diff, DiffRow, DiffSection, DiffSource

__all__ = ["diff_of"]

_TABLES = (
    "entities",
    "relations",
    "contexts",
    "aliases",
    "mentions",
    "fragment_contexts",
    "fragments",
)
_IDENTITY = {
    "entities": "created_at",
    "relations": "created_at",
    "contexts": "created_at",
    "fragments": "created_at",
    "mentions": "fragment_id",
    "aliases": "normalized",
}
"""The column that tells two rows under one id apart: never changed by an update of a row
(a mention never moves to another fragment; a merge moves an alias to the survivor, or
writes the merged one's spelling of it, never another normalised name)."""
_Kind = Literal["added", "removed", "changed"]
_SOURCES = 5
_TEXT = 200


class _Changes:
    """The changeset's rows by table, with the helpers that label them."""

    def __init__(self, conn: Connection, changeset: bytes) -> None:
        self.conn = conn
        self.rows: dict[str, list[Change]] = {t: [] for t in _TABLES}
        for change in changes(changeset):
            if change.table in self.rows:
                self.rows[change.table].append(change)
        self.columns = {t: columns(conn, t) for t in _TABLES if self.rows[t]}
        for table, found in self.rows.items():
            if found:
                self.rows[table] = [c for f in found for c in self._replaced(f)]
        self._names = {
            op: {
                int(str(c.key)): str(_row(c)[1])
                for c in self.rows["entities"]
                if c.op == op and _row(c)[1] is not UNCHANGED
            }
            for op in ("delete", "insert")
        }
        self._fragments = {
            op: {int(str(c.key)): _row(c) for c in self.rows["fragments"] if c.op == op}
            for op in ("delete", "insert")
        }
        self._stored: dict[int, str] = {}

    def _replaced(self, change: Change) -> list[Change]:
        """``change``, or the removal and the addition it stands for when it is an update
        of a row's identity (:data:`_IDENTITY`): a rollback freed the id, the next row
        formed took it, and the changeset between the two holds them as one row. Columns
        both rows share are read from memory when it holds one of the two."""
        names = self.columns[change.table]
        at = names.index(_IDENTITY[change.table]) if change.table in _IDENTITY else None
        if change.op != "update" or at is None or change.old is None or change.new is None:
            return [change]
        before, after = change.old[at], change.new[at]
        if after is UNCHANGED or before == after:
            return [change]
        now = _current(self.conn, change.table, change.old[0], at, (before, after))
        old = tuple(n if o is UNCHANGED else o for o, n in zip(change.old, now, strict=True))
        new = tuple(n if v is UNCHANGED else v for v, n in zip(change.new, now, strict=True))
        table = change.table
        return [Change(table, "delete", old, None), Change(table, "insert", None, new)]

    def values(self, change: Change) -> dict[str, Any]:
        names = self.columns[change.table]
        if change.op != "update":
            return {n: _json(v) for n, v in zip(names, _row(change), strict=False)}
        old, new = change.old or (), change.new or ()
        return {
            n: [_json(o), _json(v)]
            for n, o, v in zip(names, old, new, strict=False)
            if v is not UNCHANGED
        }

    def name(self, entity_id: object, op: str = "insert") -> str:
        """An entity's name on the side of the diff a row of operation ``op`` is on (a
        removed row names entities as the first snapshot held them), else as memory
        holds it now."""
        if entity_id is None or entity_id is UNCHANGED:
            return ""
        key = int(str(entity_id))
        named = self._names["delete" if op == "delete" else "insert"].get(key)
        if named is not None:
            return named
        if key not in self._stored:
            self._stored[key] = entity_rows.name_of(self.conn, key) or f"#{key}"
        return self._stored[key]

    def source(self, fragment_id: object, op: str = "insert") -> DiffSource | None:
        if fragment_id is None or fragment_id is UNCHANGED:
            return None
        fid = int(str(fragment_id))
        row = self._fragments["delete" if op == "delete" else "insert"].get(fid)
        if row is not None:
            return DiffSource(
                fragment_id=fid,
                conversation_id=str(row[2]),
                speaker=None if row[4] is None else str(row[4]),
                text=str(row[5])[:_TEXT],
            )
        label = fragment_rows.describe(self.conn, fid)
        if label is None:
            return None
        return DiffSource(
            fragment_id=fid,
            conversation_id=label.conversation_id,
            speaker=label.speaker,
            text=str(label.text)[:_TEXT],
        )

    def sources(self, fragment_ids: Iterable[object], op: str = "insert") -> list[DiffSource]:
        found = (self.source(f, op) for f in dict.fromkeys(fragment_ids))
        return [s for s in found if s is not None][:_SOURCES]


def diff_of(conn: Connection, changeset: bytes, *, first: int, second: int, limit: int) -> Diff:
    """The :class:`Diff` that ``changeset`` (from ``first``'s state to ``second``'s) makes."""
    found = _Changes(conn, changeset)
    tally: dict[str, dict[str, int]] = {}
    for change in changes(changeset):
        per = tally.setdefault(change.table, {})
        per[change.op] = per.get(change.op, 0) + 1
    return Diff(
        from_snapshot=first,
        to_snapshot=second,
        rows_changed=sum(sum(per.values()) for per in tally.values()),
        tables=tally,
        entities=_section(found, "entities", _entity_row, limit),
        relations=_section(found, "relations", _relation_row, limit),
        contexts=_section(found, "contexts", _context_row, limit),
    )


def _section(found: _Changes, table: str, build: Any, limit: int) -> DiffSection:
    kinds: dict[str, _Kind] = {"insert": "added", "delete": "removed", "update": "changed"}
    lists: dict[_Kind, list[DiffRow]] = {"added": [], "removed": [], "changed": []}
    totals: dict[_Kind, int] = {"added": 0, "removed": 0, "changed": 0}
    for change in found.rows[table]:
        kind = kinds[change.op]
        totals[kind] += 1
        if len(lists[kind]) < limit:
            lists[kind].append(build(found, change))
    return DiffSection(
        added=lists["added"], removed=lists["removed"], changed=lists["changed"], totals=totals
    )


def _entity_row(found: _Changes, change: Change) -> DiffRow:
    entity = int(str(change.key))
    supporting = [
        _row(c)[1 if t == "mentions" else 6]
        for t in ("mentions", "aliases")
        for c in found.rows[t]
        if _same_side(c, change) and _row(c)[2 if t == "mentions" else 1] == entity
    ]
    return DiffRow(
        id=entity,
        label=found.name(entity, change.op),
        values=found.values(change),
        sources=found.sources(supporting, change.op),
    )


def _relation_row(found: _Changes, change: Change) -> DiffRow:
    relation = int(str(change.key))
    if change.op != "update":
        row: Sequence[object] = _row(change)
        subject, predicate, obj, value, fragment = row[1], row[2], row[3], row[4], row[5]
    else:
        stored = relation_rows.label_row(found.conn, relation)
        subject, predicate, obj, value, fragment = stored or (None, "?", None, None, None)
    target = found.name(obj, change.op) if obj is not None else _text(value)
    predicate = _text(predicate)
    return DiffRow(
        id=relation,
        label=f"{found.name(subject, change.op) or '?'} {predicate} {target}",
        values=found.values(change),
        sources=found.sources([fragment], change.op),
    )


def _context_row(found: _Changes, change: Change) -> DiffRow:
    context = int(str(change.key))
    label = _text(_row(change)[1]) if change.op != "update" else None
    members = [
        _row(c)[0]
        for c in found.rows["fragment_contexts"]
        if _same_side(c, change) and _row(c)[1] == context
    ]
    return DiffRow(
        id=context,
        label=label or context_rows.label_of(found.conn, context) or f"#{context}",
        values=found.values(change),
        sources=found.sources(members, change.op),
    )


def _current(
    conn: Connection, table: str, key: object, at: int, identities: tuple[object, object]
) -> tuple[object, ...]:
    """Row ``key`` of ``table`` as memory holds it now when it is one of the two rows
    ``identities`` names (its columns equal to both then fill what an update leaves out);
    else a row of :data:`UNCHANGED`."""
    found = current(conn, table, key)
    if found is None or found[at] not in identities:
        return tuple(UNCHANGED for _ in columns(conn, table))
    return found


def _same_side(supporting: Change, change: Change) -> bool:
    """Whether a row added or removed supports ``change``'s side of the diff (a removed
    row is supported by what was removed with it; a changed one by either)."""
    return supporting.op != "update" and change.op in ("update", supporting.op)


def _text(value: object) -> str:
    return "?" if value is UNCHANGED else str(value)


def _row(change: Change) -> tuple[object, ...]:
    row = change.new if change.op == "insert" else change.old
    assert row is not None
    return row


def _json(value: object) -> Any:
    if value is UNCHANGED:
        return None
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value
