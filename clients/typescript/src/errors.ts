import type { components } from "./schema.js";

export type ErrorBody = components["schemas"]["Error"];

/** An answer that was not a success: the API's `{error, detail}` and the status. */
export class MarkingError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly body: ErrorBody,
    readonly retryAfter: number | undefined,
  ) {
    super(`${status} ${code}: ${detail}`);
    this.name = "MarkingError";
  }
}

export async function errorFrom(response: Response): Promise<MarkingError> {
  let body: ErrorBody;
  try {
    body = (await response.json()) as ErrorBody;
    if (typeof body?.error !== "string") throw new Error("not the API's error");
  } catch {
    body = { error: "http_error", detail: response.statusText || "no detail" };
  }
  const retryAfter = Number(response.headers.get("retry-after") ?? NaN);
  return new MarkingError(response.status, body.error, body.detail, body,
    Number.isFinite(retryAfter) ? retryAfter : undefined);
}
