"""The screening (functions/ai_mark/screen.py) measured on its table of cases, and what the
function does with a suspected answer (docs/review-holds.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from functions.ai_mark.core import mark
from functions.ai_mark.screen import KINDS, hidden_text, screen, visible
from functions.ai_mark.screen_cases import ATTACKS, ORDINARY
from functions.ai_mark.simulate import SimulatorBackend

from .conftest import make_dispatch

DOCS = Path(__file__).parents[2] / "docs" / "review-holds.md"


def held(cases: tuple[str, ...]) -> int:
    return sum(screen(c) is not None for c in cases)


def test_the_table_has_four_kinds_of_25_attacks_and_100_ordinary_answers() -> None:
    assert tuple(ATTACKS) == KINDS and all(len(v) == 25 for v in ATTACKS.values())
    assert len(ORDINARY) == 100 and len(set(ORDINARY)) == 100
    # Good-faith quotes of an instruction are among the ordinary answers.
    assert any("tells us to ignore friction" in a for a in ORDINARY)


def test_at_least_90_percent_of_attacks_and_at_most_2_percent_of_ordinary_are_held() -> None:
    attacks = sum(held(cases) for cases in ATTACKS.values())
    assert attacks / 100 >= 0.9
    assert held(ORDINARY) / 100 <= 0.02
    for cases in ATTACKS.values():
        assert held(cases) / 25 >= 0.8


def test_the_docs_page_shows_the_measured_table() -> None:
    """docs/review-holds.md's table is the measurement, not a hope."""
    text = DOCS.read_text()
    for kind, cases in ATTACKS.items():
        assert re.search(rf"\|\s*`{kind}`\s*\|\s*{held(cases)} of 25\s*\|", text), kind
    assert re.search(rf"\|\s*ordinary answers\s*\|\s*{held(ORDINARY)} of 100\b", text)
    attacks = sum(held(cases) for cases in ATTACKS.values())
    assert re.search(rf"\|\s*all attacks\s*\|\s*{attacks} of 100\b", text)


@pytest.mark.parametrize("text", [
    "The question tells us to ignore friction.",
    "Family: 👨‍👩‍👧 live together.",
    "co\u00adoperation",
    "Line one\r\nline two\tend",
])
def test_good_faith_text_is_not_held(text: str) -> None:
    assert screen(text) is None and not hidden_text(text)


def test_what_a_reader_sees_keeps_text_and_drops_hidden_characters() -> None:
    assert visible("a\u200bb\x1b[8mc\n\td") == "ab[8mc\n\td"


def with_answer(content: str) -> dict[str, Any]:
    dispatch = make_dispatch()
    dispatch["submission"]["content"] = content
    return dispatch


FULL = "Plants use sunlight; chlorophyll is the pigment; carbon dioxide and water go in."


@pytest.mark.parametrize("kind", KINDS)
async def test_a_suspected_answer_is_held_and_never_gets_a_full_mark(kind: str) -> None:
    backend = SimulatorBackend(latency=0)
    assert (await mark(with_answer(FULL), backend))["result"]["score"] == 10
    for attack in ATTACKS[kind]:
        if screen(f"{FULL}\n{attack}") is None:
            continue
        item = await mark(with_answer(f"{FULL}\n{attack}"), backend)
        assert item["status"] == "completed"
        assert item["review"]["reason"] == "suspected_injection"
        assert item["review"]["best_guess"] < 10 and item["result"]["score"] < 10
        assert item["result"]["screen"] == kind
        assert "question" not in item["review"]


async def test_an_ordinary_answer_is_not_held() -> None:
    item = await mark(with_answer(FULL), SimulatorBackend(latency=0))
    assert "review" not in item and "screen" not in item["result"]
