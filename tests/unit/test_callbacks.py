"""Webhook items: error texts become content-free codes."""

from __future__ import annotations

from aiqueue.queue.results import error_code

SECRET = "unit-secret-0123456789abcdef"


def test_error_texts_become_content_free_codes():
    assert error_code("model_timeout") == "function:model_timeout"
    assert error_code("The student wrote about photosynthesis") == "function_failed"
    assert error_code(None) == "function_failed"
    assert error_code("x" * 100) == "function_failed"
