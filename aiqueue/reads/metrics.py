"""/metrics: Prometheus exposition, computed from the database at scrape time.

A scrape first reads everything it reports (`snapshot`, async), then hands
that to a collector on a fresh CollectorRegistry and lets prometheus_client
write the text.  The collector API is synchronous, so collect() only turns
the snapshot into metric families; nothing is kept between scrapes.

Adding a metric: read its data in `snapshot` (a field of Snapshot), write a
function Snapshot -> metric families, and list it in FAMILIES.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from aiqueue.flow import FlowState, KindCount, PoolState
from aiqueue.models import STATUSES, CacheCounter, Control, Stats, TallyRow
from aiqueue.models.batch import BatchGauges
from aiqueue.queue import fallback
from aiqueue.reads import batches, stats
from aiqueue.runtime import Runtime

# What generate_latest writes: the text format, version 0.0.4.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Label values come from the function (error codes, model names): bounded here,
# escaped by prometheus_client.
_LABEL_CHARS = 100


@dataclass(frozen=True)
class Snapshot:
    """Everything one scrape reports, read from the database before any family is built."""

    stats: Stats
    control: Control
    max_in_flight: int
    tally: list[TallyRow]
    buckets: list[float]
    flow: FlowState
    # Per pool and per kind (docs/concepts.md); empty: those families are left out.
    pools: list[PoolState] = field(default_factory=list)
    kinds: list[KindCount] = field(default_factory=list)
    # The overnight lane (docs/overnight.md).
    batch: BatchGauges = field(default_factory=lambda: BatchGauges({}, {}))
    # Each pool's prompt cache counters (docs/prompt-cache.md).
    cache: list[CacheCounter] = field(default_factory=list)
    # The kinds running on their fallback (docs/fallback-budgets-calendar.md): {kind: fallback}.
    fallbacks: dict[str, str] = field(default_factory=dict)


async def snapshot(rt: Runtime) -> Snapshot:
    """Read the queue's state and counters for one scrape."""
    s = rt.settings
    return Snapshot(
        stats=await rt.store.stats(rt.clock()),
        control=await rt.store.control(rt.settings.breaker_threshold),
        max_in_flight=rt.settings.max_in_flight,
        # Counters from the deltas of ai_marking_tally: pruning rows never lowers them.
        tally=await rt.store.metrics_counters(),
        buckets=await rt.store.metrics_buckets(),
        flow=await stats.flow_state(rt),
        pools=await rt.store.pool_states(s.queue.plan, s.breaker_threshold,
                                         s.budget_window_seconds),
        kinds=await rt.store.kind_counts(),
        batch=await batches.gauges(rt),
        cache=await rt.store.cache_counters(),
        fallbacks=await fallback.on_fallback(rt),
    )


async def exposition(rt: Runtime) -> bytes:
    """The /metrics body: this scrape's snapshot, written by prometheus_client."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(await snapshot(rt)))
    return generate_latest(registry)


class SnapshotCollector:
    """A prometheus_client collector of one snapshot's families (no I/O in collect)."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap

    def collect(self) -> Iterator[Metric]:
        for family in FAMILIES:
            yield from family(self.snap)


# -- the queue's state ------------------------------------------------------

def queue_gauges(snap: Snapshot) -> Iterable[Metric]:
    rows = GaugeMetricFamily("aiqueue_queue_rows", "Rows in ai_marking_queue by status.",
                             labels=["status"])
    for status in STATUSES:
        rows.add_metric([status], getattr(snap.stats, status))
    yield rows
    yield GaugeMetricFamily("aiqueue_oldest_pending_seconds",
                            "Age of the oldest pending row that is due (scheduled rows wait "
                            "from their not_before on).",
                            value=snap.stats.oldest_pending_seconds or 0)
    yield GaugeMetricFamily("aiqueue_scheduled_rows",
                            "Pending rows not due before their not_before.",
                            value=snap.stats.scheduled)
    yield from batch_families(snap)


def dispatch_gauges(snap: Snapshot) -> Iterable[Metric]:
    yield GaugeMetricFamily("aiqueue_max_in_flight",
                            "The configured in-flight cap (0 = unlimited).",
                            value=snap.max_in_flight)
    yield GaugeMetricFamily("aiqueue_circuit_open",
                            "1 while dispatching is paused by the circuit breaker.",
                            value=int(snap.control.circuit_open))
    yield GaugeMetricFamily("aiqueue_paused", "1 while an operator paused dispatching.",
                            value=int(snap.control.paused))


def flow_families(snap: Snapshot) -> Iterable[Metric]:
    """The learned limit L and the model's refusals (docs/concepts.md)."""
    yield GaugeMetricFamily("aiqueue_in_flight_limit",
                            "The learned in-flight limit L (0 = unlimited).",
                            value=snap.flow.in_flight_limit)
    yield _counter("aiqueue_refusals", "Calls the model refused (rate_limited, overloaded).",
                   ["kind"], {"rate_limited": snap.flow.refusals_rate_limited,
                              "overloaded": snap.flow.refusals_overloaded})
    yield from pool_families(snap)


def pool_families(snap: Snapshot) -> Iterable[Metric]:
    """Each pool's L, slots, hold and refusals; rows by kind and pool (docs/concepts.md).

    Part of flow_families (the default pool's L and refusals are its top lines).
    The refusal's own kind (rate_limited, overloaded) is the label `reason` here:
    `kind` names a task kind in these families.
    """
    if not snap.pools:
        return
    limit = GaugeMetricFamily("aiqueue_pool_in_flight_limit",
                              "A pool's learned in-flight limit L (0 = unlimited).",
                              labels=["pool"])
    busy = GaugeMetricFamily("aiqueue_pool_in_flight", "Rows holding a slot of a pool.",
                             labels=["pool"])
    held = GaugeMetricFamily("aiqueue_pool_held",
                             "1 while a pool is held after its model refused.", labels=["pool"])
    refusals = CounterMetricFamily("aiqueue_pool_refusals",
                                   "Calls a pool's model refused, by reason.",
                                   labels=["pool", "reason"])
    for p in snap.pools:
        limit.add_metric([p.pool], p.in_flight_limit)
        busy.add_metric([p.pool], p.in_flight)
        held.add_metric([p.pool], int(p.hold_until is not None))
        refusals.add_metric([p.pool, "overloaded"], p.refusals_overloaded)
        refusals.add_metric([p.pool, "rate_limited"], p.refusals_rate_limited)
    rows = GaugeMetricFamily("aiqueue_kind_rows", "Rows by task kind, pool and status.",
                             labels=["kind", "pool", "status"])
    for c in snap.kinds:
        rows.add_metric([c.kind, c.pool, c.status], c.n)
    fallen = GaugeMetricFamily("aiqueue_kind_on_fallback",
                               "1 while a kind's rows go to its fallback kind (its pool is "
                               "down).", labels=["kind", "fallback"])
    for kind, other in sorted(snap.fallbacks.items()):
        fallen.add_metric([kind, other], 1)
    yield from (limit, busy, held, refusals, rows, fallen)


# -- counters that only grow (ai_marking_tally) ---------------------------------

@dataclass
class Totals:
    """The tally's deltas summed per label set."""

    completed: int = 0
    seconds: float = 0.0
    failed: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    attempts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    tokens: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    cost: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    by_le: dict[float | None, int] = field(default_factory=lambda: defaultdict(int))


# The tally's outcome of a row an operator failed (a job counted, not an attempt).
OPERATOR = "operator"


def label(value: str | None) -> str:
    return (value or "unknown")[:_LABEL_CHARS]


def totals(rows: Iterable[TallyRow]) -> Totals:
    t = Totals()
    for r in rows:
        if r.outcome != OPERATOR:  # an operator's fail ended no dispatch
            t.attempts[label(r.outcome)] += r.n
        if r.job == "failed":
            t.failed[label(r.error)] += r.n
        if r.job != "completed":
            continue
        t.completed += r.n
        t.seconds += r.seconds
        t.by_le[r.le] += r.n
        model = label(r.model)
        t.tokens[(model, "prompt")] += r.prompt_tokens
        t.tokens[(model, "completion")] += r.completion_tokens
        t.cost[model] += r.cost_usd
    return t


def job_counters(snap: Snapshot) -> Iterable[Metric]:
    t = totals(snap.tally)
    yield CounterMetricFamily("aiqueue_jobs_completed", "Jobs whose result was applied.",
                              value=t.completed)
    yield _counter("aiqueue_jobs_failed",
                    "Jobs that ended failed, by error code.", ["error"], t.failed)
    yield _counter("aiqueue_attempts", "Ended dispatch attempts, by outcome.",
                    ["outcome"], t.attempts)
    yield _counter("aiqueue_tokens",
                    "Tokens the function reported, by model and kind.", ["model", "kind"],
                    t.tokens)
    cost = {model: round(usd, 9) for model, usd in t.cost.items()}
    yield _counter("aiqueue_cost_usd",
                    "Known cost of applied results in USD, by model.", ["model"], cost)
    yield processing_histogram(t, snap.buckets)
    yield from cache_counters(snap)


def processing_histogram(t: Totals, bounds: list[float]) -> Metric:
    """Cumulative buckets; `le` keeps its short form ("1", not "1.0"): the series' names."""
    running, buckets = 0, []
    for le in bounds:
        running += t.by_le.get(le, 0)
        buckets.append((f"{le:g}", running))
    buckets.append(("+Inf", t.completed))
    return HistogramMetricFamily("aiqueue_processing_seconds",
                                 "Dispatch-to-result time of completed jobs.",
                                 buckets=buckets, sum_value=round(t.seconds, 3))


def _counter(name: str, doc: str, labels: list[str],
             values: Mapping[str, float] | Mapping[tuple[str, str], float]) -> Metric:
    """A counter with one sample per label value (or tuple of them), in sorted order."""
    family = CounterMetricFamily(name, doc, labels=labels)
    for key, value in sorted(values.items()):
        names: tuple[str, ...] = key if isinstance(key, tuple) else (key,)
        family.add_metric(list(names), value)
    return family


def batch_families(snap: Snapshot) -> Iterable[Metric]:
    """The overnight lane: its rows by pool and state, its open batches by pool (left out
    while no pool declares a batch API and no batch is open)."""
    if not snap.batch.rows and not snap.batch.open:
        return
    rows = GaugeMetricFamily(
        "aiqueue_batch_rows", "Batch-lane rows by pool and state: 'waiting' for a batch, "
        "else the state of the batch that holds them.", labels=["pool", "state"])
    for (pool, state), n in sorted(snap.batch.rows.items()):
        rows.add_metric([label(pool), label(state)], n)
    yield rows
    opened = GaugeMetricFamily(
        "aiqueue_batches_open", "Provider batches the app may still keep something at, by "
        "pool.", labels=["pool"])
    for pool, n in sorted(snap.batch.open.items()):
        opened.add_metric([label(pool)], n)
    yield opened
def cache_counters(snap: Snapshot) -> Iterable[Metric]:
    """The provider's prompt cache per pool: input tokens read and written, USD saved.

    Part of job_counters; left out while no result has been counted.
    """
    if not snap.cache:
        return
    tokens = CounterMetricFamily("aiqueue_cache_tokens",
                                 "Input tokens the model read from or wrote to its prompt "
                                 "cache, by pool.", labels=["pool", "use"])
    saved = CounterMetricFamily("aiqueue_cache_saved_usd",
                                "What the prompt cache saved in USD (writes counted against "
                                "it), by pool.", labels=["pool"])
    for c in snap.cache:
        tokens.add_metric([label(c.pool), "read"], c.read_tokens)
        tokens.add_metric([label(c.pool), "write"], c.write_tokens)
        saved.add_metric([label(c.pool)], round(c.saved_usd, 9))
    yield from (tokens, saved)


# Every family a scrape reports, in order.
FAMILIES: tuple[Callable[[Snapshot], Iterable[Metric]], ...] = (
    queue_gauges, dispatch_gauges, flow_families, job_counters,
)
