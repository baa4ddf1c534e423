// A small fetch client for aiqueue's marking API. Every path and answer type comes
// from schema.d.ts, generated from the app's /api/marking/openapi.json: a route
// that changes there stops this file from compiling.

import type { components, paths } from "./schema.js";
import { MarkingError, errorFrom } from "./errors.js";
import { type MarkingEvent, markingEvents } from "./events.js";

type Schemas = components["schemas"];
type Method = "get" | "post" | "delete";
type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;
/** The JSON body of an operation's success (200 or 202). */
export type Answer<P extends keyof paths, M extends Method> =
  Operation<P, M> extends { responses: infer R }
    ? R extends { 200: { content: { "application/json": infer T } } } ? T
    : R extends { 202: { content: { "application/json": infer T } } } ? T
    : never
    : never;

export type EnqueueRequest = Schemas["EnqueueRequest"];
export type EnqueueAccepted = Schemas["EnqueueAccepted"];
/** A dry run's answer: rows, tokens, cost, ETA and the spend caps it would reach. */
export type EnqueueEstimate = Schemas["EnqueueEstimate"];
export type SubmissionStatus = Answer<"/api/marking/submissions/{submission_id}/status", "get">;
export type RunProgress = Answer<"/api/marking/assignments/{assignment_id}/progress", "get">;
export type Accepted = Answer<"/api/marking/queue/{queue_id}/accept", "post">;
export type Reverted = Answer<"/api/marking/queue/{queue_id}/revert", "post">;
export type UsageReport = Answer<"/api/marking/usage", "get">;
export type ResultHistory = Answer<"/api/marking/submissions/{submission_id}/results", "get">;
export type Stats = Answer<"/api/marking/stats", "get">;
export type Erased = Answer<"/api/marking/submissions/{submission_id}", "delete">;
export type ReplayRequest = Schemas["ReplayRequest"];
export type ReplayAnswer = Answer<"/api/marking/replay", "post">;
export type AgreementReport = Answer<"/api/marking/agreement", "get">;
export type Released = Answer<"/api/marking/runs/{run_id}/release", "post">;
/** Drift canary runs (time, trigger, model, rows, exact, qwk, cost, passed), newest first. */
export type CanaryRuns = Answer<"/api/marking/canary", "get">;
export type CanaryRun = Schemas["CanaryRunAnswer"];
export type RemarkRequest = Schemas["RemarkRequest"];
/** What a re-mark did (202): run_id, enqueued, unchanged, reviewed_kept, same_answers. */
export type RemarkAccepted = Schemas["RemarkAccepted"];
/** A re-mark's dry run: its counts and the estimate (rows, tokens, cost, ETA, caps). */
export type RemarkEstimate = Schemas["RemarkEstimate"];
/** One row as the queue list shows it, its history and its result's status (no content). */
export type RowDetail = Schemas["RowDetail"];
/** The results the marker held for a teacher; each question once, with its rows. */
export type HeldResults = Answer<"/api/marking/review_needed", "get">;
export type ClarifyRequest = Schemas["ClarifyRequest"];
/** A teacher's answer recorded (202): the new payload and the rows marked again. */
export type Clarified = Answer<"/api/marking/clarify", "post">;
/** The marking.review_needed notification: ids and the reason, never the question. */
export type ReviewNeeded = Schemas["ReviewNeeded"];
export type { MarkingEvent };

export interface Enqueued {
  answer: EnqueueAccepted;
  idempotencyKey: string;
  /** The server replayed the first answer to this key: nothing new was enqueued. */
  replayed: boolean;
}

export interface ClientOptions {
  /** The app's base URL, e.g. "https://marking.example.edu". */
  baseUrl: string;
  /** MARKING_QUEUE_SECRET: server-side only, never in a browser. */
  secret: string;
  fetch?: typeof fetch;
}

const RETRIES = 3;

export class MarkingClient {
  private readonly baseUrl: string;
  private readonly fetch: typeof fetch;

  constructor(private readonly options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.fetch = options.fetch ?? fetch;
  }

  private async call<T>(method: "GET" | "POST" | "DELETE", path: string, init: {
    body?: unknown; headers?: Record<string, string>; retry?: boolean;
  } = {}): Promise<{ data: T; response: Response }> {
    const tries = init.retry ? RETRIES : 1;
    for (let attempt = 0; ; attempt++) {
      const last = attempt === tries - 1;
      let response: Response;
      try {
        response = await this.fetch(this.baseUrl + path, {
          method,
          headers: {
            authorization: `Bearer ${this.options.secret}`,
            ...(init.body !== undefined ? { "content-type": "application/json" } : {}),
            ...init.headers,
          },
          body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
        });
      } catch (error) {
        if (last) throw error; // a network error: safe to try again only with `retry`
        await sleep(500 * 2 ** attempt);
        continue;
      }
      if (response.ok) return { data: (await response.json()) as T, response };
      const error = await errorFrom(response);
      if (response.status !== 503 || last) throw error;
      await sleep(Math.min((error.retryAfter ?? 0.5 * 2 ** attempt) * 1000, 10_000));
    }
  }

  /** Enqueue submissions; retried safely under one Idempotency-Key (made when not given). */
  async enqueue(request: EnqueueRequest, options: { idempotencyKey?: string } = {}):
    Promise<Enqueued> {
    const key = options.idempotencyKey ?? crypto.randomUUID();
    const { data, response } = await this.call<EnqueueAccepted>("POST", "/api/marking/enqueue",
      { body: request, headers: { "idempotency-key": key }, retry: true });
    return { answer: data, idempotencyKey: key,
      replayed: response.headers.get("idempotent-replayed") === "true" };
  }

  /** What an enqueue would add, use and cost, and which spend cap would stop it; writes
   * nothing (a dry run). Show it before a Mark All. */
  async estimate(request: EnqueueRequest): Promise<EnqueueEstimate> {
    return (await this.call<EnqueueEstimate>("POST", "/api/marking/enqueue",
      { body: { ...request, dry_run: true }, retry: true })).data;
  }

  async status(submissionId: string): Promise<SubmissionStatus> {
    return (await this.call<SubmissionStatus>("GET",
      `/api/marking/submissions/${seg(submissionId)}/status`, { retry: true })).data;
  }

  async progress(assignmentId: string): Promise<RunProgress> {
    return (await this.call<RunProgress>("GET",
      `/api/marking/assignments/${seg(assignmentId)}/progress`, { retry: true })).data;
  }

  async results(submissionId: string): Promise<ResultHistory> {
    return (await this.call<ResultHistory>("GET",
      `/api/marking/submissions/${seg(submissionId)}/results`, { retry: true })).data;
  }

  async accept(queueId: string, options: { result?: Record<string, unknown>; actor?: string } = {}):
    Promise<Accepted> {
    return (await this.call<Accepted>("POST", `/api/marking/queue/${seg(queueId)}/accept`, {
      body: options.result ? { result: options.result } : undefined,
      headers: actor(options.actor),
    })).data;
  }

  async revert(queueId: string, options: { actor?: string } = {}): Promise<Reverted> {
    return (await this.call<Reverted>("POST", `/api/marking/queue/${seg(queueId)}/revert`,
      { headers: actor(options.actor) })).data;
  }

  async acceptRun(assignmentId: string, options: { actor?: string } = {}):
    Promise<Answer<"/api/marking/assignments/{assignment_id}/accept", "post">> {
    return (await this.call<Answer<"/api/marking/assignments/{assignment_id}/accept", "post">>(
      "POST", `/api/marking/assignments/${seg(assignmentId)}/accept`,
      { headers: actor(options.actor) })).data;
  }

  async cancel(assignmentId: string):
    Promise<Answer<"/api/marking/assignments/{assignment_id}/cancel", "post">> {
    return (await this.call<Answer<"/api/marking/assignments/{assignment_id}/cancel", "post">>(
      "POST", `/api/marking/assignments/${seg(assignmentId)}/cancel`, { retry: true })).data;
  }

  async usage(query: { since?: string; until?: string;
    by?: "day" | "assignment" | "group" | "model" | "kind" | "pool" } = {}):
    Promise<UsageReport> {
    const params = new URLSearchParams(Object.entries(query)
      .filter((entry): entry is [string, string] => entry[1] !== undefined));
    return (await this.call<UsageReport>("GET", `/api/marking/usage?${params}`,
      { retry: true })).data;
  }

  /** Erase a submission's data from every queue table (safe to repeat). */
  async erase(submissionId: string): Promise<Erased> {
    return (await this.call<Erased>("DELETE", `/api/marking/submissions/${seg(submissionId)}`,
      { retry: true })).data;
  }

  /** Failed rows matching the filter back to pending (or, with dry_run, their count);
   *  retried safely under one Idempotency-Key (made when not given). */
  async replay(request: ReplayRequest, options: { idempotencyKey?: string } = {}):
    Promise<ReplayAnswer> {
    const key = options.idempotencyKey ?? crypto.randomUUID();
    return (await this.call<ReplayAnswer>("POST", "/api/marking/replay",
      { body: request, headers: { "idempotency-key": key }, retry: true })).data;
  }

  /** A new payload (the edited rubric) for an assignment: only the answers marked under
   *  another payload are marked again; reviewed ones are kept unless include_reviewed;
   *  an edit within debounce_seconds (default 60) replaces the one before. */
  async remark(request: RemarkRequest & { dry_run?: false },
    options?: { actor?: string }): Promise<RemarkAccepted>;
  /** The dry run: the counts and the estimate; nothing is enqueued. */
  async remark(request: RemarkRequest & { dry_run: true },
    options?: { actor?: string }): Promise<RemarkEstimate>;
  async remark(request: RemarkRequest, options: { actor?: string } = {}):
    Promise<RemarkAccepted | RemarkEstimate> {
    return (await this.call<RemarkAccepted | RemarkEstimate>("POST", "/api/marking/remark",
      { body: request, headers: actor(options.actor), retry: true })).data;
  }

  /** Release a calibrated run's held rows (`released` is 0 when none are left). */
  async release(runId: string, options: { actor?: string } = {}): Promise<Released> {
    return (await this.call<Released>("POST", `/api/marking/runs/${seg(runId)}/release`,
      { headers: actor(options.actor), retry: true })).data;
  }

  /** How often the teacher's reviews agree with the AI's scores. */
  async agreement(query: { assignment_id?: string; group?: string; kind?: string;
    model?: string; since?: string } = {}): Promise<AgreementReport> {
    const params = new URLSearchParams(Object.entries(query)
      .filter((entry): entry is [string, string] => entry[1] !== undefined));
    return (await this.call<AgreementReport>("GET", `/api/marking/agreement?${params}`,
      { retry: true })).data;
  }

  /** Drift canary runs, newest first (of one kind, or every kind's). */
  async canaryRuns(kind?: string): Promise<CanaryRuns> {
    const query = kind === undefined ? "" : `?${new URLSearchParams({ kind })}`;
    return (await this.call<CanaryRuns>("GET", `/api/marking/canary${query}`,
      { retry: true })).data;
  }

  /** Start a drift canary of the kind now (skipped, saying why, over its max_share). */
  async runCanary(kind: string): Promise<CanaryRun> {
    return (await this.call<CanaryRun>("POST", `/api/marking/canary/${seg(kind)}/run`)).data;
  }

  /** Accept the kind's drift: that canary becomes the yardstick, the gate lifts. */
  async acceptCanary(kind: string, options: { actor?: string } = {}): Promise<CanaryRun> {
    return (await this.call<CanaryRun>("POST", `/api/marking/canary/${seg(kind)}/accept`,
      { headers: actor(options.actor) })).data;
  }

  /** The results the marker held for a teacher (the "Needs you" list): reasons, best
   *  guesses, and each question once with the rows that asked it. */
  async reviewNeeded(assignmentId: string): Promise<HeldResults> {
    const params = new URLSearchParams({ assignment_id: assignmentId });
    return (await this.call<HeldResults>("GET", `/api/marking/review_needed?${params}`,
      { retry: true })).data;
  }

  /** Answer a marker's question once: a marking note in a new payload; the rows that asked
   *  (and the ones not yet sent) are marked under it. 409 already_answered after. */
  async clarify(request: ClarifyRequest, options: { actor?: string } = {}):
    Promise<Clarified> {
    return (await this.call<Clarified>("POST", "/api/marking/clarify",
      { body: request, headers: actor(options.actor) })).data;
  }

  /** One row, its attempts (time, outcome, error code, duration) and its result's status. */
  async row(queueId: string): Promise<RowDetail> {
    return (await this.call<RowDetail>("GET", `/api/marking/rows/${seg(queueId)}`,
      { retry: true })).data;
  }

  /** Cancel one pending or processing row (its late result is refused); 409 once ended. */
  async cancelRow(queueId: string): Promise<RowDetail> {
    return (await this.call<RowDetail>("POST", `/api/marking/rows/${seg(queueId)}/cancel`))
      .data;
  }

  /** End one pending row as failed with last_error "operator"; the note (≤ 200 characters) is kept on /ai-queue. */
  async failRow(queueId: string, note: string): Promise<RowDetail> {
    return (await this.call<RowDetail>("POST", `/api/marking/rows/${seg(queueId)}/fail`,
      { body: { note } })).data;
  }

  /** The period's attempts and results, content-free unless `include: "feedback"`, as the
   *  server streams them (CSV, or JSONL: one object per line). Hand the stream on (e.g.
   *  `new Response(stream)`) or read it; an error answer rejects before the stream. */
  async export(query: { from?: string; to?: string; format?: "csv" | "jsonl";
    include?: "feedback" } = {}): Promise<ReadableStream<Uint8Array>> {
    const params = new URLSearchParams(Object.entries(query)
      .filter((entry): entry is [string, string] => entry[1] !== undefined));
    const response = await this.fetch(`${this.baseUrl}/api/marking/export?${params}`, {
      headers: { authorization: `Bearer ${this.options.secret}` },
    });
    if (!response.ok) throw await errorFrom(response);
    if (response.body === null) return new Blob([]).stream();
    return response.body;
  }

  async stats(): Promise<Stats> {
    return (await this.call<Stats>("GET", "/api/marking/stats", { retry: true })).data;
  }

  /** Live events of an assignment, resuming by themselves after a dropped connection. */
  events(assignmentId: string, options: { lastEventId?: string; signal?: AbortSignal;
    idleMs?: number; onOpen?: () => void } = {}): AsyncGenerator<MarkingEvent> {
    return markingEvents({
      url: `${this.baseUrl}/api/marking/events`, assignmentId, fetch: this.fetch,
      headers: { authorization: `Bearer ${this.options.secret}` }, ...options,
    });
  }

  /** Live events from now on, resolved once the stream is open: enqueue after this
   *  and miss nothing. Stop it with `signal` or by leaving the `for await` loop. */
  async watch(assignmentId: string, options: { signal?: AbortSignal } = {}):
    Promise<AsyncGenerator<MarkingEvent>> {
    let opened!: () => void;
    const open = new Promise<void>((resolve) => { opened = resolve; });
    const stream = this.events(assignmentId, { ...options, onOpen: () => opened() });
    const first = stream.next();
    await Promise.race([open, first]); // a refusal (401, 422) rejects here
    return (async function* () {
      const head = await first;
      if (head.done) return;
      yield head.value;
      yield* stream;
    })();
  }
}

function seg(value: string): string {
  return encodeURIComponent(value);
}

function actor(name: string | undefined): Record<string, string> | undefined {
  return name ? { "x-actor": name } : undefined;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export { MarkingError };
