"""The doctor checks each batch pool's key with one read-only call (docs/overnight.md)."""

from __future__ import annotations

import dataclasses

import asyncpg
import pytest

from aiqueue.doctor.batch import check_batch_keys
from aiqueue.doctor.report import Doctor
from aiqueue.settings.kinds import QueueConfig
from tests.batchapi.common import Clock
from tests.integration.batch_kit import batch_pool, lane_settings, served

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_each_batch_pools_key_is_checked_with_one_list_call(
        provider: str, db_url: str, conn: asyncpg.Connection) -> None:
    with served(provider, Clock(), {}) as (emu, emu_url, fn_url):
        settings = lane_settings(provider, db_url, emu, emu_url, fn_url)
        wrong = batch_pool("essays", provider, emu, emu_url, batch_key_env="ESSAY_KEY",
                           batch_api_key="sk-wrong")
        assert settings.queue_file is not None
        pools = {**settings.queue_file.pools, "essays": wrong}
        settings = dataclasses.replace(settings, queue_file=QueueConfig(pools, {}))
        doc = Doctor(settings, None)
        await check_batch_keys(doc)
    lines = {c.name: c for c in doc.report.checks}
    assert set(lines) == {"batch", "batch:essays"}
    assert lines["batch"].status == "pass" and "BATCH_KEY" in lines["batch"].detail
    bad = lines["batch:essays"]
    assert bad.status == "fail" and "provider_http_401" in bad.detail
    assert bad.fix is not None and "ESSAY_KEY" in bad.fix
    assert "sk-wrong" not in bad.detail + bad.fix and emu.key not in str(doc.report.to_json())
    # One read-only call per pool, and nothing else.
    path = "/v1/batches" if provider == "openai" else "/v1/messages/batches"
    assert emu.calls == [f"GET {path}?limit=1"] * 2
