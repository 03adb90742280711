// The retry policy with a fake fetch: transient errors retried with the
// same requestId, Retry-After honoured, fatal errors and conflicts at once,
// escalation after five tries, the caller's abort never retried.
import { test } from "node:test";
import assert from "node:assert/strict";
import { EscalationError, EskvClient, ForbiddenError, NetworkError, PartitionUnavailableError, VersionConflictError } from "../dist/esm/index.js";
import { apiError, fakeFetch, fast, json } from "./fake.mjs";

const entry = (v = 1) => ({ key: "tenant/t/project/p/k", value: { n: 1 }, version: v, createdAt: "", updatedAt: "", lastWriter: "dev", semantics: {} });
const client = (f, retry = {}) => new EskvClient("http://eskv.test/", "tok", { fetch: f.fetch, retry: { ...fast, ...retry } });

test("a write is retried after network errors with the same requestId, and a replay is reported", async () => {
  const f = fakeFetch([
    () => { throw new TypeError("fetch failed"); },
    () => { throw new TypeError("fetch failed"); },
    () => json(200, entry(), { "Eskv-Replayed": "true" }),
  ]);
  const r = await client(f).put("tenant/t/project/p/k", { n: 1 });
  assert.equal(f.calls.length, 3);
  const ids = f.calls.map((c) => c.body.requestId);
  assert.match(ids[0], /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.deepEqual(ids, [ids[0], ids[0], ids[0]]);
  assert.equal(r.replayed, true);
  assert.equal(f.calls[0].headers.Authorization, "Bearer tok");
  assert.equal(f.calls[0].url.href, "http://eskv.test/v1/kv/tenant/t/project/p/k");
});

test("two writes get two requestIds", async () => {
  const f = fakeFetch([() => json(200, entry())]);
  const c = client(f);
  await c.put("tenant/t/project/p/k", 1);
  await c.put("tenant/t/project/p/k", 1);
  assert.notEqual(f.calls[0].body.requestId, f.calls[1].body.requestId);
});

test("503 partition_unavailable is retried no sooner than its Retry-After", async () => {
  const f = fakeFetch([() => apiError(503, "partition_unavailable", {}, { "Retry-After": "1" }), () => json(200, entry())]);
  const start = Date.now();
  await client(f).get("tenant/t/project/p/k");
  assert.equal(f.calls.length, 2);
  assert.ok(Date.now() - start >= 950, `waited ${Date.now() - start} ms`);
});

test("outcome_unknown, forward_loop, 429 and a proxy's 502 page are transient", async () => {
  const f = fakeFetch([
    () => apiError(503, "outcome_unknown"),
    () => apiError(503, "forward_loop"),
    () => apiError(429, "too_many_requests"),
    () => new Response("<html>bad gateway</html>", { status: 502 }),
    () => json(200, entry()),
  ]);
  const r = await client(f).put("tenant/t/project/p/k", 1);
  assert.equal(f.calls.length, 5);
  assert.equal(r.entry.version, 1);
});

test("transient errors escalate after five tries", async () => {
  const f = fakeFetch([() => apiError(503, "partition_unavailable")]);
  const err = await client(f).get("tenant/t/project/p/k").catch((e) => e);
  assert.ok(err instanceof EscalationError, String(err));
  assert.equal(err.attempts, 5);
  assert.ok(err.cause instanceof PartitionUnavailableError);
  assert.equal(f.calls.length, 5);
});

test("fatal errors and conflicts are returned at once", async () => {
  for (const [status, code, extra, Class] of [
    [403, "forbidden", {}, ForbiddenError],
    [409, "version_conflict", { currentVersion: 7 }, VersionConflictError],
    [409, "version_conflict", { field: "requestId" }, VersionConflictError],
    [500, "internal", {}, Error],
    [400, "invalid", { field: "value" }, Error],
  ]) {
    const f = fakeFetch([() => apiError(status, code, extra)]);
    const err = await client(f).put("tenant/t/project/p/k", 1, { expectedVersion: 1 }).catch((e) => e);
    assert.ok(err instanceof Class, `${code}: ${err}`);
    assert.equal(err.code, code);
    assert.equal(err.status, status);
    assert.equal(f.calls.length, 1, code);
    if (extra.currentVersion) assert.equal(err.currentVersion, 7);
    if (extra.field) assert.equal(err.field, extra.field);
  }
});

test("a try without an answer within attemptTimeoutMs is a NetworkError, retried", async () => {
  const hang = (req) => new Promise((_, reject) => req.signal.addEventListener("abort", () => reject(req.signal.reason)));
  const f = fakeFetch([hang, () => json(200, entry())]);
  const retried = [];
  await client(f, { attemptTimeoutMs: 50, onRetry: (err) => retried.push(err) }).get("tenant/t/project/p/k");
  assert.equal(f.calls.length, 2);
  assert.ok(retried[0] instanceof NetworkError, String(retried[0]));
});

test("the caller's abort ends the call and its retries with the signal's reason", async () => {
  const f = fakeFetch([() => apiError(503, "partition_unavailable", {}, { "Retry-After": "30" })]);
  const ac = new AbortController();
  setTimeout(() => ac.abort(new Error("caller gave up")), 50);
  const err = await client(f).get("tenant/t/project/p/k", { signal: ac.signal }).catch((e) => e);
  assert.ok(err instanceof PartitionUnavailableError, String(err));
  assert.equal(f.calls.length, 1);
  const before = new AbortController();
  before.abort(new Error("already"));
  const err2 = await client(f).get("tenant/t/project/p/k", { signal: before.signal }).catch((e) => e);
  assert.equal(err2.message, "already");
});

test("update retries a conflict on its schedule with a new requestId per attempt", async () => {
  let version = 1;
  const f = fakeFetch([
    () => json(200, entry(version)),
    (req) => apiError(409, "version_conflict", { currentVersion: ++version }),
    () => json(200, entry(version)),
    (req) => json(200, { ...entry(version + 1), value: req.body.value }),
  ]);
  const r = await client(f).update("tenant/t/project/p/k", (cur) => ({ n: cur.value.n + 1 }), { requestId: "job-7" });
  assert.equal(r.attempts, 2);
  assert.deepEqual(r.entry.value, { n: 2 });
  assert.deepEqual(f.calls.filter((c) => c.method === "PUT").map((c) => [c.body.requestId, c.body.expectedVersion]), [["job-7-1", 1], ["job-7-2", 2]]);
});

test("update escalates after its conflict schedule", async () => {
  const f = fakeFetch([(req) => (req.method === "GET" ? json(200, entry()) : apiError(409, "version_conflict", { currentVersion: 2 }))]);
  const err = await client(f).update("tenant/t/project/p/k", () => 1).catch((e) => e);
  assert.ok(err instanceof EscalationError, String(err));
  assert.equal(err.attempts, 4); // waits of 5, 10, 20 ms, then the last attempt
  assert.ok(err.cause instanceof VersionConflictError);
});

test("a blocking wait asks each try for what is left of it, with the same requestId", async () => {
  const f = fakeFetch([() => apiError(503, "partition_unavailable"), () => json(200, { queue: "q", data: 1, item: "i", receipt: "r", priority: 0, deliveries: 1, size: 0, version: 2 })]);
  const r = await client(f, { minWaitMs: 50, maxWaitMs: 50 }).qpop("tenant/t/project/p/q", { waitMs: 2000 });
  assert.equal(r.receipt, "r");
  const waits = f.calls.map((c) => Number(c.url.searchParams.get("wait").replace("ms", "")));
  assert.ok(waits[0] > 1900 && waits[0] <= 2000 && waits[1] < waits[0] - 20, `waits ${waits}`);
  assert.equal(f.calls[0].body.requestId, f.calls[1].body.requestId);
  await assert.rejects(client(f).qpop("tenant/t/project/p/q", { waitMs: 31000 }), { code: "invalid", field: "wait" });
});
