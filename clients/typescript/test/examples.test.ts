// The README's TypeScript: the happy path against the running app, and the
// notification receiver with signatures made by the same standardwebhooks library.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Webhook } from "standardwebhooks";
import { markAll } from "../examples/happy-path.js";
import { type Notification, notifications } from "../examples/receiver.js";
import { baseUrl, ids, payload, secret } from "./env.js";

test("the happy path marks every submission and accepts the run", async () => {
  const submissions = ids("ts-happy");
  const progress = await markAll(baseUrl, secret, "ts-happy", submissions, payload);
  assert.equal(progress.total, submissions.length);
  assert.equal(progress.completed + progress.failed, submissions.length);
});

test("the receiver takes signed notifications and refuses forged ones", async () => {
  const key = "whsec_" + Buffer.from("a test secret of 32 bytes length").toString("base64");
  const got: [string, Notification][] = [];
  const POST = notifications(key, async (id, event) => { got.push([id, event]); });
  const event: Notification = { type: "marking.row_failed", queue_id: crypto.randomUUID(),
    submission_id: crypto.randomUUID(), assignment_id: "hw-7", error: "function:timeout" };
  const body = JSON.stringify(event);
  const sign = (secretKey: string) => ({
    "webhook-id": "evt_1", "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
    "webhook-signature": new Webhook(secretKey).sign("evt_1", new Date(), body),
  });
  const ok = await POST(new Request("http://host.test/", { method: "POST", body,
    headers: sign(key) }));
  assert.equal(ok.status, 204);
  assert.deepEqual(got, [["evt_1", event]]);
  const other = "whsec_" + Buffer.from("another secret, also 32 bytes!!").toString("base64");
  const forged = await POST(new Request("http://host.test/", { method: "POST", body,
    headers: sign(other) }));
  assert.equal(forged.status, 401);
  assert.equal(got.length, 1);
});

test("the receiver's Notification is every type, narrowed by `type`", async () => {
  const key = "whsec_" + Buffer.from("a test secret of 32 bytes length").toString("base64");
  const seen: string[] = [];
  const POST = notifications(key, async (_id, event) => {
    switch (event.type) {
      case "marking.budget_warning": seen.push(`${event.cap} at ${event.threshold}`); break;
      case "marking.calibration_ready": seen.push(`${event.held} held`); break;
      case "marking.alert_opened": case "marking.alert_resolved": seen.push(event.alert); break;
      default: seen.push(event.type);
    }
  });
  const events: Notification[] = [
    { type: "marking.budget_warning", cap: "pool_usd_per_day", pool: "default", group: null,
      threshold: 0.8, spent_usd: 8, limit_usd: 10, window_ends_at: "2026-11-30T00:00:00Z" },
    { type: "marking.calibration_ready", assignment_id: "hw-7", run_id: crypto.randomUUID(),
      calibration_rows: 5, completed: 5, failed: 0, cancelled: 0, expired: 0, held: 25,
      ready_at: "2026-11-29T10:00:00Z" },
    { type: "marking.row_expired", queue_id: crypto.randomUUID(),
      submission_id: crypto.randomUUID(), assignment_id: "hw-7", error: "expired" },
  ];
  for (const [n, event] of events.entries()) {
    const body = JSON.stringify(event);
    const id = `evt_${n}`;
    const answer = await POST(new Request("http://host.test/", { method: "POST", body, headers: {
      "webhook-id": id, "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
      "webhook-signature": new Webhook(key).sign(id, new Date(), body) } }));
    assert.equal(answer.status, 204);
  }
  assert.deepEqual(seen, ["pool_usd_per_day at 0.8", "25 held", "marking.row_expired"]);
});
