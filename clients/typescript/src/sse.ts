// A Server-Sent Events reader over fetch, per the HTML standard's parsing rules.
//
// Written here rather than taken from a package: the common parsers drop a block
// that carries only an `id:` (the standard keeps it as the last event id), and
// that block is how aiqueue tells a fresh stream where it starts, so a client
// that reconnects before any event still resumes from the right place.

export interface SseMessage {
  /** The last event id after this block (the standard's "last event ID buffer"). */
  id: string | undefined;
  event: string;
  data: string;
  /** False for a block without data: nothing to dispatch, but its id/retry count. */
  hasData: boolean;
  retry: number | undefined;
}

/** Feed text chunks; get whole blocks back. Line ends: \n, \r\n or \r. */
export class SseParser {
  private buffer = "";
  private lastId: string | undefined;
  private event = "";
  private data: string[] = [];
  private retry: number | undefined;
  private touched = false;

  constructor(lastId?: string) {
    this.lastId = lastId;
  }

  push(chunk: string): SseMessage[] {
    this.buffer += chunk;
    const out: SseMessage[] = [];
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      // A lone \r at the end may be the first half of \r\n: wait for more.
      if (!match || (match[0] === "\r" && match.index === this.buffer.length - 1)) break;
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      const message = this.line(line);
      if (message) out.push(message);
    }
    return out;
  }

  private line(line: string): SseMessage | undefined {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    this.touched = true;
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id" && !value.includes("\0")) this.lastId = value;
    else if (field === "retry" && /^\d+$/.test(value)) this.retry = Number(value);
    return undefined;
  }

  private dispatch(): SseMessage | undefined {
    if (!this.touched) return undefined;
    const message: SseMessage = {
      id: this.lastId, event: this.event || "message", data: this.data.join("\n"),
      hasData: this.data.length > 0, retry: this.retry,
    };
    this.event = "";
    this.data = [];
    this.retry = undefined;
    this.touched = false;
    return message;
  }
}
