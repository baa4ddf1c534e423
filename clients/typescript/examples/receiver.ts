import { Webhook } from "standardwebhooks";
import type { components } from "../src/schema.js"; // in your app: from "aiqueue-client"

type Schemas = components["schemas"];
/** Every notification; `event.type` tells which (TypeScript narrows on it). */
export type Notification = Schemas["RunFinished"] | Schemas["RowFailed"] | Schemas["RowExpired"]
  | Schemas["AlertOpened"] | Schemas["AlertResolved"] | Schemas["CalibrationReady"]
  | Schemas["BudgetWarning"] | Schemas["ReviewNeeded"];

export function notifications(secret: string,
  handle: (webhookId: string, event: Notification) => Promise<void>) {
  const webhook = new Webhook(secret); // QUEUE_NOTIFY_SECRET, whsec_…
  return async function POST(request: Request): Promise<Response> {
    const body = await request.text();
    let event: Notification;
    try {
      event = webhook.verify(body, Object.fromEntries(request.headers)) as Notification;
    } catch {
      return new Response(null, { status: 401 });
    }
    // One of the eight marking.* types, told by event.type; a retry repeats its webhook-id.
    await handle(request.headers.get("webhook-id") ?? "", event);
    return new Response(null, { status: 204 });
  };
}
