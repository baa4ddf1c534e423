// useMarkingEvents in a real React renderer, against the running app, through a
// connection that is cut while rows are being marked.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "react-test-renderer";
import { type MarkingEventsState, useMarkingEvents } from "../src/useMarkingEvents.js";
import { FROM_START, baseUrl, client, ids, payload, proxy, secret, waitFor } from "./env.js";

test("the hook follows every submission to its mark across a dropped connection", async () => {
  const submissions = ids("ts-hook");
  const api = client();
  const cutter = await proxy(baseUrl);
  let state: MarkingEventsState | undefined;
  function Probe() {
    state = useMarkingEvents("ts-hook", {
      url: `${cutter.url}/api/marking/events`, headers: { authorization: `Bearer ${secret}` },
      lastEventId: FROM_START,
    });
    return null;
  }
  // No act(): the hook updates from network callbacks; the test waits on what it renders.
  const renderer = create(<Probe />);
  try {
    await waitFor(() => state?.connected === true);
    await api.enqueue({ assignment_id: "ts-hook", submission_ids: submissions, payload });
    await waitFor(() => (state?.events.length ?? 0) >= 1);
    cutter.cut();
    // The rows may all be marked before the cut is even noticed: wait for the
    // reconnection itself, not only for the marks, or the check below races it.
    await waitFor(() => cutter.connections >= 2, 30_000);
    await waitFor(() => submissions.every((id) => state?.bySubmission[id]?.status
      === "completed"), 60_000);
    const events = state!.events;
    assert.equal(new Set(events.map((e) => e.id)).size, events.length, "no event twice");
    assert.ok(cutter.connections >= 2, "it reconnected");
    assert.equal(state!.error, undefined);
  } finally {
    renderer.unmount();
    await cutter.close();
  }
});
