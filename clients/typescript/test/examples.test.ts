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
