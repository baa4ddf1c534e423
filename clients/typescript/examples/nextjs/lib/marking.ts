// The app's one MarkingClient, on the server only: the secret never reaches a browser.
// In your app: `import { MarkingClient } from "aiqueue-client"` (this folder's ../../src).
import { MarkingClient } from "../../../src/client.js";

export function markingClient(): MarkingClient {
  const baseUrl = process.env.AIQUEUE_URL;
  const secret = process.env.MARKING_QUEUE_SECRET;
  if (!baseUrl || !secret) throw new Error("set AIQUEUE_URL and MARKING_QUEUE_SECRET");
  return new MarkingClient({ baseUrl, secret });
}
