// The SSE parser and the watch's resume, with a fake fetch: a dropped
// stream, a slow_consumer end and a 503 are resumed after the last cursor,
// each event delivered once; a fatal answer ends the iterator.
import { test } from "node:test";
import assert from "node:assert/strict";
import { EskvClient, ForbiddenError, SseParser } from "../dist/esm/index.js";
import { apiError, fakeFetch, fast, stream } from "./fake.mjs";

const change = (offset, key = "k") => {
  const ev = { cursor: `p3.o${offset}`, key: `tenant/t/project/p/${key}`, version: offset, kind: "put", op: "put", value: offset, time: "", principal: "dev" };
  return `id: ${ev.cursor}\nevent: change\ndata: ${JSON.stringify(ev)}\n\n`;
};

test("the SSE parser reads fields across chunks, CRLF, comments and multi-line data", () => {
  const p = new SseParser();
  const text = ": ping\n\nid: p1.o-1\n\nevent: change\r\nid: p1.o4\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\nevent:error\ndata:{}\n\n";
  const got = [];
  for (let i = 0; i < text.length; i += 3) got.push(...p.feed(text.slice(i, i + 3)));
  assert.deepEqual(got, [
    { event: "", id: "p1.o-1", data: "" },
    { event: "change", id: "p1.o4", data: "{\"a\":\n1}" },
    { event: "error", id: "", data: "{}" },
  ]);
});

test("a watch resumes after its last cursor: dropped stream, slow_consumer, 503; each event once; a fatal answer ends it", async () => {
  const f = fakeFetch([
    () => stream(["id: p3.o0\n\n", change(1), change(2).slice(0, 20), change(2).slice(20)]),
    () => stream([change(3), "event: error\ndata: {\"error\":{\"code\":\"slow_consumer\",\"message\":\"behind\"},\"cursor\":\"p3.o3\"}\n\n"]),
    () => apiError(503, "partition_unavailable"),
    () => stream([change(4), change(5)], { end: "error" }),
    () => apiError(403, "forbidden", { field: "prefix" }),
  ]);
  const c = new EskvClient("http://eskv.test", "tok", { fetch: f.fetch, retry: fast });
  const seen = [];
  const reconnects = [];
  const err = await (async () => {
    for await (const ev of c.watch({ prefix: "tenant/t/project/p/", onReconnect: (e) => reconnects.push(e) })) seen.push(ev.version);
  })().catch((e) => e);
  assert.deepEqual(seen, [1, 2, 3, 4, 5]);
  assert.ok(err instanceof ForbiddenError, String(err));
  assert.equal(reconnects.length, 4);
  assert.deepEqual(f.calls.map((r) => r.url.searchParams.get("after")), [null, "p3.o2", "p3.o3", "p3.o3", "p3.o5"]);
  assert.equal(f.calls[0].headers.Authorization, "Bearer tok");
  assert.equal(f.calls[0].headers.Accept, "text/event-stream");
});

test("a watch from a version asks fromVersion first, then after the cursor", async () => {
  const f = fakeFetch([() => stream([change(7)]), () => apiError(401, "unauthenticated")]);
  const c = new EskvClient("http://eskv.test", "tok", { fetch: f.fetch, retry: fast });
  await assert.rejects(async () => {
    for await (const _ of c.watch({ key: "tenant/t/project/p/k", fromVersion: 2 }));
  }, { code: "unauthenticated" });
  assert.equal(f.calls[0].url.searchParams.get("fromVersion"), "2");
  assert.equal(f.calls[1].url.searchParams.get("fromVersion"), null);
  assert.equal(f.calls[1].url.searchParams.get("after"), "p3.o7");
});

test("aborting the signal or breaking out ends the watch without an error and closes the stream", async () => {
  let closed = 0;
  const f = fakeFetch([(req) => {
    req.signal.addEventListener("abort", () => closed++);
    return stream([change(1), change(2)], { end: "hang", signal: req.signal });
  }]);
  const c = new EskvClient("http://eskv.test", "tok", { fetch: f.fetch, retry: fast });
  const ac = new AbortController();
  const seen = [];
  for await (const ev of c.watch({ prefix: "tenant/t/project/p/", signal: ac.signal })) {
    seen.push(ev.version);
    if (seen.length === 2) setTimeout(() => ac.abort(), 10);
  }
  assert.deepEqual(seen, [1, 2]);
  for await (const _ of c.watch({ prefix: "tenant/t/project/p/" })) break;
  assert.equal(closed, 2);
  assert.equal(f.calls.length, 2);
});

test("a stream silent for idleTimeoutMs is reconnected", async () => {
  const f = fakeFetch([(req) => stream([change(1)], { end: "hang", signal: req.signal }), () => stream([change(2)], { end: "close" }), () => apiError(403, "forbidden")]);
  const c = new EskvClient("http://eskv.test", "tok", { fetch: f.fetch, retry: fast });
  const seen = [];
  await assert.rejects(async () => {
    for await (const ev of c.watch({ prefix: "tenant/t/project/p/", idleTimeoutMs: 50 })) seen.push(ev.version);
  }, ForbiddenError);
  assert.deepEqual(seen, [1, 2]);
  assert.equal(f.calls[1].url.searchParams.get("after"), "p3.o1");
});
