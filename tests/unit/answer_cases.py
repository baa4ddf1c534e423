"""The normalisation's tables (docs/same-answer.md): run through aiqueue.answers.normalise
by tests/unit/test_answers.py and through the database's aiqueue_answer_norm by
tests/integration/test_same_answer_key.py.  CASES is a kind's "loose"; STRICT_CASES
the default, which keeps case."""

from __future__ import annotations

# (answer, normalised loosely)
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

# (answer, normalised as by default: NFKC, whitespace collapsed and trimmed, case kept)
STRICT_CASES: list[tuple[str, str]] = [
    ("CO", "CO"),
    ("Co", "Co"),
    ("NaCl", "NaCl"),
    ("nacl", "nacl"),
    ("Oxygen", "Oxygen"),
    ("  oxygen.  ", "oxygen."),
    ("OXYGEN!", "OXYGEN!"),
    ("carbon \t\n  dioxide", "carbon dioxide"),
    ("carbon\u00a0dioxide", "carbon dioxide"),
    ("carbon\u3000dioxide", "carbon dioxide"),
    ("carbon\u2028dioxide", "carbon dioxide"),
    ("ＯＸＹＧＥＮ", "OXYGEN"),
    ("H₂O", "H2O"),
    ("ﬁsh", "fish"),
    ("Straße", "Straße"),
    ("ΣΟΦΟΣ", "ΣΟΦΟΣ"),
    ("e\u0301lan", "élan"),
    ("x = 1;  y = 2", "x = 1; y = 2"),
    ("", ""),
    ("   ", ""),
    (".", "."),
    ("½", "1⁄2"),
]
