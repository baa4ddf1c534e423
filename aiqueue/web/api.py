"""The JSON API routes: thin handlers over the queue's rules; each names its loop trigger."""

from __future__ import annotations

from uuid import UUID

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from aiqueue import logs, wire
from aiqueue.errors import StoreError
from aiqueue.queue import actions, loop, review
from aiqueue.queue.enqueue import dry_run
from aiqueue.queue.enqueue import enqueue as enqueue_jobs
from aiqueue.queue.webhook import receive_results, verify_results
from aiqueue.reads import monitor, usage
from aiqueue.reads.metrics import CONTENT_TYPE, exposition
from aiqueue.reads.stats import read_stats
from aiqueue.web import gate
from aiqueue.web.http import query_int, read_json, respond
from aiqueue.web.state import app_state, runtime
from aiqueue.wire import answers, reads


@gate.bearer()
async def enqueue(request: Request) -> Response:
    rt = await runtime(request)
    key = wire.parse_idempotency_key(request.headers.get("idempotency-key"))
    body = wire.EnqueueRequest.parse(await read_json(request))
    if body.dry_run:
        # An estimate writes nothing, so an Idempotency-Key has nothing to keep.
        return respond(await dry_run(rt, body))
    # The host's own trace (its Mark All), which each job's trace links to (docs/tracing.md).
    answer, replayed = await enqueue_jobs(rt, body, key, request.headers.get("traceparent"))
    if replayed:
        return respond(answer, 202, headers={"Idempotent-Replayed": "true"})
    return respond(answer, 202, background=BackgroundTask(loop.after_enqueue, rt, answer.enqueued))


@gate.bearer("cron")
async def process_queue(request: Request) -> Response:
    rt = await runtime(request)
    # The cron (GET) is the safety net: it always runs recovery and pruning.
    if request.method == "GET":
        step = await loop.on_cron(rt)
    else:
        step = await loop.on_process(rt, force=False)
    logs.event("process", method=request.method, claimed=step.claimed is not None,
               chained=step.chained, recovered=step.recovered, pruned=step.pruned)
    after = BackgroundTask(loop.after_process, rt, step)
    answer = answers.ProcessStep(
        claimed=step.claimed.queue_id if step.claimed else None, dispatched=step.dispatched,
        recovered=step.recovered, pruned=step.pruned, chained=step.chained)
    return respond(answer, background=after)


async def webhook(request: Request) -> Response:
    # Each item carries its own signed token: verify them all before the database.
    items = verify_results(app_state(request).tokens, await read_json(request))
    rt = await runtime(request)
    receipt = await receive_results(rt, items)
    return respond(answers.WebhookReceipt(**receipt.counts),
                   background=BackgroundTask(loop.after_results, rt, receipt))


@gate.bearer()
async def queue_list(request: Request) -> Response:
    rt = await runtime(request)
    status = wire.parse_status(request.query_params.get("status"))
    assignment = request.query_params.get("assignment_id") or None
    if assignment is not None:
        assignment = wire.parse_assignment_id(assignment)  # a NUL would be a 503
    group = wire.parse_group(request.query_params.get("group") or None)
    kind = request.query_params.get("kind") or None
    limit = query_int(request, "limit", 50, 1, 500)
    offset = query_int(request, "offset", 0, 0, 10_000_000)
    rows, total = await monitor.list_rows(
        rt, status=status, assignment_id=assignment, limit=limit, offset=offset, group=group,
        kind=wire.parse_kind(kind) if kind else None,
    )
    page = answers.QueuePage(items=[answers.QueueRow.of(r) for r in rows], total=total)
    return respond(page, background=BackgroundTask(loop.after_read, rt))


@gate.bearer()
async def stats(request: Request) -> Response:
    rt = await runtime(request)
    return respond(await read_stats(rt), background=BackgroundTask(loop.after_read, rt))


@gate.bearer()
@gate.no_body
async def retry(request: Request) -> Response:
    rt = await runtime(request)
    answer = await actions.retry_row(rt, _queue_id(request), actor="api")
    return respond(answer, background=BackgroundTask(loop.after_action, rt))


async def healthz(request: Request) -> Response:
    # The public learn only that the app is up: no database connection (docs/deploying/index.md).
    if not gate.holds_bearer(request):
        return respond(reads.Health(status="ok"))
    try:
        rt = await app_state(request).get(check_schema=False)
    except StoreError:
        return respond(monitor.unavailable(), 503)
    health = await monitor.health(rt)
    headers = {"retry-after": str(health.retry_after)} if health.retry_after else None
    return respond(health.body, health.http_status, headers=headers)


@gate.bearer("metrics")
async def metrics(request: Request) -> Response:
    rt = await runtime(request)
    return Response(await exposition(rt), media_type=CONTENT_TYPE)


def _queue_id(request: Request) -> UUID:
    return wire.parse_uuid(request.path_params["queue_id"], "queue row")


def _actor(request: Request) -> str | None:
    return review.parse_actor(request.headers.get("x-actor"))


@gate.bearer()
async def accept(request: Request) -> Response:
    rt = await runtime(request)
    adjusted = review.parse_adjusted(await read_json(request, 64 * 1024, optional=True))
    done = await review.accept(rt, _queue_id(request), _actor(request), adjusted)
    return respond(done, background=BackgroundTask(loop.after_review, rt))


@gate.bearer()
@gate.no_body
async def revert(request: Request) -> Response:
    rt = await runtime(request)
    return respond(await review.revert(rt, _queue_id(request), _actor(request)),
                   background=BackgroundTask(loop.after_review, rt))


async def _review_run(request: Request, action: str) -> Response:
    rt = await runtime(request)
    assignment_id = wire.parse_assignment_id(request.path_params["assignment_id"])
    done = await review.review_run(rt, assignment_id, action, _actor(request))
    return respond(done, background=BackgroundTask(loop.after_review, rt))


@gate.bearer()
@gate.no_body
async def accept_run(request: Request) -> Response:
    return await _review_run(request, "accept")


@gate.bearer()
@gate.no_body
async def revert_run(request: Request) -> Response:
    return await _review_run(request, "revert")


@gate.bearer()
async def results_history(request: Request) -> Response:
    rt = await runtime(request)
    submission_id = wire.parse_uuid(request.path_params["submission_id"], "submission")
    return respond(await review.history(rt, submission_id))


@gate.bearer()
async def usage_report(request: Request) -> Response:
    rt = await runtime(request)
    q = request.query_params
    report = await usage.report(rt, q.get("since"), q.get("until"), q.get("by"))
    return respond(report)


ROUTES = [
    Route("/api/marking/enqueue", enqueue, methods=["POST"]),
    Route("/api/marking/process-queue", process_queue, methods=["GET", "POST"]),
    Route("/webhooks/ai-mark", webhook, methods=["POST"]),
    Route("/api/marking/queue", queue_list, methods=["GET"]),
    Route("/api/marking/stats", stats, methods=["GET"]),
    Route("/api/marking/queue/{queue_id}/retry", retry, methods=["POST"]),
    Route("/api/marking/queue/{queue_id}/accept", accept, methods=["POST"]),
    Route("/api/marking/queue/{queue_id}/revert", revert, methods=["POST"]),
    Route("/api/marking/assignments/{assignment_id}/accept", accept_run, methods=["POST"]),
    Route("/api/marking/assignments/{assignment_id}/revert", revert_run, methods=["POST"]),
    Route("/api/marking/submissions/{submission_id}/results", results_history, methods=["GET"]),
    Route("/api/marking/usage", usage_report, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
