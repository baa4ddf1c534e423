"""The database normalises and keys answers as aiqueue/answers.py specifies (CONTRACT §10c)."""

from __future__ import annotations

import asyncpg

from aiqueue.answers import AnswerKey, normalise
from tests.unit.answer_cases import CASES

KEY = AnswerKey.derive("a-test-secret-of-some-length-000")


async def test_the_sql_normalises_and_keys_the_table_as_the_spec(
        conn: asyncpg.Connection) -> None:
    answers = [a for a, _ in CASES]
    rows = await conn.fetch(
        "SELECT a, aiqueue_answer_norm(a) AS norm, aiqueue_answer_key(a, $2, $3) AS key "
        "FROM unnest($1::text[]) a", answers, KEY.inner_pad, KEY.outer_pad)
    assert [(r["a"], r["norm"]) for r in rows] == CASES
    assert all(r["norm"] == normalise(r["a"]) for r in rows)
    assert [bytes(r["key"]) for r in rows] == [KEY.of(a) for a in answers]


async def test_no_key_without_pads_or_content(conn: asyncpg.Connection) -> None:
    assert await conn.fetchval("SELECT aiqueue_answer_key('x', NULL, NULL)") is None
    assert await conn.fetchval("SELECT aiqueue_answer_key(NULL, $1, $2)",
                               KEY.inner_pad, KEY.outer_pad) is None
