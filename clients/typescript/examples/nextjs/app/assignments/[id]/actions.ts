"use server";
// Mark All as a Next.js server action. The form carries an idempotency key made
// when the page rendered, so a double click or a retried submit enqueues nothing twice.
import { MarkingError } from "../../../../../src/client.js";
import { markingClient } from "../../../lib/marking.js";

export interface MarkAllState {
  enqueued?: number;
  skipped?: number;
  alreadyMarked?: number;
  replayed?: boolean;
  error?: string;
}

export async function markAll(_previous: MarkAllState, form: FormData): Promise<MarkAllState> {
  const assignmentId = String(form.get("assignment_id") ?? "");
  const submissionIds = form.getAll("submission_id").map(String);
  const idempotencyKey = String(form.get("idempotency_key") ?? "") || undefined;
  try {
    const { answer, replayed } = await markingClient().enqueue(
      { assignment_id: assignmentId, submission_ids: submissionIds },
      { idempotencyKey },
    );
    return { enqueued: answer.enqueued, skipped: answer.skipped,
      alreadyMarked: answer.already_marked, replayed };
  } catch (error) {
    if (error instanceof MarkingError) return { error: `${error.code}: ${error.detail}` };
    throw error;
  }
}
