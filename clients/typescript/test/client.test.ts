// The fetch client against the running app: enqueue (and its replay), live events,
// status, progress, review, usage, and the API's errors.
import assert from "node:assert/strict";
import { test } from "node:test";
import { MarkingClient, MarkingError, type MarkingEvent } from "../src/client.js";
import { FROM_START, baseUrl, client, ids, payload } from "./env.js";

test("enqueue, watch every row complete, review and read the usage", async () => {
  const api = client();
  const submissions = ids("ts-client");
  // The estimate before Mark All: a dry run writes nothing.
  const estimate = await api.estimate({ assignment_id: "ts-client", submission_ids: submissions });
  assert.deepEqual([estimate.rows, estimate.already_marked], [submissions.length, 0]);
  assert.ok(estimate.estimated_tokens > 0);
  assert.equal(estimate.capped, null);
  const first = await api.enqueue({ assignment_id: "ts-client", submission_ids: submissions,
    payload }, { idempotencyKey: "ts-client-mark-all-1" });
  const again = await api.enqueue({ assignment_id: "ts-client", submission_ids: submissions,
    payload }, { idempotencyKey: "ts-client-mark-all-1" });
  assert.equal(first.answer.enqueued, submissions.length);
  assert.equal(first.replayed, false);
  assert.equal(again.replayed, true);
  assert.deepEqual(again.answer, first.answer);

  const seen: MarkingEvent[] = [];
  const stop = new AbortController();
  for await (const event of api.events("ts-client", { lastEventId: FROM_START,
    signal: stop.signal })) {
    seen.push(event);
    if (seen.filter((e) => e.status === "completed").length === submissions.length) break;
  }
  stop.abort();
  const queueIds = new Set(first.answer.queue_ids);
  assert.ok(seen.every((e) => queueIds.has(e.queue_id)));
  assert.ok(seen.filter((e) => e.status === "completed").every((e) => e.result !== undefined));

  const status = await api.status(submissions[0]!);
  assert.equal(status.status, "completed");
  assert.equal(status.queue_position, null);
  const progress = await api.progress("ts-client");
  assert.deepEqual([progress.total, progress.completed], [submissions.length, submissions.length]);
  const [q0, q1] = first.answer.queue_ids;
  const accepted = await api.accept(q0!, { result: { score: 4, max_score: 4 }, actor: "t-1" });
  assert.equal(accepted.review, "accepted");
  assert.equal((await api.revert(q1!, { actor: "t-1" })).review, "reverted");
  assert.equal((await api.results(submissions[0]!)).items[0]?.actor, "t-1");
  const usage = await api.usage({ by: "assignment" });
  assert.ok(usage.items.some((line) => line.key === "ts-client" && line.jobs >= 2));
  assert.equal(typeof (await api.stats()).pending, "number");
});

test("the API's errors arrive as MarkingError with their code", async () => {
  const api = client();
  await assert.rejects(api.enqueue({ assignment_id: "ts-client",
    submission_ids: [crypto.randomUUID()] }), (error: unknown) => {
    assert.ok(error instanceof MarkingError);
    assert.deepEqual([error.status, error.code], [422, "invalid"]);
    assert.ok(Array.isArray(error.body["unknown_ids"]));
    return true;
  });
  await assert.rejects(api.status(crypto.randomUUID()),
    (error: unknown) => error instanceof MarkingError && error.status === 404);
  const stranger = new MarkingClient({ baseUrl, secret: "wrong" });
  await assert.rejects(stranger.progress("ts-client"),
    (error: unknown) => error instanceof MarkingError && error.code === "unauthorized");
  const events = stranger.events("ts-client");
  await assert.rejects(events.next(),
    (error: unknown) => error instanceof MarkingError && error.status === 401);
});

test("a replay's dry run counts without moving, and an erasure answers its counts", async () => {
  const api = client();
  const dry = await api.replay({ filter: { assignment_id: "ts-client" }, dry_run: true });
  assert.equal(dry.replayed, 0);
  assert.equal(dry.dry_run, true);
  const unknown = await api.erase(crypto.randomUUID());
  assert.ok(Object.values(unknown.erased).every((n) => n === 0));
  assert.equal(unknown.erased.ai_marking_queue, 0);
});

test("a calibrated run: the first rows go, the rest wait for the release", async () => {
  const api = client();
  const submissions = ids("ts-gate");
  const estimate = await api.estimate({ assignment_id: "ts-gate", submission_ids: submissions,
    calibrate: { rows: 1 } });
  assert.deepEqual([estimate.calibration?.rows, estimate.rest?.rows], [1, submissions.length - 1]);
  const run = await api.enqueue({ assignment_id: "ts-gate", submission_ids: submissions,
    payload, calibrate: { rows: 1 } });
  const runId = run.answer.run_id;
  assert.ok(runId);
  const waiting = await Promise.all(submissions.map((id) => api.status(id)));
  assert.equal(waiting.filter((s) => s.waiting_for === "calibration").length,
    submissions.length - 1);
  assert.equal((await api.release(runId, { actor: "t-1" })).released, submissions.length - 1);
  const agreement = await api.agreement({ assignment_id: "ts-gate" });
  assert.equal(typeof agreement.reviewed, "number");
  await assert.rejects(api.enqueue({ assignment_id: "ts-gate", submission_ids: submissions,
    calibrat: { rows: 1 } } as never), (error: unknown) => {
    assert.ok(error instanceof MarkingError);
    assert.deepEqual([error.status, error.body.detail], [422, "unknown field: calibrat"]);
    return true;
  });
});

test("export streams the period's attempts and results; a bad format is a MarkingError", async () => {
  const api = client();
  const submissions = ids("ts-export");
  const { answer } = await api.enqueue({ assignment_id: "ts-export", submission_ids: submissions,
    payload });
  const deadline = Date.now() + 60_000;
  while ((await api.progress("ts-export")).completed < submissions.length) {
    if (Date.now() > deadline) throw new Error("the export's rows were not marked in time");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const stream = await api.export({ format: "jsonl" });
  const text = await new Response(stream).text();
  const lines = text.trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>);
  for (const queueId of answer.queue_ids) {
    const mine = lines.filter((line) => line["queue_id"] === queueId);
    assert.ok(mine.some((line) => line["record"] === "result"), `no result line for ${queueId}`);
  }
  assert.ok(!text.includes("feedback"), "content-free without include=feedback");
  const csv = await new Response(await api.export()).text();
  assert.ok(csv.startsWith("record,"), csv.slice(0, 80));
  await assert.rejects(api.export({ format: "xml" as "csv" }), (error: unknown) =>
    error instanceof MarkingError && error.status === 422);
});
