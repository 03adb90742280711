// keepLock with a fake fetch: it renews every third of the TTL, reports a
// refused renewal through lost and its signal, and releases once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { EskvClient, LeaseLostError, LeaseReleasedError, LockHeldError } from "../dist/esm/index.js";
import { apiError, fakeFetch, fast, json } from "./fake.mjs";

const lock = (token = 5) => ({ key: "tenant/t/project/p/lock", holder: "h", token, version: token, acquiredAt: "2026-01-01T00:00:00Z", expiresAt: "2026-01-01T00:00:01Z", reentered: false });

test("a refused renewal is reported by lost and the signal", async () => {
  let extends_ = 0;
  const f = fakeFetch([(req) => {
    if (req.url.pathname.endsWith(":acquire")) return json(200, lock());
    if (req.url.pathname.endsWith(":extend")) return ++extends_ <= 2 ? json(200, lock()) : apiError(409, "not_lock_holder");
    return json(200, { key: "k", version: 9, released: true });
  }]);
  const c = new EskvClient("http://eskv.test", "t", { fetch: f.fetch, retry: fast });
  const start = Date.now();
  const l = await c.keepLock("tenant/t/project/p/lock", "h", { ttlSeconds: 1 });
  assert.equal(l.token, 5);
  const why = await l.lost;
  const ms = Date.now() - start;
  assert.ok(why instanceof LeaseLostError, String(why));
  assert.equal(why.unconfirmed, false);
  assert.equal(why.cause.code, "not_lock_holder");
  assert.ok(l.signal.aborted && l.signal.reason === why);
  assert.ok(ms >= 900 && ms < 3000, `lost after ${ms} ms (three renewals a third of a second apart)`);
  assert.equal(extends_, 3);
  await assert.rejects(l.release(), LeaseLostError);
  assert.equal(f.calls.filter((r) => r.url.pathname.endsWith(":release")).length, 0);
});

test("renewals that get no answer lose the lease, unconfirmed, before it ends", async () => {
  const f = fakeFetch([(req) => (req.url.pathname.endsWith(":acquire") ? json(200, lock()) : apiError(503, "partition_unavailable"))]);
  const c = new EskvClient("http://eskv.test", "t", { fetch: f.fetch, retry: fast });
  const start = Date.now();
  const l = await c.keepLock("tenant/t/project/p/lock", "h", { ttlSeconds: 1 });
  const why = await l.lost;
  assert.ok(why instanceof LeaseLostError && why.unconfirmed, String(why));
  assert.ok(Date.now() - start < 1000, "lost before the lease's end");
});

test("release stops renewing, releases once, and lost answers LeaseReleasedError", async () => {
  const f = fakeFetch([(req) => (req.url.pathname.endsWith(":release") ? json(200, { key: "k", version: 9, released: true }) : json(200, lock()))]);
  const c = new EskvClient("http://eskv.test", "t", { fetch: f.fetch, retry: fast });
  const l = await c.keepLock("tenant/t/project/p/lock", "h", { ttlSeconds: 3 });
  await Promise.all([l.release(), l.release()]);
  assert.ok((await l.lost) instanceof LeaseReleasedError);
  assert.equal(f.calls.filter((r) => r.url.pathname.endsWith(":release")).length, 1);
  assert.equal(f.calls[0].body.holder, "h");
  assert.equal(f.calls[0].body.ttlSeconds, 3);
});

test("a lock held by another holder is LockHeldError from keepLock", async () => {
  const f = fakeFetch([() => apiError(409, "lock_held", { currentExpiresAt: "2026-01-01T00:00:00Z" })]);
  const c = new EskvClient("http://eskv.test", "t", { fetch: f.fetch, retry: fast });
  await assert.rejects(c.keepLock("tenant/t/project/p/lock", "h", { ttlSeconds: 2 }), LockHeldError);
});
