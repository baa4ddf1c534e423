"""One exception base; the web layer maps each kind to an HTTP status once."""

from __future__ import annotations


class AiQueueError(Exception):
    """Base of every error aiqueue raises on purpose."""

    status_code = 500
    code = "internal_error"
    # Seconds for a Retry-After header, for errors that pass if the client waits.
    retry_after: int | None = None

    def __init__(self, detail: str, *, extra: dict[str, object] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra or {}


class SettingsError(AiQueueError):
    """A setting is missing or malformed; start-up stops with this one line."""


class ZoneUnknown(SettingsError):
    """A time zone setting the database does not know: every request is refused with this
    one line until the setting or the database changes (docs/configuration.md)."""

    status_code = 503
    code = "timezone_unknown"
    retry_after = 60

    def __init__(self, setting: str, name: str) -> None:
        super().__init__(
            f"{setting} = {name[:60]!r} is a time zone this database does not know "
            "(pg_timezone_names): choose one both Python and PostgreSQL know, e.g. "
            "Europe/Berlin, or update the database's time zone data",
            extra={"setting": setting})
        self.setting = setting


class StoreError(AiQueueError):
    """The database could not be reached or refused a statement."""

    status_code = 503
    code = "database_unavailable"
    retry_after = 2


class DatabaseTimeout(StoreError):
    """The database did not answer within the call's limit; nothing was half-applied."""

    code = "database_timeout"


class SchemaBehind(StoreError):
    """The database's schema is older than this code needs (docs/operating/doctor.md)."""

    code = "schema_behind"
    retry_after = 30

    def __init__(self, expected: int, found: int) -> None:
        super().__init__(
            f"this code needs database schema {expected}, the database has {found}: "
            "run `python -m aiqueue migrate up` as the database owner",
            extra={"expected": expected, "found": found})
        self.expected, self.found = expected, found


class BadRequest(AiQueueError):
    """The body is not JSON at all."""

    status_code = 400
    code = "bad_request"


class Unauthorized(AiQueueError):
    """Missing or wrong credentials."""

    status_code = 401
    code = "unauthorized"


class NotFound(AiQueueError):
    """No such row or route."""

    status_code = 404
    code = "not_found"


class Conflict(AiQueueError):
    """The row is not in a state that allows the action."""

    status_code = 409
    code = "conflict"


class TooLarge(AiQueueError):
    """The body exceeds its size limit."""

    status_code = 413
    code = "payload_too_large"


class Invalid(AiQueueError):
    """Valid JSON with wrong or missing fields."""

    status_code = 422
    code = "invalid"


class UnknownKind(Invalid):
    """An enqueue names a kind the configuration does not declare (docs/concepts.md)."""

    code = "unknown_kind"


class BadHeader(AiQueueError):
    """A request header is malformed."""

    status_code = 400
    code = "invalid_header"


class KeyReused(Invalid):
    """An Idempotency-Key came back with a different body."""

    code = "idempotency_key_reused"


class NotCompleted(Conflict):
    """A review needs an applied result that has not been reverted."""

    code = "not_completed"


class Superseded(Conflict):
    """A later result has been applied to the submission since."""

    code = "superseded"


class AlreadyAnswered(Conflict):
    """A marker's question was answered already (once per payload)."""

    code = "already_answered"
