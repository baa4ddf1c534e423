// A changed rubric re-marks only what it changed: the dry run, then the re-mark.
import assert from "node:assert/strict";
import { test } from "node:test";
import { client, ids, payload } from "./env.js";

async function settled(assignmentId: string, n: number): Promise<void> {
  const api = client();
  const deadline = Date.now() + 60_000;
  while ((await api.progress(assignmentId)).completed < n) {
    if (Date.now() > deadline) throw new Error("the run did not finish in time");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test("a new rubric re-marks the unreviewed answers under it", async () => {
  const api = client();
  const submissions = ids("ts-remark");
  const first = await api.enqueue({ assignment_id: "ts-remark", submission_ids: submissions,
    payload });
  await settled("ts-remark", submissions.length);
  await api.accept(first.answer.queue_ids[0]!, { actor: "teacher-ts" });
  const edited = { ...payload, rubric: "Names light; Names water; Names glucose" };
  const estimate = await api.remark({ assignment_id: "ts-remark", payload: edited,
    dry_run: true });
  assert.deepEqual([estimate.enqueued, estimate.reviewed_kept], [submissions.length - 1, 1]);
  assert.ok(estimate.estimated_tokens > 0);
  const done = await api.remark({ assignment_id: "ts-remark", payload: edited });
  assert.deepEqual([done.enqueued, done.reviewed_kept, done.unchanged],
    [submissions.length - 1, 1, 0]);
  assert.ok(done.run_id);
});
