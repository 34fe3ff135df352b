"""Corrections by meaning and forgetting by target, in real use (issue 27, point 4).

Through the real proxy (default policy, the fake upstream's ``recall`` model answering
from the memory block it is shown), in English, Portuguese and Spanish:

- a correction, whatever its wording ("Sorry, I was wrong", "my mistake", "enganei-me",
  "erro meu", "me equivoqué", "me confundí", "not X but Y", "não X, mas Y", "no X sino
  Y"), supersedes the claim it corrects: the block shows ``Changed: ...; superseded:
  ...``, never ``Disputed:``, and the answer is the corrected value;
- ``/memory forget <words>`` first lists what it would forget (what asserts the words)
  and what it keeps (a correction that negates them), forgets nothing until
  ``/memory forget confirm``, and a narrower confirm forgets only the listed ids named.
"""

from __future__ import annotations

import re
import unicodedata

import pytest

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy
from .live import Live, live

pytestmark = pytest.mark.e2e


def _plain(text: str) -> str:
    """``text`` case-folded and without diacritics ("Valência" reads "valencia")."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in folded if not unicodedata.combining(c))


def _sections(listing: str) -> tuple[str, str]:
    """The ``Would forget`` and ``Would keep`` parts of a forget's listing."""
    assert "Nothing is forgotten until you confirm" in listing, listing
    forget, _, keep = listing.partition("Would keep")
    return forget, keep


def _id_of(reply: str, text: str) -> int:
    """The fragment id a reply lists for the fragment holding ``text``."""
    for line in reply.splitlines():
        if text in line:
            found = re.search(r"#(\d+)", line)
            assert found is not None, line
            return int(found.group(1))
    raise AssertionError(f"{text!r} not in {reply!r}")


async def _texts(user: Live, query: str) -> list[str]:
    return [str(h["text"]) for h in await user.search(query)]


# --- a correction is a change -----------------------------------------------------------------

TRIAL_CHANGES = [
    ("Tom lives in Madrid.", "Sorry, I was wrong: Tom lives in Valencia.", "Where does Tom live?"),
    ("O Tom mora em Madrid.", "Desculpa, enganei-me: o Tom mora em Valência.", "Onde mora o Tom?"),
    ("Tom vive en Madrid.", "Perdón, me equivoqué: Tom vive en Valencia.", "¿Dónde vive Tom?"),
]


def _shows_the_change(block: str) -> None:
    plain = _plain(block)
    assert re.search(
        r"changed: tom lives in valencia \[\d+\]; superseded: tom lives in madrid", plain
    )
    assert "disputed:" not in plain


@pytest.mark.parametrize(("said", "correction", "asked"), TRIAL_CHANGES)
async def test_a_correction_in_another_conversation_is_a_change_not_a_dispute(
    make_proxy: MakeProxy, upstream: FakeUpstream, said: str, correction: str, asked: str
) -> None:
    user = await live(make_proxy, upstream)
    await user.say(said)
    await user.say(correction)
    turn = await user.chat("Where does Tom live?")
    assert turn.consulted
    _shows_the_change(turn.block)
    assert "valencia" in _plain(turn.answer) and "madrid" not in _plain(turn.answer)
    in_its_language = await user.chat(asked)  # the change is shown, whatever the language
    _shows_the_change(in_its_language.block)


@pytest.mark.parametrize(
    ("said", "correction"),
    [
        ("Tom lives in Madrid.", "My mistake, Tom lives in Valencia."),
        ("Tom lives in Madrid.", "Tom lives in Valencia, not Madrid."),
        ("Tom lives in Madrid.", "Tom doesn't live in Madrid but in Valencia."),
        ("O Tom mora em Madrid.", "Erro meu: o Tom mora em Valência."),
        ("O Tom mora em Madrid.", "O Tom não mora em Madrid, mas em Valência."),
        ("Tom vive en Madrid.", "Perdón, me confundí: Tom vive en Valencia."),
        ("Tom vive en Madrid.", "Tom no vive en Madrid sino en Valencia."),
    ],
)
async def test_a_correction_worded_otherwise_is_a_change_too(
    make_proxy: MakeProxy, upstream: FakeUpstream, said: str, correction: str
) -> None:
    user = await live(make_proxy, upstream)
    await user.say(said)
    await user.say(correction)
    turn = await user.chat("Where does Tom live?")
    _shows_the_change(turn.block)
    assert "valencia" in _plain(turn.answer)


async def test_two_homes_said_without_a_correction_stay_disputed(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    """The other side of the rule: no marker and no contrast, no change is chosen."""
    user = await live(make_proxy, upstream)
    await user.say("Tom lives in Madrid.")
    await user.say("Tom lives in Valencia.")
    block = _plain((await user.chat("Where does Tom live?")).block)
    assert "disputed: tom lives in valencia" in block and "changed:" not in block


# --- forgetting by target ---------------------------------------------------------------------

TRIAL_FORGETS = [
    (
        "My sister Ana lives in Lisbon and runs a bakery.",
        "Actually Ana moved to Porto, not Lisbon.",
        "Ana and I had lunch in Lisbon in May.",
        "Lisbon",
    ),
    (
        "A minha irmã Ana mora em Lisboa e tem uma padaria.",
        "Na verdade, a Ana mudou-se para o Porto, não para Lisboa.",
        "A Ana e eu almoçámos em Lisboa em maio.",
        "Lisboa",
    ),
    (
        "Mi hermana Ana vive en Lisboa y tiene una panadería.",
        "En realidad Ana se mudó a Oporto, no a Lisboa.",
        "Ana y yo comimos en Lisboa en mayo.",
        "Lisboa",
    ),
]


@pytest.mark.parametrize(("said", "correction", "_other", "word"), TRIAL_FORGETS)
async def test_forget_lists_what_says_the_word_and_never_forgets_the_correction(
    make_proxy: MakeProxy,
    upstream: FakeUpstream,
    said: str,
    correction: str,
    _other: str,
    word: str,
) -> None:
    user = await live(make_proxy, upstream)
    await user.say(said)
    await user.say(correction)
    listing = await user.command(f"/memory forget {word}")
    forget, keep = _sections(listing)
    assert said in forget and correction not in forget
    assert correction in keep
    assert said in await _texts(user, word)  # listed, not forgotten

    done = await user.command("/memory forget confirm")
    assert done.startswith("Forgot ") and said in done and correction not in done
    left = await _texts(user, word)
    assert said not in left and correction in left
    assert "No forget waits" in await user.command("/memory forget confirm")  # used up
    turn = await user.chat("Where does Ana live?")
    assert said not in turn.block and correction in turn.block
    assert "porto" in _plain(turn.answer)


@pytest.mark.parametrize(("said", "correction", "other", "word"), TRIAL_FORGETS)
async def test_a_narrower_confirm_forgets_only_the_listed_ids_named(
    make_proxy: MakeProxy, upstream: FakeUpstream, said: str, correction: str, other: str, word: str
) -> None:
    user = await live(make_proxy, upstream)
    for text in (said, other, correction):
        await user.say(text)
    listing = await user.command(f"/memory forget {word}")
    forget, keep = _sections(listing)
    assert said in forget and other in forget and correction in keep
    chosen = _id_of(listing, said)

    done = await user.command(f"/memory forget confirm #{chosen}")
    assert "Forgot 1 fragment" in done and said in done and other not in done
    left = await _texts(user, word)
    assert said not in left and other in left and correction in left


@pytest.mark.parametrize(("said", "correction", "_other", "word"), TRIAL_FORGETS)
async def test_a_kept_correction_is_forgotten_when_its_id_is_named(
    make_proxy: MakeProxy,
    upstream: FakeUpstream,
    said: str,
    correction: str,
    _other: str,
    word: str,
) -> None:
    user = await live(make_proxy, upstream)
    await user.say(said)
    await user.say(correction)
    listing = await user.command(f"/memory forget {word}")
    kept = _id_of(listing.partition("Would keep")[2], correction)
    done = await user.command(f"/memory forget confirm {kept}")
    assert "Forgot 1 fragment" in done and correction in done
    left = await _texts(user, word)
    assert correction not in left and said in left


@pytest.mark.parametrize(
    ("said", "correction", "word"),
    [
        ("Ana lives in Lisbon.", "Ana lives in Porto now, rather than Lisbon.", "Lisbon"),
        (
            "Ana lives in Lisbon.",
            "Scratch that: Ana doesn't live in Lisbon, but in Porto.",
            "Lisbon",
        ),
        ("A Ana mora em Lisboa.", "Enganei-me: a Ana não mora em Lisboa, mas no Porto.", "Lisboa"),
        ("A Ana mora em Lisboa.", "Afinal a Ana mora no Porto e não em Lisboa.", "Lisboa"),
        ("Ana vive en Lisboa.", "Me confundí: Ana no vive en Lisboa sino en Oporto.", "Lisboa"),
        ("Ana vive en Lisboa.", "Ana vive en Oporto y no en Lisboa.", "Lisboa"),
    ],
)
async def test_forget_keeps_a_correction_worded_otherwise(
    make_proxy: MakeProxy, upstream: FakeUpstream, said: str, correction: str, word: str
) -> None:
    user = await live(make_proxy, upstream)
    await user.say(said)
    await user.say(correction)
    forget, keep = _sections(await user.command(f"/memory forget {word}"))
    assert said in forget and correction in keep and correction not in forget
    await user.command("/memory forget confirm")
    left = await _texts(user, word)
    assert said not in left and correction in left
    assert "porto" in _plain((await user.chat("Where does Ana live?")).answer)


async def test_a_held_forget_belongs_to_its_conversation_and_can_be_called_off(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    user = await live(make_proxy, upstream)
    said = "My sister Ana lives in Lisbon and runs a bakery."
    await user.say(said)
    assert "Would forget 1 fragment" in await user.command(
        "/memory forget Lisbon", conversation="a"
    )
    other = await user.command("/memory forget confirm", conversation="b")
    assert "No forget waits for confirmation in this conversation" in other
    assert "called off" in await user.command("/memory forget cancel", conversation="a")
    assert "No forget waits" in await user.command("/memory forget confirm", conversation="a")
    assert said in await _texts(user, "Lisbon")
    # a new listing replaces the one held before it
    await user.command("/memory forget bakery", conversation="a")
    assert "Would forget" in await user.command("/memory forget Lisbon Ana", conversation="a")
    listed = [f["request"] for f in (await user.get("/memory/forgets"))["forgets"]]
    assert listed == []  # listings record nothing
    assert "Forgot 1 fragment" in await user.command("/memory forget confirm", conversation="a")
    (record,) = (await user.get("/memory/forgets"))["forgets"]
    assert record["request"] == "Lisbon Ana"
