// The TypeScript client's conformance runner (the protocol of the
// conformance/ harness): node test/conformance.mjs <scenario>, with
// ESKV_URL, ESKV_TOKEN, ESKV_PREFIX and ESKV_CONTROL set. It prints each
// check, one line each, and exits 0 when all held, 1 otherwise (the reason
// on stderr). It uses the built package (npm run build first).

import {
  EskvClient, LeaseLostError, LockHeldError, NotFoundError, StaleReceiptError, VersionConflictError, asEskvError,
} from "../dist/esm/index.js";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

/** check prints what held, or throws what did not. */
function check(ok, what, detail = "") {
  if (!ok) throw new Error(`check failed: ${what}${detail ? `: ${detail}` : ""}`);
  console.log(`ok: ${what}`);
}

/** expectError runs fn and returns the error it throws, checking its class. */
async function expectError(fn, Class, what) {
  try {
    const got = await fn();
    throw new Error(`check failed: ${what}: no error, answered ${JSON.stringify(got)}`);
  } catch (err) {
    if (err instanceof Error && err.message.startsWith("check failed")) throw err;
    check(err instanceof Class, what, `got ${err?.name}: ${err?.message}`);
    return err;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

async function control(path) {
  const res = await fetch(env("ESKV_CONTROL") + path, { method: "POST" });
  const text = await res.text();
  if (!res.ok) throw new Error(`control ${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

const scenarios = {
  async "write-then-read"(c, p) {
    const put = await c.put(`${p}k`, { n: 1 });
    check(put.entry.version >= 1, `put k answered version ${put.entry.version}`);
    const got = await c.get(`${p}k`);
    check(same(got.value, { n: 1 }) && got.version === put.entry.version, `get k: value ${JSON.stringify(got.value)}, version ${got.version}`);
    const del = await c.delete(`${p}k`);
    check(del.deleted === true, `delete k: version ${del.version}`);
    await expectError(() => c.get(`${p}k`), NotFoundError, "get k after delete: NotFoundError");
  },

  async "cas-conflict"(c, p) {
    const v1 = (await c.put(`${p}k`, { n: 1 })).entry.version;
    check(v1 >= 1, `put k: v1 = ${v1}`);
    const v2 = (await c.put(`${p}k`, { n: 2 }, { expectedVersion: v1 })).entry.version;
    check(v2 > v1, `CAS put expecting v1: v2 = ${v2}`);
    const err = await expectError(() => c.put(`${p}k`, { n: 3 }, { expectedVersion: v1 }), VersionConflictError, "CAS put expecting v1 again: VersionConflictError");
    check(err.currentVersion === v2, `the conflict exposes currentVersion ${err.currentVersion} = v2`);
    const got = await c.get(`${p}k`);
    check(got.version === v2 && same(got.value, { n: 2 }), `get k still shows v2's value ${JSON.stringify(got.value)}`);
  },

  async "retry-replay"(c, p) {
    const path = new URL(`${c.baseUrl}/v1/kv/${p}k`).pathname;
    const armed = await control(`/drop-next-response?path=${encodeURIComponent(path)}`);
    check(armed.armed === true, `drop-next-response armed for ${path}`);
    const retried = [];
    const rc = new EskvClient(c.baseUrl, env("ESKV_TOKEN"), { retry: { onRetry: (err) => retried.push(err) } });
    const put = await rc.put(`${p}k`, { n: 1 });
    check(retried.length >= 1, `the put was retried after ${retried[0]?.name}: ${retried[0]?.message}`);
    check(put.replayed === true, `the retry was answered as a replay (Eskv-Replayed: true), version ${put.entry.version}`);
    const versions = [];
    for await (const v of c.history(`${p}k`)) versions.push(v);
    check(versions.length === 1, `history of k holds exactly one version (${versions.map((v) => v.version).join(",")})`);
  },

  async "watch-resume"(c, p) {
    const ac = new AbortController();
    const reconnects = [];
    // The watch starts at the prefix's position now (a listing's), so
    // that k1 is in it however long the stream takes to open.
    const { position } = await c.listKeys({ prefix: p });
    check(!!position, `the prefix is at position ${position}`);
    const events = c.watch({ prefix: p, after: position, signal: ac.signal, onReconnect: (err) => reconnects.push(err) })[Symbol.asyncIterator]();
    const first = events.next();
    await c.put(`${p}k1`, { n: 1 });
    const e1 = await withTimeout(first, 20000, "the event of k1");
    check(e1.value?.key === `${p}k1`, `received k1's event at ${e1.value?.cursor}`);
    const killed = await control("/kill-writer");
    check(!!killed.killed, `kill-writer: ${JSON.stringify(killed)}`);
    // A takeover of the partition takes longer (~10-15 s) than the default
    // five tries (with Retry-After: 1, ~5 s): the writes use more tries.
    const patient = new EskvClient(c.baseUrl, env("ESKV_TOKEN"), { retry: { attempts: 40 } });
    for (let i = 2; i <= 5; i++) {
      const r = await patient.put(`${p}k${i}`, { n: i });
      console.log(`put k${i}: version ${r.entry.version}`);
    }
    const got = [];
    while (got.length < 4) {
      const ev = await withTimeout(events.next(), 60000, `the events of k2..k5 (got ${got.map((e) => e.key).join(",")})`);
      if (ev.done) throw new Error("the watch ended");
      got.push(ev.value);
    }
    const keys = got.map((e) => e.key.slice(p.length));
    check(same(keys, ["k2", "k3", "k4", "k5"]), `the same watch delivered ${keys.join(",")} once each, in order`);
    const offsets = [e1.value, ...got].map((e) => Number(e.cursor.split(".o")[1]));
    check(offsets.every((o, i) => i === 0 || o > offsets[i - 1]), `positions increase: ${offsets.join(",")}`);
    check(reconnects.length >= 1, `it resumed by itself after ${reconnects.length} dropped connection(s): ${reconnects[0]?.message ?? ""}`);
    ac.abort();
    const end = await withTimeout(events.next(), 5000, "the watch's end");
    check(end.done === true, "the watch stopped");
  },

  async "lock-keepalive-loss"(c, p) {
    const key = `${p}lock`;
    const lease = await c.keepLock(key, "conformance-ts", { ttlSeconds: 2 });
    check(lease.token > 0, `keepLock took the lock, token ${lease.token}`);
    await sleep(5000);
    check(!lease.signal.aborted, "after 5 s the keep-alive still holds it");
    await expectError(() => c.acquireLock(key, "another-holder", { ttlSeconds: 2 }), LockHeldError, "an acquire by another holder: LockHeldError");
    // Broken as an operator would: DELETE at the version read, read again
    // when a renewal moved it in between (as the Go runner's breakLock).
    let cur, broke;
    for (let i = 1; ; i++) {
      cur = await c.get(key);
      broke = Date.now();
      try {
        await c.delete(key, { expectedVersion: cur.version });
        break;
      } catch (err) {
        if (!(err instanceof VersionConflictError) || i === 10) throw err;
      }
    }
    console.log(`broke the lock: DELETE with expectedVersion ${cur.version}`);
    const why = await withTimeout(lease.lost, 4000, "the keep-alive's loss");
    const ms = Date.now() - broke;
    check(why instanceof LeaseLostError, `the lost promise reported ${why.name} after ${ms} ms: ${why.message}`);
    check(lease.signal.aborted && lease.signal.reason === why, "the lease's AbortSignal aborted with it");
    check(ms <= 4000, `within 2×TTL (${ms} ms ≤ 4000 ms)`);
  },

  async "queue-redeliver"(c, p) {
    const q = `${p}q`;
    await c.qpush(q, { task: 1 });
    console.log("qpush {task:1}");
    const d1 = await c.qpop(q, { visibilityTimeoutSeconds: 1 });
    check(same(d1.data, { task: 1 }) && d1.deliveries === 1, `qpop: deliveries ${d1.deliveries}, receipt r1`);
    let d2;
    const start = Date.now();
    while (!d2) {
      try {
        d2 = await c.qpop(q, { visibilityTimeoutSeconds: 30 });
      } catch (err) {
        if (asEskvError(err)?.code !== "queue_empty" || Date.now() - start > 5000) throw err;
        await sleep(200);
      }
    }
    check(d2.deliveries === 2 && d2.receipt !== d1.receipt && same(d2.data, { task: 1 }), `redelivered after ${Date.now() - start} ms: deliveries ${d2.deliveries}, receipt r2`);
    const stale = await expectError(() => c.qack(q, d1.receipt), StaleReceiptError, "qack r1: StaleReceiptError");
    check(stale.code === "stale_receipt", `its code is ${stale.code}`);
    const ack = await c.qack(q, d2.receipt);
    check(ack.acked === true, "qack r2: acked");
    const size = await c.qsize(q);
    check(size.size === 0, `qsize: ${size.size}`);
  },

  async "txn-refusal"(c, p) {
    const a = await c.put(`${p}a`, { n: 1 });
    const wrong = a.entry.version + 1;
    const err = await expectError(() => c.txn([
      { op: "put", key: `${p}b`, value: { n: 2 } },
      { op: "increment", key: `${p}c`, by: 1, create: true },
      { op: "put", key: `${p}a`, value: { n: 3 }, condition: { version: wrong } },
    ]), VersionConflictError, "a transaction whose op 2 has a wrong condition: VersionConflictError");
    check(err.failedOp === 2 || (err.field ?? "").startsWith("ops[2]"), `it names the failing op: failedOp ${err.failedOp}, field ${err.field}`);
    await expectError(() => c.get(`${p}b`), NotFoundError, "get b: NotFoundError (nothing applied)");
    await expectError(() => c.get(`${p}c`), NotFoundError, "get c: NotFoundError (nothing applied)");
  },
};

function withTimeout(promise, ms, what) {
  let t;
  return Promise.race([promise, new Promise((_, reject) => (t = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)))]).finally(() => clearTimeout(t));
}

async function main() {
  const name = process.argv[2];
  const run = scenarios[name];
  if (!run) {
    console.error(`usage: node test/conformance.mjs <scenario>; scenarios: ${Object.keys(scenarios).join(", ")}`);
    process.exit(2);
  }
  const c = new EskvClient(env("ESKV_URL"), env("ESKV_TOKEN"));
  await run(c, env("ESKV_PREFIX"));
  console.log(`${name}: every check held`);
}

main().then(() => process.exit(0), (err) => {
  console.error(err?.stack ?? String(err));
  process.exit(1);
});
