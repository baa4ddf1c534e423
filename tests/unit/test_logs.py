"""Log hygiene: only whitelisted fields reach a log line."""

from __future__ import annotations

import json
import logging
import uuid

import pytest

from aiqueue import logs

SECRET = "unit-secret-0123456789abcdef"


def test_log_lines_accept_only_whitelisted_fields(caplog: pytest.LogCaptureFixture):
    logs.log.setLevel(logging.INFO)
    with caplog.at_level(logging.INFO, logger="aiqueue"):
        logs.event("claim", queue_id=uuid.UUID(int=1), attempt=1)
    record = json.loads(caplog.records[-1].getMessage())
    assert record["event"] == "claim" and record["attempt"] == 1
    with pytest.raises(ValueError, match="content"):
        logs.event("claim", content="student text")
