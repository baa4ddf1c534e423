import { MarkingClient } from "../src/client.js"; // in your app: from "aiqueue-client"

export async function markAll(baseUrl: string, secret: string, assignmentId: string,
  submissionIds: string[], payload: Record<string, unknown>) {
  const queue = new MarkingClient({ baseUrl, secret }), stop = new AbortController();
  const events = await queue.watch(assignmentId, { signal: stop.signal }); // open first
  await queue.enqueue({ assignment_id: assignmentId, submission_ids: submissionIds, payload },
    { idempotencyKey: `mark-all-${assignmentId}` }); // retry-safe
  let progress = await queue.progress(assignmentId);
  while (progress.pending + progress.processing > 0) {
    const { value: event } = await events.next(); // resumes after a dropped connection
    console.log(event?.submission_id, event?.status, event?.result);
    if (!event || ["completed", "failed", "cancelled", "expired"].includes(event.status)) {
      progress = await queue.progress(assignmentId);
    }
  }
  stop.abort();
  await queue.acceptRun(assignmentId, { actor: "teacher-42" });
  return progress;
}
