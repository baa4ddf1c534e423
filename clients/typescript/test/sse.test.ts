import assert from "node:assert/strict";
import { test } from "node:test";
import { SseParser } from "../src/sse.js";

test("blocks, multi-line data, comments and every line ending", () => {
  const parser = new SseParser();
  const got = parser.push(": hi\r\nid: 1-1\r\nevent: marking\r\ndata: {\"a\":\ndata: 1}\r\n\r\n"
    + "data: x\rid: 2-2\r\r\n");
  assert.deepEqual(got.map((m) => [m.id, m.event, m.data, m.hasData]),
    [["1-1", "marking", "{\"a\":\n1}", true], ["2-2", "message", "x", true]]);
});

test("a block with only an id moves the resume point without an event", () => {
  const parser = new SseParser("0-0");
  const [opening, next] = parser.push("retry: 1500\nid: 7-0\n\ndata: y\n\n");
  assert.deepEqual([opening?.id, opening?.hasData, opening?.retry], ["7-0", false, 1500]);
  assert.deepEqual([next?.id, next?.data], ["7-0", "y"]); // the id persists, per the standard
});

test("chunks may split anywhere, even a \\r\\n", () => {
  const parser = new SseParser();
  const text = "id: 3-1\r\nevent: marking\r\ndata: {\"k\": 1}\r\n\r\n";
  const got = [...text].flatMap((ch) => parser.push(ch));
  assert.equal(got.length, 1);
  assert.deepEqual(JSON.parse(got[0]!.data), { k: 1 });
});
