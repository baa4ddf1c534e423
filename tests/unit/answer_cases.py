"""The normalisation's table (CONTRACT §10c): run through aiqueue.answers.normalise by
tests/unit/test_answers.py and through the database's aiqueue_answer_norm by
tests/integration/test_same_answer_key.py."""

from __future__ import annotations

# (answer, normalised)
CASES: list[tuple[str, str]] = [
    ("Oxygen", "oxygen"),
    ("  oxygen.  ", "oxygen"),
    ("OXYGEN!", "oxygen"),
    ("oxygen !", "oxygen"),
    ("oxygen...", "oxygen.."),
    ("oxygen?", "oxygen?"),
    ("carbon \t\n  dioxide", "carbon dioxide"),
    ("carbon\u00a0dioxide", "carbon dioxide"),
    ("carbon\u3000dioxide", "carbon dioxide"),
    ("carbon\u2028dioxide", "carbon dioxide"),
    ("ＯＸＹＧＥＮ", "oxygen"),
    ("H₂O", "h2o"),
    ("ﬁsh", "fish"),
    ("Straße", "strasse"),
    ("STRASSE", "strasse"),
    ("ΣΟΦΟΣ", "σοφοσ"),
    ("σοφος", "σοφοσ"),
    ("Élan", "élan"),
    ("e\u0301lan", "élan"),
    ("Привет", "привет"),
    ("I don't know.", "i don't know"),
    ("", ""),
    ("   ", ""),
    (".", ""),
    ("!", ""),
    ("a.b.", "a.b"),
    ("Oxygen.  ", "oxygen"),
    ("Oxygen  .", "oxygen"),
    ("two  spaces.", "two spaces"),
    ("tab\tthen.", "tab then"),
    (" . ", ""),
    ("ÉLAN.", "élan"),
    ("½", "1⁄2"),
]
