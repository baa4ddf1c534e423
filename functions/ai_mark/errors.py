"""Errors of the reference marking function; each maps to a content-free code."""

from __future__ import annotations


class AiMarkError(Exception):
    """Base of every error this package raises on purpose."""


class SettingsError(AiMarkError):
    """An environment variable is missing or malformed."""


class InvalidDispatch(AiMarkError):
    """The dispatch lacks a field or has one of the wrong type."""

    def __init__(self, field: str) -> None:
        # The field path is safe to log and show; the offending value never is.
        super().__init__(field)
        self.field = field


class MarkingError(AiMarkError):
    """Marking failed; `code` is short and content-free, `retryable` says if trying again helps."""

    def __init__(self, code: str, *, retryable: bool, retry_after: float | None = None,
                 reset_after: float | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.retryable = retryable
        # For a refusal (rate_limited, overloaded): the seconds the model asked us to wait,
        # and until its whole budget is back (the queue learns the model's window from it).
        self.retry_after = retry_after
        self.reset_after = reset_after


class MalformedOutput(AiMarkError):
    """The model's reply is not a valid marking; `reason` is our own wording, never model text."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
