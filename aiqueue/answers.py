"""The same answer, marked once (docs/same-answer.md): how an answer is normalised and keyed.

This module is the documented spec; the database runs the same normalisation
in db/sql/functions/72_groups.sql (aiqueue_answer_norm, aiqueue_answer_key),
where the enqueue reads the answer and keys it in its one statement, so the
text never leaves the database and never lands in a queue table.
tests/integration/test_same_answer_key.py runs the unit test's table through both.

The key is an HMAC-SHA256 (RFC 2104) of the normalised text under a key derived
from MARKING_QUEUE_SECRET for this purpose alone: a plain hash of a short answer
could be found from a dictionary of answers.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata
from dataclasses import dataclass, replace
from typing import Literal

# What an enqueue asks for.
SameAnswers = Literal["mark_once", "mark_each"]
SAME_ANSWERS: tuple[SameAnswers, ...] = ("mark_once", "mark_each")
DEFAULT_SAME_ANSWERS: SameAnswers = "mark_once"
# What a kind chooses (docs/same-answer.md): mark_once (case kept), loose (also
# case-folded, a final `.`/`!` dropped), off (each marked; mark_each is its old name).
KindSameAnswers = Literal["mark_once", "loose", "off", "mark_each"]
KIND_SAME_ANSWERS: tuple[KindSameAnswers, ...] = ("mark_once", "loose", "off", "mark_each")

# What separates words after NFKC (which already maps most Unicode spaces to
# U+0020): the same class as the SQL's, character for character.
_SPACE = re.compile(
    "[\t\n\v\f\r \u001c-\u001f\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
# The purpose the key is derived for: no other key of the secret equals it.
_PURPOSE = b"aiqueue.same_answer"
_BLOCK = 64  # sha256's block size, which HMAC pads its key to


def _lower(text: str) -> str:
    """Each character's simple lowercase mapping, as the database's lower() does it.

    str.lower() applies full mappings in context (a final sigma, İ to two
    characters); the database maps one character to one.
    """
    return "".join(c.lower()[0] if c.lower() else c for c in text)


def normalise(answer: str, loose: bool = False) -> str:
    """The answer as keyed: NFKC, whitespace runs made one space, trimmed; case kept
    ("CO" is not "Co").  `loose` also lowers case (with ß → ss and ς → σ) and drops a
    final `.` or `!`."""
    if not loose:
        return _SPACE.sub(" ", unicodedata.normalize("NFKC", answer)).strip(" ")
    text = _lower(unicodedata.normalize("NFKC", answer)).replace("ς", "σ").replace("ß", "ss")
    text = _SPACE.sub(" ", text).strip(" ")
    if text.endswith((".", "!")):
        text = text[:-1]
    return text.strip(" ")


@dataclass(frozen=True)
class AnswerKey:
    """The derived key as HMAC's two padded halves, which the enqueue's SQL takes, and
    whether answers are normalised `loose`ly."""

    inner_pad: bytes
    outer_pad: bytes
    loose: bool = False

    @classmethod
    def derive(cls, secret: str) -> AnswerKey:
        """The purpose-specific key of `secret` (HMAC-SHA256 of the purpose), padded."""
        key = hmac.new(secret.encode(), _PURPOSE, hashlib.sha256).digest().ljust(_BLOCK, b"\0")
        return cls(bytes(b ^ 0x36 for b in key), bytes(b ^ 0x5C for b in key))

    def loosely(self) -> AnswerKey:
        """The same key, for a kind whose `same_answers` is "loose"."""
        return replace(self, loose=True)

    def of(self, answer: str) -> bytes:
        """The key of an answer, as the database computes it (for tests and tools)."""
        inner = hashlib.sha256(self.inner_pad + normalise(answer, self.loose).encode()).digest()
        return hashlib.sha256(self.outer_pad + inner).digest()
