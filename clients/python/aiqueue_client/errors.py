"""The API's JSON errors as one exception."""

from __future__ import annotations

from typing import Any

import httpx


class MarkingError(Exception):
    """An answer that was not a success: `{"error": code, "detail": sentence}` and its status."""

    def __init__(self, status: int, code: str, detail: str, body: dict[str, Any],
                 retry_after: float | None = None) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status, self.code, self.detail, self.body = status, code, detail, body
        self.retry_after = retry_after


def error_from(response: httpx.Response) -> MarkingError:
    """The MarkingError of a failed answer (also when its body is not the API's JSON)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"error": "http_error", "detail": response.reason_phrase or "no detail"}
    try:
        retry_after: float | None = float(response.headers["retry-after"])
    except (KeyError, ValueError):
        retry_after = None
    return MarkingError(response.status_code, str(body.get("error", "http_error")),
                        str(body.get("detail", "")), body, retry_after)
