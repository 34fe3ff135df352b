"""Two topics told one after the other: four turns about bread, then four about football,
for the tests of segmentation and of the default encoder."""

from __future__ import annotations

from memory_core import LogMessage, MemoryStore

COOKING = [
    "I baked sourdough bread this morning with a new starter.",
    "The crust came out dark and crackly, the crumb very open.",
    "Next time I will add rye flour and let the dough rise longer.",
    "My oven runs hot, so I lowered it to 230 degrees for the bake.",
]
FOOTBALL = [
    "Benfica won the derby two nil on Saturday night.",
    "The second goal was a header from a corner in the last minute.",
    "Our striker has scored in five matches in a row now.",
    "The league title will be decided in the final round in May.",
]


def tell_both(store: MemoryStore) -> None:
    """The eight turns, a minute apart, ingested into ``c1`` and formed."""
    history = [
        LogMessage({"role": "user", "content": text}, 1_700_000_000.0 + 60 * i)
        for i, text in enumerate(COOKING + FOOTBALL)
    ]
    store.append(history, conversation="c1", source="ingest")
    store.form_all()
