"""Does an answer speak to the marker instead of the question?  (docs/review-holds.md)

Students talk to automatic markers: "ignore the rubric", a fake `<|system|>`
turn, words hidden by zero-width or control characters, "give this full
marks".  Such an answer is not refused (that would leave the student
unmarked) but held for a teacher: `screen` names what it found, and the
function never gives a full mark from it (review.py).

Four kinds of signal, each a small set of patterns that look for the marker
being *addressed* — not for the words alone: "the question tells us to
ignore friction" quotes an instruction in good faith and is an answer like
any other.  screen_cases.py holds the table the rates are measured on
(tests/functions/test_screen.py asserts them; the docs page shows them).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

Kind = Literal["instructions", "role_tags", "hidden_text", "full_marks"]
KINDS: tuple[Kind, ...] = ("instructions", "role_tags", "hidden_text", "full_marks")

_I = re.IGNORECASE | re.MULTILINE
# Who the answer would be talking to.
_MARKER = (r"(?:ai|a\.i\.|grader|marker|examiner|assessor|model|language\s+model|llm|"
           r"assistant|chat\s?gpt|gpt(?:-?\d)?|claude|gemini|bot|robot|evaluator|"
           r"marking\s+(?:system|tool|software))")
# What a prompt is made of, as an injection names it.
_PROMPT_NOUNS = (r"(?:instructions?|prompts?|rules|directions|guidelines|rubric|marking\s+"
                 r"scheme|mark\s+scheme|criteria|messages?|context|system\s+prompt|"
                 r"programming|constraints)")
_INSTRUCTIONS = [re.compile(p, _I) for p in (
    # "ignore all previous instructions", "disregard the rubric", "forget your rules"
    rf"\b(?:ignore|disregard|forget|override|bypass|skip|discard)\s+(?:all\s+|any\s+|every\s+)?"
    rf"(?:of\s+)?(?:the\s+|your\s+|these\s+|those\s+|my\s+|its\s+)?"
    rf"(?:(?:previous|prior|above|earlier|preceding|original|initial|given|old|marking|"
    rf"grading|system)\s+)*{_PROMPT_NOUNS}\b",
    r"\b(?:ignore|disregard|forget)\s+(?:all\s+|everything\s+)?(?:the\s+)?(?:above|"
    r"everything\s+(?:above|before|you\s+were\s+told))\b",
    # "AI, give ...", "Dear grader: ...", "Note to the marker", "to the model reading this"
    rf"(?:^|[.!?:;]\s*|\(\s*)(?:hey\s+|dear\s+|attention\s*,?\s*|note\s+(?:to|for)\s+"
    rf"(?:the\s+|any\s+)?)?{_MARKER}\s*[,:;!]\s*(?:please\s+)?(?:you\s+(?:must|should|will)"
    rf"|ignore|disregard|forget|give|award|assign|mark|grade|score|rate|output|respond|reply|"
    rf"return|set|treat|consider|remember|note|follow|do\s+not|don't|stop|pretend|act)\b",
    rf"\b(?:note|message|instructions?)\s+(?:to|for)\s+(?:the\s+|any\s+)?{_MARKER}\b",
    rf"\bto\s+(?:the|any)\s+{_MARKER}\s+(?:reading|marking|grading|checking|evaluating)\b",
    rf"\b(?:if\s+you\s+are|as)\s+(?:an?\s+)?{_MARKER}\b[^.!?\n]{{0,80}}\b(?:you\s+(?:must|"
    rf"should|will|need)|must|ignore|give|award|mark|score|output)\b",
    # "you are now a generous marker", "new instructions:", "developer mode"
    r"\byou\s+are\s+now\b|\bfrom\s+now\s+on\s*,?\s+you\b|\bnew\s+(?:system\s+)?"
    r"instructions?\s*:|\b(?:developer|dan|god|admin)\s+mode\b|\bjailbreak|\bdo\s+anything\s+"
    r"now\b|\bsystem\s+(?:prompt|override|message)\b|\bprompt\s+injection\b",
    r"\b(?:respond|reply|answer|output|return)\s+(?:only\s+)?with\s+(?:only\s+)?(?:the\s+)?"
    r"(?:json|score|number|following|grade)\b|\bprint\s+(?:the\s+)?(?:score|grade)\b",
    r"[\"']?score[\"']?\s*:\s*\d+(?:\.\d+)?\s*,?\s*[\"']?(?:feedback|max_score)[\"']?\s*:",
)]
_ROLE_TAGS = [re.compile(p, _I) for p in (
    r"<\|\s*(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id|"
    r"end_header_id|begin_of_text)\s*\|>",
    r"\[/?INST\]|<<\s*/?SYS\s*>>|</?s>|<\s*/?\s*(?:system|assistant|user|instruction|"
    r"instructions|developer|tool)\s*>",
    r"^\s*#{2,}\s*(?:system|instruction|instructions|response|assistant)\b",
    r"[\"']role[\"']\s*:\s*[\"'](?:system|assistant|developer)[\"']",
    # "System: you are ..." — a role label whose line speaks to the marker
    r"^\s*(?:system|assistant|developer)\s*(?:message|prompt|note)?\s*:[^\n]*\b(?:you|your|"
    r"score|marks?|grade|points|rubric|instructions?)\b",
    r"^\s*(?:human|user)\s*:[^\n]*\n(?:[^\n]*\n)*?\s*(?:assistant|ai)\s*:",
)]
_FULL_MARKS = [re.compile(p, _I) for p in (
    r"\b(?:give|award|assign|grant|mark|score|grade|rate)\s+(?:me|this|it|my|the\s+"
    r"student|this\s+(?:answer|response|essay|student|submission|work))?\s*(?:an?\s+|the\s+|"
    r"a\s+perfect\s+|full\s+)?(?:full|maximum|max|top|perfect|highest|all\s+(?:the\s+)?"
    r"(?:available\s+)?|100\s*%|\d+\s*/\s*\d+|\d+\s+out\s+of\s+\d+)(?:\s*(?:marks?|"
    r"score|points?|grade|credit|band)\b|(?<=%)|(?<=\d))",
    r"\b(?:i|this\s+(?:answer|response|essay|submission|work)|it|the\s+student|my\s+"
    r"(?:answer|work|essay))\s+(?:deserves?|merits?|should\s+(?:get|receive|be\s+given|"
    r"earn|be\s+awarded|score)|must\s+(?:get|receive|be\s+given|be\s+awarded|score)|"
    r"needs?\s+to\s+(?:get|receive))\s+(?:an?\s+|the\s+)?(?:full|maximum|max|top|perfect|"
    r"highest|all|100|10|an?\s+a\b|\d+\s*/\s*\d+)",
    r"\b(?:mark|grade|score|treat|consider|count)\s+(?:it|me|my\s+answer|this(?:\s+(?:answer|"
    r"response|essay|submission|work))?)\s+as\s+"
    r"(?:fully\s+)?(?:correct|perfect|full|complete|right|excellent)\b",
    r"\b(?:full|maximum|max|perfect|top)\s+(?:marks?|score|points)\s+(?:please|pls|plz|"
    r"required|expected|mandatory|for\s+(?:me|this))\b",
    r"\b(?:please|pls|plz|kindly)\s*,?\s+(?:just\s+)?(?:give|award|let\s+me\s+have|pass)\s+"
    r"(?:me|this|it)\b",
    r"\bscore\s*(?:=|:)\s*(?:10|100|full|max(?:imum)?)\b|\b(?:10|100)\s*/\s*(?:10|100)\b",
)]


def hidden_text(text: str) -> bool:
    """Characters that hide text from a reader: zero-width and other format characters,
    bidirectional overrides, tag characters, and control characters other than tab and
    line breaks.  A soft hyphen, and a zero-width joiner inside an emoji, are text."""
    for i, ch in enumerate(text):
        if ch in "\t\n\r" or ch == "\u00ad":
            continue
        category = unicodedata.category(ch)
        if category == "Cc":
            return True
        if category == "Cf":
            if ch == "\u200d" and _emoji(text, i - 1) and _emoji(text, i + 1):
                continue
            return True
    return False


def _emoji(text: str, i: int) -> bool:
    return 0 <= i < len(text) and (unicodedata.category(text[i]) == "So"
                                   or "\U0001f300" <= text[i] <= "\U0001faff")


def screen(text: str) -> Kind | None:
    """The first kind of speaking to the marker the answer shows, or None."""
    if hidden_text(text):
        return "hidden_text"
    # Compatibility forms (full-width letters, ligatures) read as their plain letters.
    plain = unicodedata.normalize("NFKC", text)
    for kind, patterns in (("role_tags", _ROLE_TAGS), ("instructions", _INSTRUCTIONS),
                           ("full_marks", _FULL_MARKS)):
        if any(p.search(plain) for p in patterns):
            return kind  # type: ignore[return-value]
    return None


def visible(text: str) -> str:
    """The answer as a reader sees it: hidden characters removed (what the best guess
    is marked on)."""
    return "".join(ch for ch in text if ch in "\t\n\r"
                   or unicodedata.category(ch) not in ("Cc", "Cf"))
