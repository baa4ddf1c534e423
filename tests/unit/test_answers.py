"""The same answer's normalisation and key (aiqueue/answers.py)."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from aiqueue.answers import AnswerKey, normalise
from tests.unit.answer_cases import CASES, STRICT_CASES


@pytest.mark.parametrize(("answer", "expected"), CASES)
def test_normalise(answer: str, expected: str) -> None:
    assert normalise(answer, loose=True) == expected


@pytest.mark.parametrize(("answer", "expected"), STRICT_CASES)
def test_the_default_normalisation_keeps_case(answer: str, expected: str) -> None:
    assert normalise(answer) == expected


def test_case_makes_a_different_key_unless_loose() -> None:
    key = AnswerKey.derive("s" * 32)
    assert key.of("CO") != key.of("Co") and key.of("NaCl") != key.of("nacl")
    assert key.loosely().of("CO") == key.loosely().of("co.")


def test_the_key_is_an_hmac_under_a_key_derived_for_this_purpose() -> None:
    secret = "s" * 32
    derived = hmac.new(secret.encode(), b"aiqueue.same_answer", hashlib.sha256).digest()
    key = AnswerKey.derive(secret)
    assert key.of(" Oxygen ") == hmac.new(derived, b"Oxygen", hashlib.sha256).digest()
    assert key.loosely().of(" Oxygen. ") == hmac.new(derived, b"oxygen", hashlib.sha256).digest()
    # Never a plain hash, nor keyed with the secret itself.
    assert key.of("oxygen") != hashlib.sha256(b"oxygen").digest()
    assert key.of("oxygen") != hmac.new(secret.encode(), b"oxygen", hashlib.sha256).digest()
    assert AnswerKey.derive("t" * 32).of("oxygen") != key.of("oxygen")
