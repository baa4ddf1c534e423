"""One trace per job (docs/tracing.md): the OTEL_* settings, the spans' tree, what they carry."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aiqueue.errors import SettingsError, StoreError
from aiqueue.models import QueueId
from aiqueue.paths import ROOT
from aiqueue.settings.tracing import Tracing, env_tracing
from aiqueue.tracing import NO_SPAN, Applied, Tracer, start
from aiqueue.tracing.otel import OtelTracer, result_attributes
from tests.unit.fakes import FakeStore, make_job

ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
# Everything a span may carry: ids, codes, counts, the model, the cost.
ALLOWED = {"aiqueue.queue_id", "aiqueue.attempt", "aiqueue.kind", "aiqueue.pool",
           "aiqueue.outcome", "aiqueue.applied", "aiqueue.cost_usd", "error.type",
           "http.response.status_code", "gen_ai.request.model", "gen_ai.response.model",
           "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
           "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_creation.input_tokens"}


def read(env: dict[str, str]) -> Tracing | None:
    return env_tracing(env, ENDPOINT)


@pytest.mark.parametrize("env", [
    {}, {ENDPOINT: " "}, {ENDPOINT: "http://c:4318", "OTEL_SDK_DISABLED": "true"},
    {ENDPOINT: "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}])
def test_off_unless_an_endpoint_is_set_and_the_sdk_allowed(env: dict[str, str]) -> None:
    assert read(env) is None
    assert type(start(read(env))) is Tracer


def test_the_standard_variables_are_read() -> None:
    config = read({ENDPOINT: "https://collector.example/", "OTEL_SERVICE_NAME": "marking",
                   "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,team=a%20b",
                   "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                   "OTEL_TRACES_SAMPLER_ARG": "0.25",
                   "OTEL_EXPORTER_OTLP_HEADERS": "x-honeycomb-team=key"})
    assert config == Tracing("https://collector.example/v1/traces", "marking",
                             (("deployment.environment", "prod"), ("team", "a b")),
                             "parentbased_traceidratio", 0.25, (("x-honeycomb-team", "key"),))
    assert "key" not in repr(config)  # the collector's API key is a secret
    # The signal's own endpoint is taken as it is.
    traces = read({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom"})
    assert traces is not None and traces.endpoint == "http://c:4318/custom"
    # The SDK's batching and compression variables, as the SDK reads them.
    batching = read({ENDPOINT: "http://c", "OTEL_BSP_SCHEDULE_DELAY": "250",
                     "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "64", "OTEL_BSP_MAX_QUEUE_SIZE": "1000",
                     "OTEL_BSP_EXPORT_TIMEOUT": "5000",
                     "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip",
                     "OTEL_EXPORTER_OTLP_COMPRESSION": "none"})
    assert batching is not None
    assert (batching.delay, batching.batch, batching.queued, batching.timeout,
            batching.gzip) == (0.25, 64, 1000, 5.0, True)


@pytest.mark.parametrize(("env", "says"), [
    ({ENDPOINT: "collector:4318"}, r"ENDPOINT must be an http\(s\) URL"),
    ({ENDPOINT: "http://c", "OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER must"),
    ({ENDPOINT: "http://c", "OTEL_TRACES_SAMPLER": "traceidratio",
      "OTEL_TRACES_SAMPLER_ARG": "2"}, "from 0 to 1"),
    ({ENDPOINT: "http://c", "OTEL_RESOURCE_ATTRIBUTES": "novalue"}, "key=value"),
    ({ENDPOINT: "http://c", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "gzip or none"),
    ({ENDPOINT: "http://c", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "0"}, "BATCH_SIZE must be >= 1"),
    ({ENDPOINT: "http://c", "OTEL_BSP_SCHEDULE_DELAY": "soon"}, "DELAY must be an integer"),
])
def test_a_bad_value_stops_start_up_naming_it(env: dict[str, str], says: str) -> None:
    with pytest.raises(SettingsError, match=says):
        read(env)


def test_the_result_span_speaks_the_genai_conventions() -> None:
    usage = {"model": "claude-haiku-4-5", "prompt_tokens": 1200, "completion_tokens": 80,
             "cache_read_tokens": 1000, "cache_write_tokens": 24}
    attrs = result_attributes(Applied(QueueId(make_job().queue_id), 2, "completed", True,
                                      usage, cost_usd=0.0012))
    assert attrs["gen_ai.request.model"] == "claude-haiku-4-5"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (1200, 80)
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 1000
    assert attrs["gen_ai.usage.cache_creation.input_tokens"] == 24
    assert (attrs["aiqueue.attempt"], attrs["aiqueue.outcome"]) == (2, "completed")
    assert attrs["aiqueue.cost_usd"] == 0.0012


def otel(sampler: str = "parentbased_always_on") -> tuple[OtelTracer, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    return OtelTracer(Tracing("http://unused", sampler=sampler), exporter), exporter


async def spans(tracer: OtelTracer, exporter: InMemorySpanExporter) -> list[Any]:
    await tracer.flush()
    return list(exporter.get_finished_spans())


async def test_a_jobs_attempt_continues_its_trace_in_another_instance() -> None:
    store = FakeStore()
    job = make_job()
    here, exported_here = otel()
    started = here.now()
    await here.enqueued(store, [job.queue_id], started, kind="mark", pool="default")
    # Another instance (a chain step, the webhook's invocation) knows only the row.
    there, exported_there = otel()
    await there.claimed(store, [job], there.now())
    span = await there.dispatching(store, job)
    assert set(span.headers) == {"traceparent"}
    span.end("accepted")
    await there.applied(store, [Applied(job.queue_id, 1, "completed", True,
                                        {"model": "m", "prompt_tokens": 3})], there.now())
    (root,) = await spans(here, exported_here)
    attempt = await spans(there, exported_there)
    assert root.name == "aiqueue.enqueue" and root.parent is None
    assert [s.name for s in attempt] == ["aiqueue.claim", "aiqueue.dispatch", "aiqueue.result"]
    for s in attempt:
        assert s.context.trace_id == root.context.trace_id
        assert s.parent.span_id == root.context.span_id
    dispatch = attempt[1]
    assert span.headers["traceparent"].split("-")[2] == f"{dispatch.context.span_id:016x}"
    for s in [root, *attempt]:
        assert set(s.attributes) <= ALLOWED
        assert s.attributes["aiqueue.queue_id"] == str(job.queue_id)
        assert (s.attributes["aiqueue.kind"], s.attributes["aiqueue.pool"]) == ("mark", "default")


async def test_an_unsampled_or_untraced_job_records_and_keeps_nothing() -> None:
    store = FakeStore()
    job = make_job()
    tracer, exporter = otel("always_off")
    await tracer.enqueued(store, [job.queue_id], tracer.now(), kind="mark", pool="default")
    assert store.traces == {}
    # A job enqueued while tracing was off (or not sampled) has no trace to continue.
    on, exported = otel()
    await on.claimed(store, [job], on.now())
    assert await on.dispatching(store, job) is NO_SPAN
    await on.applied(store, [Applied(job.queue_id, 1, "failed", True, error_code="x")], 0)
    assert (await spans(tracer, exporter)) == [] and (await spans(on, exported)) == []


async def test_a_failed_dispatch_is_an_error_with_its_code() -> None:
    store = FakeStore()
    job = make_job()
    tracer, exporter = otel()
    await tracer.enqueued(store, [job.queue_id], tracer.now(), kind="mark", pool="default")
    (await tracer.dispatching(store, job)).end("failed", "http_500", 500)
    dispatch = (await spans(tracer, exporter))[-1]
    assert dispatch.attributes["error.type"] == "http_500"
    assert dispatch.attributes["http.response.status_code"] == 500
    assert dispatch.status.status_code.name == "ERROR"


@pytest.mark.parametrize("caller", [None, "", "not-a-traceparent"])
async def test_a_job_links_to_the_hosts_trace_only_when_it_sent_one(caller: str | None) -> None:
    tracer, exporter = otel()
    await tracer.enqueued(FakeStore(), [make_job().queue_id], tracer.now(), kind="mark",
                          pool="default", caller=caller)
    (root,) = await spans(tracer, exporter)
    assert root.parent is None and not root.links


async def test_each_job_is_its_own_trace_linked_to_the_hosts_mark_all() -> None:
    host = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    tracer, exporter = otel()
    jobs = [make_job().queue_id for _ in range(3)]
    await tracer.enqueued(FakeStore(), jobs, tracer.now(), kind="mark", pool="default",
                          caller=host)
    roots = await spans(tracer, exporter)
    assert len({r.context.trace_id for r in roots}) == 3
    for root in roots:
        assert root.parent is None
        (link,) = root.links
        assert f"{link.context.trace_id:032x}" == host.split("-")[1]
        assert f"{link.context.span_id:016x}" == host.split("-")[2]


class BrokenRows(FakeStore):
    async def keep_traces(self, traces: Any) -> None:
        raise StoreError("the database is down")

    async def job_traces(self, queue_ids: Any) -> Any:
        raise StoreError("the database is down")


async def test_a_database_error_loses_spans_never_the_job() -> None:
    store, job = BrokenRows(), make_job()
    tracer, exporter = otel()
    await tracer.enqueued(store, [job.queue_id], tracer.now(), kind="mark", pool="default")
    other, _ = otel()
    await other.claimed(store, [job], other.now())
    assert await other.dispatching(store, job) is NO_SPAN
    await other.applied(store, [Applied(job.queue_id, 1, "completed", True)], other.now())
    assert [s.name for s in (await spans(tracer, exporter))] == ["aiqueue.enqueue"]


class CountedRows(FakeStore):
    asked: int = 0

    async def job_traces(self, queue_ids: Any) -> Any:
        self.asked += 1
        return await super().job_traces(queue_ids)


async def test_a_job_without_a_trace_is_asked_of_the_database_once() -> None:
    # With a ratio sampler most jobs have no trace: their attempts must not each ask.
    store, job = CountedRows(), make_job()
    tracer, _ = otel()
    await tracer.claimed(store, [job], tracer.now())
    await tracer.dispatching(store, job)
    await tracer.applied(store, [Applied(job.queue_id, 1, "completed", True)], tracer.now())
    assert store.asked == 1


async def test_the_enqueuing_instance_never_asks_about_a_job_it_did_not_sample() -> None:
    store, job = CountedRows(), make_job()
    tracer, exporter = otel("always_off")
    await tracer.enqueued(store, [job.queue_id], tracer.now(), kind="mark", pool="default")
    await tracer.claimed(store, [job], tracer.now())
    assert await tracer.dispatching(store, job) is NO_SPAN
    assert store.asked == 0 and store.traces == {} and (await spans(tracer, exporter)) == []


def test_on_the_sdk_is_imported_as_the_app_is_made_not_by_its_first_request() -> None:
    # A process of its own: this one has imported the SDK already.
    code = """if True:
        import sys
        from aiqueue.settings import Settings
        from aiqueue.settings.tracing import Tracing
        from aiqueue.web.app import create_app
        create_app(Settings(queue_secrets=("s" * 32,)))
        off = "opentelemetry.sdk.trace" in sys.modules
        create_app(Settings(queue_secrets=("s" * 32,), tracing=Tracing("http://c/v1/traces")))
        print(off, "opentelemetry.sdk.trace" in sys.modules)
    """
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert ran.stdout.split() == ["False", "True"]
