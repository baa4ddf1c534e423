// A live stream whose connection is reset mid-stream resumes from Last-Event-ID:
// what it delivers equals, event for event, a fresh read of the whole feed.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { MarkingEvent } from "../src/client.js";
import { FROM_START, baseUrl, client, ids, payload, proxy, waitFor } from "./env.js";

function key(e: MarkingEvent): string {
  return `${e.id} ${e.queue_id} ${e.status}`;
}

async function read(api: ReturnType<typeof client>, assignmentId: string, until: number,
  into: MarkingEvent[], options: { idleMs?: number } = {}): Promise<void> {
  const stop = new AbortController();
  for await (const event of api.events(assignmentId, { lastEventId: FROM_START,
    signal: stop.signal, ...options })) {
    into.push(event);
    if (into.filter((e) => e.status === "completed").length >= until) break;
  }
  stop.abort();
}

test("a cut connection resumes without losing or repeating an event", async () => {
  const submissions = ids("ts-drop");
  const [firstHalf, secondHalf] = [submissions.slice(0, 2), submissions.slice(2)];
  const api = client();
  const cutter = await proxy(baseUrl);
  try {
    const viewer = client(cutter.url);
    const seen: MarkingEvent[] = [];
    const watching = read(viewer, "ts-drop", submissions.length, seen, { idleMs: 5000 });
    await api.enqueue({ assignment_id: "ts-drop", submission_ids: firstHalf, payload });
    await waitFor(() => seen.length >= 2);
    assert.ok(cutter.cut() >= 1, "a connection was open to cut");
    await api.enqueue({ assignment_id: "ts-drop", submission_ids: secondHalf, payload });
    await watching;
    assert.ok(cutter.connections >= 2, "the viewer reconnected after the cut");
    assert.equal(new Set(seen.map(key)).size, seen.length, "no event twice");
    const whole: MarkingEvent[] = [];
    await read(api, "ts-drop", submissions.length, whole);
    assert.deepEqual(seen.map(key), whole.slice(0, seen.length).map(key), "every event, in order");
  } finally {
    await cutter.close();
  }
});
