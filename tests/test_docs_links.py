"""The README and docs/ stand alone in a clone: every relative link points into the
repository, and no README command reads a path outside it (issue 30: the README linked
``../shared/DESIGN.md`` and replayed ``../shared/data/...``, which a clone lacks)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from evaluation.locomo import load_locomo

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves_inside_the_repository(page: Path) -> None:
    targets = [t for t in LINK.findall(page.read_text("utf-8")) if "://" not in t]
    assert targets or page.name != "README.md"  # the README links its docs
    for target in targets:
        resolved = (page.parent / target).resolve()
        assert resolved.is_relative_to(ROOT), f"{page.name} links outside the clone: {target}"
        assert resolved.exists(), f"{page.name} links to a missing {target}"


def _code_blocks(text: str) -> list[str]:
    """The fenced code blocks of a Markdown text (a fence opens and closes on a line of
    its own)."""
    blocks: list[list[str]] = []
    inside = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
            if inside:
                blocks.append([])
        elif inside:
            blocks[-1].append(line)
    return ["\n".join(b) for b in blocks]


def test_the_readme_commands_read_outside_the_clone_only_where_a_flag_names_the_path() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    blocks = _code_blocks(readme)
    assert len(blocks) > 5
    for block in blocks:
        words = block.split()
        for before, word in zip(["", *words], words, strict=False):
            if "../" in word:
                assert before.startswith("--"), f"a README command reads {word} outside the clone"


def test_the_example_conversation_is_a_locomo_file_the_scripts_read() -> None:
    path = ROOT / "docs/examples/conversation.json"
    (loaded,) = load_locomo(path)
    assert len(loaded.turns) >= 12 and len(loaded.questions) >= 5
    samples = json.loads(path.read_text("utf-8"))
    conversation = samples[0]["conversation"]
    turns = {
        t["dia_id"]
        for key, session in conversation.items()
        if re.fullmatch(r"session_\d+", key)
        for t in session
    }
    assert len(turns) >= 12
    evidence = {e for qa in samples[0]["qa"] for e in qa["evidence"]}
    assert evidence <= turns  # every question's evidence is a turn of the conversation
