// Live events of one assignment that survive dropped connections: every reconnect
// sends the id of the last event handed out (Last-Event-ID), so nothing is lost
// or repeated. Works in browsers and in Node (fetch + a stream reader).

import type { components } from "./schema.js";
import { SseParser } from "./sse.js";
import { MarkingError, errorFrom } from "./errors.js";

export type MarkingEventData = components["schemas"]["MarkingEvent"];
/** One status change of a queue row, with the id to resume after it. */
export type MarkingEvent = MarkingEventData & { id: string };

export interface EventsOptions {
  /** The events URL without query, e.g. "https://app.example/api/marking/events" or a
   *  same-origin route of your own app that adds the bearer server-side. */
  url: string;
  assignmentId: string;
  /** Resume after this event id (else from now). */
  lastEventId?: string;
  headers?: Record<string, string>;
  /** Extra query parameters, e.g. `{ token }` for a page's short-lived events token. */
  query?: Record<string, string>;
  signal?: AbortSignal;
  fetch?: typeof fetch;
  /** Give up on a connection that says nothing (not even a heartbeat) for this long. */
  idleMs?: number;
  /** Told each time a connection opens, and each time one ends (dropped or ended). */
  onOpen?: () => void;
  onDrop?: () => void;
}

const DEFAULT_RETRY_MS = 1500;
const MAX_BACKOFF_MS = 30_000;

/** Every event of the assignment until `signal` aborts; a 401/422 throws MarkingError. */
export async function* markingEvents(options: EventsOptions): AsyncGenerator<MarkingEvent> {
  const doFetch = options.fetch ?? fetch;
  let lastId = options.lastEventId;
  let retryMs = DEFAULT_RETRY_MS;
  let failures = 0;
  while (!options.signal?.aborted) {
    let delay: number;
    const link = new AbortController();
    let idle: ReturnType<typeof setTimeout> | undefined;
    // Aborting ends the connection and its idle timer even while the caller holds the
    // generator suspended (it may never resume it): nothing keeps a process alive.
    const stop = () => {
      clearTimeout(idle);
      link.abort();
    };
    options.signal?.addEventListener("abort", stop);
    const watch = () => {
      clearTimeout(idle);
      idle = setTimeout(() => link.abort(), options.idleMs ?? 45_000);
    };
    try {
      const query = new URLSearchParams({ assignment_id: options.assignmentId, ...options.query });
      watch();
      const response = await doFetch(`${options.url}?${query}`, {
        headers: {
          accept: "text/event-stream",
          ...options.headers,
          ...(lastId ? { "last-event-id": lastId } : {}),
        },
        signal: link.signal,
        cache: "no-store",
      });
      if (!response.ok || !response.body) {
        const error = await errorFrom(response);
        if (response.status < 500) throw error;
        throw new Retry(error.retryAfter);
      }
      options.onOpen?.();
      const parser = new SseParser(lastId);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          watch();
          for (const message of parser.push(value)) {
            if (message.retry !== undefined) retryMs = message.retry;
            // A block with only an id (the stream's start) still moves the resume point.
            lastId = message.id ?? lastId;
            if (message.event === "marking" && message.hasData) {
              failures = 0;
              yield { ...(JSON.parse(message.data) as MarkingEventData), id: lastId ?? "" };
            }
          }
        }
      } finally {
        reader.releaseLock();
      }
      delay = retryMs; // the server ended the stream (as it does before its time limit)
    } catch (error) {
      if (error instanceof MarkingError) throw error;
      if (options.signal?.aborted) return;
      failures += 1;
      delay = error instanceof Retry && error.retryAfter !== undefined
        ? error.retryAfter * 1000
        : Math.min(retryMs * 2 ** (failures - 1), MAX_BACKOFF_MS);
    } finally {
      options.onDrop?.();
      clearTimeout(idle);
      options.signal?.removeEventListener("abort", stop);
      link.abort();
    }
    await sleep(delay, options.signal);
  }
}

class Retry extends Error {
  constructor(readonly retryAfter: number | undefined) {
    super("server error");
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done);
  });
}
