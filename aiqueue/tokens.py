"""Signed tokens, all in one place: callback tokens, event tokens, sessions."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from itsdangerous import BadSignature, URLSafeTimedSerializer

from aiqueue.answers import AnswerKey

# A callback may come late (a slow model, a retried callback): accept it for as
# long as the row could still exist unpruned.
CALLBACK_MAX_AGE = 14 * 24 * 3600
# A probe (the doctor's dispatch, docs/operating/doctor.md) is answered within seconds.
PROBE_MAX_AGE = 600


@dataclass(frozen=True)
class CallbackClaim:
    """What a valid callback token proves: this dispatch of this row."""

    queue_id: UUID
    dispatch_seq: int
    attempt: int


class Tokens:
    """Signs and verifies every token aiqueue hands out."""

    def __init__(self, secrets: str | Sequence[str], *, session_binding: str = "") -> None:
        """`secrets` newest first: the newest signs, any of them verifies (rotation).

        Sessions are also keyed with `session_binding` (the admin password when it is
        its own, Settings.session_binding): changing it ends every session.
        """
        keys = [secrets] if isinstance(secrets, str) else list(secrets)[::-1]  # oldest first
        self._callback = URLSafeTimedSerializer(keys, salt="aiqueue.callback")
        self._events = URLSafeTimedSerializer(keys, salt="aiqueue.events")
        self._session = URLSafeTimedSerializer(keys, salt=_session_salt(session_binding))
        self._probe = URLSafeTimedSerializer(keys, salt="aiqueue.probe")
        self._canary = URLSafeTimedSerializer(keys, salt="aiqueue.canary")
        # The same answer's key (docs/same-answer.md), derived for that purpose alone from
        # the newest secret: rows enqueued after a rotation start new groups.
        self.answer_key = AnswerKey.derive(keys[-1])

    def callback(self, queue_id: UUID, dispatch_seq: int, attempt: int) -> str:
        return self._callback.dumps([str(queue_id), dispatch_seq, attempt])

    def verify_callback(self, token: object, *, now: float | None = None) -> CallbackClaim | None:
        """The claim of a valid token, else None (bad signature, expired, malformed)."""
        data = _loads(self._callback, token, CALLBACK_MAX_AGE, now)
        if not isinstance(data, list) or len(data) != 3:
            return None
        try:
            return CallbackClaim(UUID(str(data[0])), int(data[1]), int(data[2]))
        except (TypeError, ValueError):
            return None

    def probe(self, probe_id: UUID) -> str:
        """The callback token of a probe dispatch: it names no queue row."""
        return self._probe.dumps(str(probe_id))

    def verify_probe(self, token: object, *, now: float | None = None) -> UUID | None:
        """The probe id of a valid probe token, else None."""
        data = _loads(self._probe, token, PROBE_MAX_AGE, now)
        try:
            return UUID(data) if isinstance(data, str) else None
        except ValueError:
            return None

    def canary(self, row_id: UUID) -> str:
        """The callback token of a canary row (docs/canaries.md): it names no queue row."""
        return self._canary.dumps(str(row_id))

    def verify_canary(self, token: object, *, now: float | None = None) -> UUID | None:
        """The canary row's id of a valid canary token, else None."""
        data = _loads(self._canary, token, CALLBACK_MAX_AGE, now)
        try:
            return UUID(data) if isinstance(data, str) else None
        except ValueError:
            return None

    def events(self, assignment_id: str) -> str:
        return self._events.dumps(assignment_id)

    def verify_events(
        self, token: object, assignment_id: str, *, max_age: int = 3600, now: float | None = None
    ) -> bool:
        data = _loads(self._events, token, max_age, now)
        # As bytes: compare_digest refuses a str with non-ASCII characters (any Unicode
        # id is allowed, docs/deploying/index.md).
        return isinstance(data, str) and hmac.compare_digest(
            data.encode("utf-8", "surrogatepass"), assignment_id.encode("utf-8", "surrogatepass"))

    def session(self, user: str, csrf: str) -> str:
        return self._session.dumps([user, csrf])

    def verify_session(
        self, token: object, *, max_age: int, now: float | None = None
    ) -> tuple[str, str] | None:
        data = _loads(self._session, token, max_age, now)
        if isinstance(data, list) and len(data) == 2 and all(isinstance(x, str) for x in data):
            return data[0], data[1]
        return None


def _session_salt(binding: str) -> str:
    # A digest, so the salt's length is bounded; itsdangerous mixes the salt with the
    # secret when it derives the signing key, and never puts it in a token.
    if not binding:
        return "aiqueue.session"
    return "aiqueue.session." + hashlib.sha256(binding.encode()).hexdigest()


def _loads(
    serializer: URLSafeTimedSerializer, token: object, max_age: int, now: float | None
) -> object:
    """The one place BadSignature is caught."""
    # Our tokens are URL-safe base64: anything else (e.g. an unpaired surrogate,
    # which itsdangerous cannot even encode) is simply not one of them.
    if not isinstance(token, str) or not token or len(token) > 4096 or not token.isascii():
        return None
    try:
        if now is None:
            return serializer.loads(token, max_age=max_age)
        # A frozen clock for tests: verify the signature, then the age ourselves.
        value, signed_at = serializer.loads(token, return_timestamp=True)
        return value if now - signed_at.timestamp() <= max_age else None
    except BadSignature:
        return None


def same_secret(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison of a presented secret with the configured one."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())
