"""Signed callback tokens: binding, forgeries, expiry with a frozen clock."""

from __future__ import annotations

import time
import uuid

from aiqueue.tokens import Tokens, same_secret

SECRET = "unit-secret-0123456789abcdef"


def test_callback_tokens_bind_row_and_dispatch_and_reject_forgeries():
    tokens = Tokens(SECRET)
    qid = uuid.uuid4()
    token = tokens.callback(qid, 3, 2)
    claim = tokens.verify_callback(token)
    assert claim is not None and (claim.queue_id, claim.dispatch_seq, claim.attempt) == (qid, 3, 2)
    assert tokens.verify_callback(token[:-2] + "xx") is None
    assert Tokens("another-secret-0123456789").verify_callback(token) is None
    assert tokens.verify_callback(None) is None and tokens.verify_callback(42) is None
    # The event and session signers cannot stand in for a callback token.
    assert tokens.verify_callback(tokens.events("hw-1")) is None


def test_token_expiry_with_a_frozen_clock():
    tokens = Tokens(SECRET)
    token = tokens.events("hw-1")
    now = time.time()
    assert tokens.verify_events(token, "hw-1", max_age=60, now=now + 59)
    assert not tokens.verify_events(token, "hw-1", max_age=60, now=now + 61)
    assert not tokens.verify_events(token, "hw-2", max_age=60, now=now)
    session = tokens.session("admin", "csrf")
    assert tokens.verify_session(session, max_age=100, now=now + 10) == ("admin", "csrf")
    assert tokens.verify_session(session, max_age=100, now=now + 101) is None


def test_same_secret():
    assert same_secret("abc", "abc")
    assert not same_secret("abc", "abd")
    assert not same_secret(None, "abc") and not same_secret("", "")
