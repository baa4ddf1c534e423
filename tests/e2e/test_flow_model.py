"""End to end against a model with a budget (docs/concepts.md): the product, the
reference function (backend openai) and the model emulator (bench/model.py),
each its own process; small windows keep it to a few seconds."""

from __future__ import annotations

import pytest

from bench.flow import FlowSetup, run_flow
from tests.e2e.servers import ROOT

# Timed end to end: one after another on one worker, never two of them at once.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("timed")]

# 40 jobs against a budget of 6 jobs' tokens per second (jobs of 40-60 ms), cap 8:
# even a loaded machine dispatches faster than that.
SMALL = FlowSetup(jobs=40, cap=8, window=1.0, jobs_per_window=6, latency=(0.04, 0.06),
                  timeout=60)


@pytest.mark.parametrize(("declare", "most_refused"), [(False, 0.35), (True, 0.1)])
async def test_a_model_that_says_slow_down_fails_no_row(
    db_url: str, declare: bool, most_refused: float
) -> None:
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    run = await run_flow(FlowSetup(**{**SMALL.__dict__, "declare": declare}), db_url,
                         logs=ROOT / "test-artifacts")
    assert (run.failed, run.completed) == (0, 40)
    assert run.refused > 0 or declare  # the model did refuse: the test tests something
    assert run.refused_share <= most_refused, run
    assert run.most_busy <= 8
    # The model's tokens were the ones the queue was told about: nothing was lost.
    assert run.tokens_used == 40 * SMALL.call_tokens


# The bench's shape (bench/flow.py: 30 jobs' tokens per 10 s, jobs of 0.4-0.6 s, cap 8),
# half as long: the goal is a share of a run long enough to learn the model's window.
LEARNED = FlowSetup(jobs=150, cap=8, window=10.0, jobs_per_window=30, latency=(0.4, 0.6),
                    timeout=180)


@pytest.mark.parametrize("retry_after_ms", [False, True])
async def test_a_model_that_declares_nothing_refuses_at_most_5_percent(
    db_url: str, retry_after_ms: bool
) -> None:
    """The goal (docs/performance.md, "Goals held by tests"): once the queue has learned the
    model's window from its first refusals, at most 5 % of calls are refused.  With Azure's
    `retry-after-ms` (one call's wait), a queue that did not learn the window was refused
    17-19 % of calls at the bench's shape."""
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    setup = FlowSetup(**{**LEARNED.__dict__, "retry_after_ms": retry_after_ms})
    run = await run_flow(setup, db_url, logs=ROOT / "test-artifacts")
    assert (run.failed, run.completed) == (0, 150)
    assert run.refused_share_after(LEARNED.window) <= 0.05, run
    assert run.refused_share <= 0.10, run
