"""Names as people use them, in real use (issue 29, item 3).

Through the real proxy (default policy, the fake upstream's ``recall`` model answering
from the memory block it is shown) with the real ``openai`` client: a group chat whose
turns carry speaker names (``name``) in which Tom calls Katarzyna "Kate". A later
question "What does Kate do for work?" in another conversation consults memory, is read
as a question about Katarzyna, and is shown her turn about her job; ``GET
/memory/entities`` lists "Kate" among her aliases, as a vocative, with the fragments
where Tom said it.
"""

from __future__ import annotations

from typing import Any

import pytest

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy
from .live import live
from .test_addressing import KATE

pytestmark = pytest.mark.e2e


def _group_chat() -> list[dict[str, Any]]:
    speakers = ["Katarzyna", "Tom"]
    return [
        {"role": "user", "name": speakers[i % 2], "content": text} for i, text in enumerate(KATE)
    ]


async def test_a_nickname_question_through_the_proxy(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    user = await live(make_proxy, upstream)
    await user.chat("Nice chatting, everyone.", history=_group_chat(), conversation="group")
    entities = {e["name"]: e for e in await user.entities()}
    kate = [a for a in entities["Katarzyna"]["aliases"] if a["alias"] == "Kate"]
    assert [a["source"] for a in kate] == ["vocative"]
    assert kate[0]["fragment_id"] in kate[0]["used_in"] and len(kate[0]["used_in"]) >= 2
    assert "Kate" not in entities  # no entity of her own: the name is Katarzyna's

    turn = await user.chat("What does Kate do for work?")
    assert turn.consulted, turn.receipt.get("decision")
    assert "nurse" in turn.block
    assert turn.receipt["graph_area"]["named"] == {"Kate": ["Katarzyna"]}
