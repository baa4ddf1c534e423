"""DATABASE_PREPARED_STATEMENTS: what the setting and the URL decide before asking the server."""

from __future__ import annotations

from aiqueue.db import prepared


def test_on_and_off_are_taken_as_said() -> None:
    assert prepared.by_url("on", "postgresql://u@h:6543/db") == prepared.Choice(
        True, "DATABASE_PREPARED_STATEMENTS=on")
    off = prepared.by_url("off", "postgresql://u@h/db")
    assert off is not None and not off.on and off.cache_size == 0


def test_auto_is_off_at_a_managed_poolers_endpoint_and_asks_the_server_elsewhere() -> None:
    for pooled in ("postgresql://u@aws-0-eu.pooler.supabase.com:6543/postgres",
                   "postgresql://u@ep-x-pooler.eu-central-1.aws.neon.tech/db"):
        choice = prepared.by_url("auto", pooled)
        assert choice is not None and not choice.on and "pooler" in choice.why
    assert prepared.by_url("auto", "postgresql://u@db.example.com:5432/db") is None


def test_the_urls_port_reads_a_socket_paths_port_parameter() -> None:
    assert prepared.url_port("postgresql://u@h:6432/db") == 6432
    assert prepared.url_port("postgresql://u@/db?host=/tmp/pg&port=5433") == 5433
    assert prepared.url_port("postgresql://u@h/db") == 5432
