// The Next.js example's server action (Mark All) and its events route, as Next.js
// would call them, against the running app.
import assert from "node:assert/strict";
import { test } from "node:test";
import { markAll } from "../examples/nextjs/app/assignments/[id]/actions.js";
import { GET } from "../examples/nextjs/app/api/marking-events/route.js";
import { SseParser } from "../src/sse.js";
import { FROM_START, ids } from "./env.js";

function form(assignmentId: string, submissionIds: string[], key: string): FormData {
  const data = new FormData();
  data.set("assignment_id", assignmentId);
  for (const id of submissionIds) data.append("submission_id", id);
  data.set("idempotency_key", key);
  return data;
}

test("Mark All enqueues once, even when the form is sent twice", async () => {
  const submissions = ids("ts-next");
  const key = crypto.randomUUID();
  const first = await markAll({}, form("ts-next", submissions, key));
  assert.deepEqual(first, { enqueued: submissions.length, skipped: 0, alreadyMarked: 0,
    replayed: false });
  const again = await markAll(first, form("ts-next", submissions, key));
  assert.deepEqual(again, { ...first, replayed: true });
  const refused = await markAll({}, form("ts-next", [crypto.randomUUID()], crypto.randomUUID()));
  assert.match(refused.error ?? "", /^invalid: /);
});

test("the events route streams the queue's events with the server's bearer", async () => {
  const stop = new AbortController();
  const request = new Request(
    `http://host.test/api/marking-events?assignment_id=ts-next`,
    { headers: { "last-event-id": FROM_START }, signal: stop.signal });
  const response = await GET(request);
  assert.equal(response.status, 200);
  assert.match(response.headers.get("content-type") ?? "", /^text\/event-stream/);
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  const parser = new SseParser();
  const statuses: string[] = [];
  while (statuses.length < ids("ts-next").length) {
    const { value, done } = await reader.read();
    if (done) break;
    for (const m of parser.push(value)) {
      if (m.event === "marking") statuses.push((JSON.parse(m.data) as { status: string }).status);
    }
  }
  stop.abort();
  await reader.cancel().catch(() => undefined);
  // The enqueue's rows, pending, come first (what follows depends on the marking).
  assert.deepEqual(statuses.slice(0, ids("ts-next").length), ids("ts-next").map(() => "pending"));
});
