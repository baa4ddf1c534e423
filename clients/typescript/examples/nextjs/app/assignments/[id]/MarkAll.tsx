"use client";
// The Mark All button and the live marks under it.
import { useActionState } from "react";
import { useMarkingEvents } from "../../../../../src/useMarkingEvents.js";
import { type MarkAllState, markAll } from "./actions.js";

export function MarkAll(props: { assignmentId: string; submissionIds: string[];
  idempotencyKey: string }) {
  const [state, submit, pending] = useActionState(markAll, {} as MarkAllState);
  // The browser reads the stream through this app's route, which adds the bearer.
  const live = useMarkingEvents(props.assignmentId, { url: "/api/marking-events" });
  return (
    <section>
      <form action={submit}>
        <input type="hidden" name="assignment_id" value={props.assignmentId} />
        <input type="hidden" name="idempotency_key" value={props.idempotencyKey} />
        {props.submissionIds.map((id) => (
          <input key={id} type="hidden" name="submission_id" value={id} />
        ))}
        <button disabled={pending}>Mark all with AI</button>
      </form>
      {state.error && <p role="alert">{state.error}</p>}
      {state.enqueued !== undefined && <p>{state.enqueued} queued, {state.skipped} already
        queued, {state.alreadyMarked} already marked</p>}
      <p>{live.connected ? "live" : "reconnecting…"}</p>
      <ul>
        {props.submissionIds.map((id) => {
          const event = live.bySubmission[id];
          return <li key={id}>{id}: {event?.status ?? "—"}
            {event?.result ? ` (${String(event.result.score)}/${String(event.result.max_score)})`
              : ""}</li>;
        })}
      </ul>
    </section>
  );
}
