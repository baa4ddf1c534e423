// The marker asks: the held results listed, a question answered once, nothing asked again.
import assert from "node:assert/strict";
import { test } from "node:test";
import { MarkingError } from "../src/errors.js";
import { client, ids } from "./env.js";

// Criterion 1's own words are light and glucose: the seeded "light water" answers half meet it.
const asking = { rubric: "Names light and glucose; Names water", max_score: 4 };

async function settled(assignmentId: string, n: number): Promise<void> {
  const api = client();
  const deadline = Date.now() + 60_000;
  while ((await api.progress(assignmentId)).completed < n) {
    if (Date.now() > deadline) throw new Error("the run did not finish in time");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test("a question is listed once, answered once, and the askers are marked under it", async () => {
  const api = client();
  const submissions = ids("ts-ask");
  await api.enqueue({ assignment_id: "ts-ask", submission_ids: submissions, payload: asking });
  await settled("ts-ask", submissions.length);
  const held = await api.reviewNeeded("ts-ask");
  assert.equal(held.count, submissions.length);
  assert.equal(held.questions.length, 1);
  const question = held.questions[0]!;
  assert.equal(question.rows.length, submissions.length);
  const done = await api.clarify({ assignment_id: "ts-ask", question_id: question.question_id,
    answer: "Yes, that counts." }, { actor: "teacher-ts" });
  assert.equal(done.remarked, submissions.length);
  await settled("ts-ask", submissions.length);
  assert.equal((await api.reviewNeeded("ts-ask")).count, 0);
  await assert.rejects(api.clarify({ assignment_id: "ts-ask", question_id: question.question_id,
    answer: "No." }), (error: unknown) => error instanceof MarkingError && error.status === 409);
});
