// What the driver (tests/e2e/test_client_typescript.py) hands the node tests.
import net from "node:net";
import { MarkingClient } from "../src/client.js";

function need(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through the pytest driver`);
  return value;
}

export const baseUrl = need("AIQUEUE_URL");
export const secret = need("MARKING_QUEUE_SECRET");
/** Seeded submissions of the running app, by assignment id. */
export const seeded = JSON.parse(need("AIQUEUE_SEED")) as Record<string, string[]>;
/** The reference function marks against a rubric. */
export const payload = { rubric: "Names light; Names water", max_score: 4 };
/** A cursor before every event of the feed. */
export const FROM_START = "0-0";

export function ids(assignmentId: string): string[] {
  const found = seeded[assignmentId];
  if (!found) throw new Error(`nothing seeded for ${assignmentId}`);
  return found;
}

export function client(url = baseUrl): MarkingClient {
  return new MarkingClient({ baseUrl: url, secret });
}

export async function waitFor(condition: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A TCP proxy in front of the app whose connections can be cut (reset) at will. */
export interface Proxy {
  url: string;
  connections: number;
  cut(): number;
  close(): Promise<void>;
}

export async function proxy(target: string): Promise<Proxy> {
  const { hostname, port } = new URL(target);
  const open = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    open.add(socket);
    socket.on("close", () => open.delete(socket));
    socket.on("error", () => socket.destroy());
  };
  const state = { connections: 0 };
  const server = net.createServer((client) => {
    state.connections += 1;
    const upstream = net.connect(Number(port), hostname);
    track(client);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    get connections() { return state.connections; },
    cut() {
      const n = open.size;
      for (const socket of open) socket.resetAndDestroy();
      return n;
    },
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
