// useMarkingEvents(assignmentId): a React hook over the live events. It reconnects
// by itself and resumes from the last event it saw (Last-Event-ID), also when the
// component re-renders with new options; it starts over only for another assignment.

import { useEffect, useRef, useState } from "react";
import { type MarkingEvent, markingEvents } from "./events.js";
import { MarkingError } from "./errors.js";

export interface MarkingEventsOptions {
  /** Where the browser reads the stream: by default a same-origin route of your app
   *  that adds the bearer server-side (see examples/nextjs); never put the secret here. */
  url?: string;
  /** A page's short-lived events token, sent as `?token=`. */
  token?: string;
  headers?: Record<string, string>;
  /** Start after this event id (else from now). */
  lastEventId?: string;
  fetch?: typeof fetch;
  /** How many recent events `events` keeps. */
  keep?: number;
}

export interface MarkingEventsState {
  /** The latest event of each submission, by submission id. */
  bySubmission: Record<string, MarkingEvent>;
  /** The most recent events, oldest first. */
  events: MarkingEvent[];
  /** A connection is open right now. */
  connected: boolean;
  /** A refusal no retry mends (401: credentials; 422: a bad assignment id). */
  error: MarkingError | undefined;
}

const EMPTY: MarkingEventsState = { bySubmission: {}, events: [], connected: false,
  error: undefined };

export function useMarkingEvents(assignmentId: string,
  options: MarkingEventsOptions = {}): MarkingEventsState {
  const [state, setState] = useState<MarkingEventsState>(EMPTY);
  const latest = useRef(options);
  latest.current = options;
  const resumeFrom = useRef<{ assignmentId: string; id: string | undefined } | undefined>(
    undefined);

  useEffect(() => {
    const opts = latest.current;
    if (resumeFrom.current?.assignmentId !== assignmentId) {
      resumeFrom.current = { assignmentId, id: opts.lastEventId };
      setState(EMPTY);
    }
    const cursor = resumeFrom.current;
    const stop = new AbortController();
    const keep = opts.keep ?? 500;
    (async () => {
      const stream = markingEvents({
        url: opts.url ?? "/api/marking/events", assignmentId, lastEventId: cursor.id,
        headers: opts.headers, query: opts.token ? { token: opts.token } : undefined,
        fetch: opts.fetch, signal: stop.signal,
        onOpen: () => setState((s) => ({ ...s, connected: true })),
        onDrop: () => setState((s) => ({ ...s, connected: false })),
      });
      try {
        for await (const event of stream) {
          cursor.id = event.id;
          setState((s) => ({
            ...s,
            bySubmission: { ...s.bySubmission, [event.submission_id]: event },
            events: [...s.events.slice(-(keep - 1)), event],
          }));
        }
      } catch (error) {
        if (!stop.signal.aborted && error instanceof MarkingError) {
          setState((s) => ({ ...s, connected: false, error }));
        }
      }
    })();
    return () => stop.abort();
  }, [assignmentId]);

  return state;
}
