"""The doctor finds a transaction pooler in the way (a real PgBouncer in transaction mode) and
then asks for a session connection that carries LISTEN; a plain server passes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import pytest

from aiqueue.db.doctor import detect_pooler, listen_works
from aiqueue.doctor.checks import check_pooler
from aiqueue.doctor.report import Doctor
from aiqueue.runtime import Runtime
from tests.conftest import make_settings
from tests.e2e.pgbouncer import PgBouncer

pytestmark = pytest.mark.e2e


@pytest.fixture
def pooler(db_url: str) -> Iterator[PgBouncer]:
    bouncer = PgBouncer(db_url)
    bouncer.start()
    yield bouncer
    bouncer.stop()


@pytest.fixture
async def pooled_url(db_url: str, pooler: PgBouncer) -> AsyncIterator[str]:
    yield pooler.dsn(urlsplit(db_url).path.lstrip("/"))


async def pooler_lines(database_url: str, direct_url: str) -> dict[str, tuple[str, str]]:
    settings = make_settings(database_url, database_direct_url=direct_url)
    rt = await Runtime.create(settings, database_url)
    try:
        doc = Doctor(settings, rt)
        await check_pooler(doc)
    finally:
        await rt.close()
    return {c.name: (c.status, c.detail) for c in doc.report.checks}


async def test_a_session_connection_has_no_pooler_and_listen_works(db_url: str):
    found = await detect_pooler(db_url)
    assert not found.pooled and "own server backend" in found.evidence
    assert await listen_works(db_url, db_url, timeout=5)
    lines = await pooler_lines(db_url, db_url)
    assert lines["pooler"][0] == "pass" and lines["listen"][0] == "pass"


async def test_pgbouncer_in_transaction_mode_is_detected(pooled_url: str, db_url: str):
    for _ in range(3):  # not by chance
        assert (await detect_pooler(pooled_url)).pooled
    # Without DATABASE_DIRECT_URL: named, with the fix.
    lines = await pooler_lines(pooled_url, pooled_url)
    assert lines["pooler"][0] == "fail" and "DATABASE_DIRECT_URL is not set" in lines["pooler"][1]
    assert "listen" not in lines
    # With a session connection beside it: LISTEN there hears a NOTIFY sent through the pooler.
    lines = await pooler_lines(pooled_url, db_url)
    assert lines["pooler"][0] == "pass" and "transaction pooler" in lines["pooler"][1]
    assert lines["listen"] == ("pass", lines["listen"][1])
    assert "DATABASE_DIRECT_URL" in lines["listen"][1]


async def test_a_direct_url_that_is_the_pooler_again_fails(pooled_url: str):
    # The same PgBouncer under another spelling: set, but no session connection.
    lines = await pooler_lines(pooled_url, pooled_url + "?application_name=direct")
    assert lines["pooler"][0] == "pass"
    assert lines["listen"][0] == "fail" and "also goes through" in lines["listen"][1]
    assert not await listen_works(pooled_url, pooled_url, timeout=1)
