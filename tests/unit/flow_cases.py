"""The rule for the learned in-flight limit L as tables: tests/unit/test_flow.py runs them through
aiqueue/flow.py, tests/integration/test_flow.py through the database's copy of the rule."""

from __future__ import annotations

# (L before, ceiling, rows in flight, refused dispatch sent before the last cut) -> L after
REFUSAL_CASES: list[tuple[int | None, int, int, bool, int | None]] = [
    (None, 8, 8, False, 4),    # at the ceiling, full: halve
    (None, 8, 3, False, 1),    # only 3 were out: halve what was really in flight
    (8, 8, 8, False, 4),
    (5, 8, 5, False, 2),       # floor
    (2, 8, 2, False, 1),
    (1, 8, 1, False, 1),       # never below 1
    (1, 8, 0, False, 1),       # the refused row already left
    (4, 8, 4, True, 4),        # same burst: the last cut answered it already
    (None, 8, 8, True, None),
    (6, 4, 6, False, 2),       # the cap was lowered since: the ceiling bounds L
    (None, 64, 40, False, 20), # cap 0: the unlimited ceiling
    (None, 64, 200, False, 32),
]


# (L before, clean results counted, ceiling, within the learned window since L last
# changed) -> (L after, clean after)
RESULT_CASES: list[tuple[int | None, int, int, bool, tuple[int | None, int]]] = [
    (None, 0, 8, False, (None, 0)),  # at the ceiling: nothing to do (and nothing written)
    (1, 0, 8, False, (2, 0)),        # L results without a refusal: L + 1
    (2, 0, 8, False, (2, 1)),
    (2, 1, 8, False, (3, 0)),
    (4, 2, 8, False, (4, 3)),
    (4, 3, 8, False, (5, 0)),
    (7, 6, 8, False, (None, 0)),     # back at the ceiling: cleared
    (1, 0, 2, False, (None, 0)),
    (1, 0, 1, False, (None, 0)),
    # Within the model's window since the last cut or raise: L waits, the results count.
    (1, 0, 8, True, (1, 0)),
    (2, 0, 8, True, (2, 1)),
    (2, 1, 8, True, (2, 1)),
    (4, 3, 8, True, (4, 3)),
    (7, 6, 8, True, (7, 6)),
    (None, 0, 8, True, (None, 0)),
]


# (seconds since the last cut, since the last raise, the learned window) -> L waits
PACED_CASES: list[tuple[float | None, float | None, float | None, bool]] = [
    (5.0, None, 10.0, True),     # cut 5 s ago, the model's window is 10 s
    (15.0, None, 10.0, False),
    (15.0, 3.0, 10.0, True),     # raised since: one window after the raise
    (15.0, 12.0, 10.0, False),
    (5.0, None, None, False),    # no window learned: L never waits
    (None, None, 10.0, False),
]
