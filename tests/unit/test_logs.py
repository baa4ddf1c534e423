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


def test_every_log_call_in_the_code_names_only_allowed_fields():
    """A field missing from ALLOWED raises inside a step (step_error), so check them all."""
    import ast
    from pathlib import Path

    from aiqueue.logs import ALLOWED

    root = Path(__file__).resolve().parents[2] / "aiqueue"
    unknown = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "event"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "logs"):
                unknown += [f"{path.name}:{node.lineno} {k.arg}" for k in node.keywords
                            if k.arg is not None and k.arg not in ALLOWED]
    assert unknown == []
