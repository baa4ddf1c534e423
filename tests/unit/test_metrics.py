"""/metrics: the collector's families, written by prometheus_client and read back by its parser."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from aiqueue.flow import FlowState
from aiqueue.models import CacheCounter, Control, Stats, TallyRow
from aiqueue.models.batch import BatchGauges
from aiqueue.reads.metrics import FAMILIES, Snapshot, SnapshotCollector, exposition

TALLY = [
    TallyRow("completed", "completed", None, "gpt-x", 0.5, 2, 100, 50, 0.25, 0.6),
    TallyRow("completed_late", "completed", None, "gpt-x", None, 1, 10, 5, 0.0, 900.0),
    TallyRow("callback_failed", "failed", "function:model_timeout", None, None, 1, 0, 0, 0, 0),
    TallyRow("busy", None, "function_busy", None, None, 4, 0, 0, 0, 0),
    # A model name as the function sent it: quotes, a backslash, a newline, too long.
    TallyRow("completed", "completed", None, 'm"1\\\n' + "x" * 200, 1.0, 1, 7, 3, 0.0, 1.0),
]


def snap(tally: list[TallyRow] = TALLY) -> Snapshot:
    stats = Stats(pending=4, processing=1, completed=3, failed=1, cancelled=0, failed_today=1,
                  completed_today=3, avg_processing_seconds=1.5, p95_processing_seconds=2.0,
                  oldest_pending_seconds=12.5, expired=2, scheduled=6)
    control = Control(paused=False, paused_by=None, paused_at=None, consecutive_failures=0,
                      circuit_open_until=None, busy_until=None, circuit_state="open")
    flow = FlowState(in_flight_limit=3, hold_until=None, refusals_rate_limited=7,
                     refusals_overloaded=2, tokens_in_window=0, requests_in_window=0)
    return Snapshot(stats, control, max_in_flight=8, tally=tally, buckets=[0.5, 1.0], flow=flow)


def parsed(text: str) -> dict[str, tuple[str, dict[tuple[tuple[str, str], ...], float]]]:
    """{family: (type, {(sorted label pairs incl. the sample's suffix): value})}."""
    out = {}
    for family in text_string_to_metric_families(text):
        samples = {(("__name__", s.name), *sorted(s.labels.items())): s.value
                   for s in family.samples}
        out[family.name] = (family.type, samples)
    return out


def scrape(s: Snapshot) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(s))
    return generate_latest(registry).decode()


def test_every_contract_metric_keeps_its_name_type_and_labels():
    families = parsed(scrape(snap()))
    assert {name: kind for name, (kind, _) in families.items()} == {
        "aiqueue_queue_rows": "gauge", "aiqueue_oldest_pending_seconds": "gauge",
        "aiqueue_max_in_flight": "gauge", "aiqueue_circuit_open": "gauge",
        "aiqueue_paused": "gauge", "aiqueue_jobs_completed": "counter",
        "aiqueue_jobs_failed": "counter", "aiqueue_attempts": "counter",
        "aiqueue_tokens": "counter", "aiqueue_cost_usd": "counter",
        "aiqueue_processing_seconds": "histogram", "aiqueue_in_flight_limit": "gauge",
        "aiqueue_refusals": "counter", "aiqueue_scheduled_rows": "gauge",
    }
    assert families["aiqueue_in_flight_limit"][1] == {(("__name__", "aiqueue_in_flight_limit"),): 3}
    assert families["aiqueue_refusals"][1] == {
        (("__name__", "aiqueue_refusals_total"), ("kind", "overloaded")): 2,
        (("__name__", "aiqueue_refusals_total"), ("kind", "rate_limited")): 7}
    rows = families["aiqueue_queue_rows"][1]
    assert rows[(("__name__", "aiqueue_queue_rows"), ("status", "pending"))] == 4
    assert rows[(("__name__", "aiqueue_queue_rows"), ("status", "expired"))] == 2
    assert len(rows) == 6
    assert families["aiqueue_scheduled_rows"][1] == {(("__name__", "aiqueue_scheduled_rows"),): 6}
    assert families["aiqueue_circuit_open"][1] == {(("__name__", "aiqueue_circuit_open"),): 1}
    assert families["aiqueue_max_in_flight"][1] == {(("__name__", "aiqueue_max_in_flight"),): 8}


def test_the_prompt_cache_counts_reads_and_writes_per_pool():
    s = replace(snap(), cache=[CacheCounter("default", 58000, 2000, 4.1),
                               CacheCounter("essays", 0, 0, 0.0)])
    text = scrape(s)
    assert 'aiqueue_cache_tokens_total{pool="default",use="read"} 58000.0' in text
    assert 'aiqueue_cache_tokens_total{pool="default",use="write"} 2000.0' in text
    assert 'aiqueue_cache_tokens_total{pool="essays",use="read"} 0.0' in text
    assert 'aiqueue_cache_saved_usd_total{pool="default"} 4.1' in text
    assert "aiqueue_cache_tokens" not in scrape(snap())


def test_counters_and_the_histogram_are_cumulative():
    text = scrape(snap())
    assert "aiqueue_jobs_completed_total 4.0" in text
    assert 'aiqueue_jobs_failed_total{error="function:model_timeout"} 1.0' in text
    assert 'aiqueue_attempts_total{outcome="busy"} 4.0' in text
    assert 'aiqueue_tokens_total{kind="prompt",model="gpt-x"} 110.0' in text
    assert 'aiqueue_cost_usd_total{model="gpt-x"} 0.25' in text
    # The bucket labels keep their short form: the same series as before.
    assert 'aiqueue_processing_seconds_bucket{le="0.5"} 2.0' in text
    assert 'aiqueue_processing_seconds_bucket{le="1"} 3.0' in text
    assert 'aiqueue_processing_seconds_bucket{le="+Inf"} 4.0' in text
    assert "aiqueue_processing_seconds_count 4.0" in text
    assert "aiqueue_processing_seconds_sum 901.6" in text


def test_label_values_are_escaped_by_the_library_and_bounded():
    tokens = parsed(scrape(snap()))["aiqueue_tokens"][1]
    models = {dict(k)["model"] for k in tokens}
    assert 'm"1\\\n' + "x" * 95 in models  # read back exactly, 100 characters
    assert all(len(m) <= 100 for m in models)


def test_an_empty_tally_still_declares_every_family():
    families = parsed(scrape(snap(tally=[])))
    assert families["aiqueue_jobs_completed"][1] == {
        (("__name__", "aiqueue_jobs_completed_total"),): 0}
    assert families["aiqueue_jobs_failed"][1] == {}
    assert families["aiqueue_processing_seconds"][1][
        (("__name__", "aiqueue_processing_seconds_bucket"), ("le", "+Inf"))] == 0


def test_families_are_plain_functions_of_the_snapshot():
    # Adding a metric is one function in FAMILIES: each takes the snapshot, no I/O.
    for family in FAMILIES:
        assert list(family(snap()))


class ReadOnlyStore:
    """The reads a scrape makes, answering the snapshot above."""

    async def stats(self, at: object) -> Stats:
        assert at is None  # the database's own clock
        return snap().stats

    async def control(self, threshold: int) -> Control:
        assert threshold == 5
        return snap().control

    async def metrics_counters(self) -> list[TallyRow]:
        return TALLY

    async def metrics_buckets(self) -> list[float]:
        return [0.5, 1.0]

    async def flow_state(self, cap: int, window_seconds: float) -> FlowState:
        assert (cap, window_seconds) == (8, 60.0)
        return snap().flow

    async def pool_states(self, plan: str, threshold: int, window: float) -> list[object]:
        return []  # the snapshot above has no per-pool lines

    async def kind_counts(self) -> list[object]:
        return []

    async def batch_gauges(self) -> BatchGauges:
        return BatchGauges({}, {})  # no batch lane
    async def cache_counters(self) -> list[CacheCounter]:
        return []


async def test_a_scrape_reads_the_store_then_writes_fresh_text():
    rt = SimpleNamespace(store=ReadOnlyStore(), clock=lambda: None,
                         settings=SimpleNamespace(breaker_threshold=5, max_in_flight=8,
                                                  budget_window_seconds=60.0,
                                                  queue=SimpleNamespace(plan="{}",
                                                                        batch_pools=[],
                                                                        fallbacks=[])))
    first, second = await exposition(rt), await exposition(rt)  # type: ignore[arg-type]
    assert first == second  # a fresh registry per scrape: nothing accumulates
    assert first.decode() == scrape(snap())


def test_the_batch_lane_rows_by_pool_and_state_and_its_open_batches():
    lane = BatchGauges({("default", "waiting"): 7, ("default", "submitted"): 30,
                        ("essays", "cancelling"): 2}, {"default": 1, "essays": 1, "idle": 0})
    families = parsed(scrape(dataclasses.replace(snap(), batch=lane)))
    rows = families["aiqueue_batch_rows"][1]
    assert rows[(("__name__", "aiqueue_batch_rows"), ("pool", "default"),
                 ("state", "submitted"))] == 30
    assert len(rows) == 3
    opened = families["aiqueue_batches_open"][1]
    assert {dict(k)["pool"]: v for k, v in opened.items()} == {"default": 1, "essays": 1,
                                                               "idle": 0}
