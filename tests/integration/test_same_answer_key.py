"""The database normalises and keys answers as aiqueue/answers.py specifies."""

from __future__ import annotations

import asyncpg
import pytest

from aiqueue.answers import AnswerKey, normalise
from tests.unit.answer_cases import CASES, STRICT_CASES

KEY = AnswerKey.derive("a-test-secret-of-some-length-000")


@pytest.mark.parametrize(("cases", "loose"), [(CASES, True), (STRICT_CASES, False)])
async def test_the_sql_normalises_and_keys_the_table_as_the_spec(
        conn: asyncpg.Connection, cases: list[tuple[str, str]], loose: bool) -> None:
    answers = [a for a, _ in cases]
    rows = await conn.fetch(
        "SELECT a, aiqueue_answer_norm(a, $4) AS norm, aiqueue_answer_key(a, $2, $3, $4) AS key "
        "FROM unnest($1::text[]) a", answers, KEY.inner_pad, KEY.outer_pad, loose)
    assert [(r["a"], r["norm"]) for r in rows] == cases
    assert all(r["norm"] == normalise(r["a"], loose) for r in rows)
    key = KEY.loosely() if loose else KEY
    assert [bytes(r["key"]) for r in rows] == [key.of(a) for a in answers]


async def test_no_key_without_pads_or_content(conn: asyncpg.Connection) -> None:
    assert await conn.fetchval("SELECT aiqueue_answer_key('x', NULL, NULL, false)") is None
    assert await conn.fetchval("SELECT aiqueue_answer_key(NULL, $1, $2, false)",
                               KEY.inner_pad, KEY.outer_pad) is None
