// Error answers map to typed errors; keys are escaped per component; the
// package loads as ESM and CommonJS; src imports nothing of Node.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import * as eskv from "../dist/esm/index.js";
import { apiError, fakeFetch, fast, json } from "./fake.mjs";

const codes = {
  invalid: "InvalidError", unauthenticated: "UnauthenticatedError", forbidden: "ForbiddenError", not_found: "NotFoundError",
  version_conflict: "VersionConflictError", lock_held: "LockHeldError", not_lock_holder: "NotLockHolderError", not_leader: "NotLeaderError",
  wrong_type: "WrongTypeError", field_mismatch: "FieldMismatchError", out_of_range: "OutOfRangeError", queue_empty: "QueueEmptyError",
  stale_receipt: "StaleReceiptError", value_too_large: "ValueTooLargeError", too_many_keys: "TooManyKeysError", cursor_expired: "CursorExpiredError",
  snapshot_expired: "SnapshotExpiredError", internal: "InternalError",
};

test("each error code answers its EskvError subclass with code, status, field and the current state", async () => {
  for (const [code, name] of Object.entries(codes)) {
    const f = fakeFetch([() => apiError(409, code, { field: "ops[2].condition.version", currentVersion: 4, failedOp: 2, currentExpiresAt: "2026-01-01T00:00:00Z" })]);
    const c = new eskv.EskvClient("http://eskv.test", "t", { fetch: f.fetch, retry: fast });
    const err = await c.qpop("tenant/t/project/p/q").catch((e) => e);
    assert.ok(err instanceof eskv[name], `${code}: ${err?.name}`);
    assert.ok(err instanceof eskv.EskvError);
    assert.equal(err.name, name);
    assert.deepEqual([err.code, err.status, err.field, err.currentVersion, err.failedOp, err.key], [code, 409, "ops[2].condition.version", 4, 2, "tenant/t/project/p/q"]);
    assert.equal(eskv.errorCode(new eskv.EscalationError(5, err)), code);
  }
});

test("an answer that is not eskv's is internal, or transient for 429/502/503/504", async () => {
  for (const [status, code] of [[404, "internal"], [504, "partition_unavailable"]]) {
    const f = fakeFetch([() => new Response("<html>nope</html>", { status })]);
    const c = new eskv.EskvClient("http://eskv.test", "t", { fetch: f.fetch, retry: { ...fast, attempts: 1 } });
    const err = await c.get("tenant/t/project/p/k").catch((e) => e);
    const e = eskv.asEskvError(err);
    assert.equal(e.code, code);
    assert.equal(e.unexpected, true);
    assert.match(e.message, /nope/);
  }
});

test("keys are escaped per component, ':' and '/' kept; verbs and queries", async () => {
  assert.equal(eskv.keyPath("tenant/a/project/b/user:alice/x y%"), "/v1/kv/tenant/a/project/b/user:alice/x%20y%25");
  const f = fakeFetch([() => new Response("{\"queue\":\"q\",\"size\":0,\"inFlight\":0}")]);
  const c = new eskv.EskvClient("http://eskv.test/", "t", { fetch: f.fetch });
  await c.qsize("tenant/a/project/b/q");
  await c.qpeek("tenant/a/project/b/q", 3);
  await c.qpop("tenant/a/project/b/q", { visibilityTimeoutSeconds: 1, requestId: "r1" });
  await c.listKeys({ prefix: "tenant/a/project/b/", limit: 5 });
  assert.deepEqual(f.calls.map((r) => `${r.method} ${r.url.pathname}${r.url.search}`), [
    "GET /v1/kv/tenant/a/project/b/q:qsize",
    "GET /v1/kv/tenant/a/project/b/q:qpeek?count=3",
    "POST /v1/kv/tenant/a/project/b/q:qpop",
    "GET /v1/kv?prefix=tenant%2Fa%2Fproject%2Fb%2F&limit=5&keysOnly=true",
  ]);
  assert.deepEqual(f.calls[2].body, { visibilityTimeoutSeconds: 1, requestId: "r1" });
  await c.verb("increment", "tenant/a/project/b/n", { by: 2 });
  assert.equal(f.calls[4].body.by, 2);
  assert.match(f.calls[4].body.requestId, /^[0-9a-f-]{36}$/, "a write through verb() gets a requestId");
});

test("the CommonJS build loads with the same surface", () => {
  const cjs = createRequire(import.meta.url)("../dist/cjs/index.js");
  assert.deepEqual(Object.keys(cjs).sort(), Object.keys(eskv).sort());
  assert.equal(JSON.parse(readFileSync(new URL("../dist/cjs/package.json", import.meta.url), "utf8")).type, "commonjs");
});

test("src imports nothing of Node (the client runs in browsers)", () => {
  const dir = new URL("../src/", import.meta.url);
  for (const name of readdirSync(dir)) {
    const text = readFileSync(new URL(name, dir), "utf8");
    assert.doesNotMatch(text, /from\s+["'](node:|fs|path|http|https|crypto|stream|buffer|events)["']|require\(|process\.|Buffer\b/, name);
  }
});

test("fieldIndexes reads the reserved key (none when absent); setFieldIndexes puts it, a compare-and-swap with expectedVersion", async () => {
  const f = fakeFetch([
    () => apiError(404, "not_found"),
    (req) => json(200, { key: "tenant/t/project/p/.eskv/field-indexes", version: 1, value: req.body.value }),
    () => json(200, { key: "tenant/t/project/p/.eskv/field-indexes", version: 1, value: { fields: ["state", "n"] } }),
  ]);
  const c = new eskv.EskvClient("http://eskv.test", "t", { fetch: f.fetch, retry: fast });
  assert.deepEqual(await c.fieldIndexes("tenant/t/project/p"), { fields: [], version: 0 });
  const w = await c.setFieldIndexes("tenant/t/project/p", ["state", "n"], { expectedVersion: 0 });
  assert.equal(w.entry.version, 1);
  const put = f.calls[1].body;
  assert.deepEqual([f.calls[1].method, put.value, put.expectedVersion], ["PUT", { fields: ["state", "n"] }, 0]);
  assert.match(f.calls[1].url.pathname, /\/v1\/kv\/tenant\/t\/project\/p\/\.eskv\/field-indexes$/);
  assert.deepEqual(await c.fieldIndexes("tenant/t/project/p"), { fields: ["n", "state"], version: 1 });
});
