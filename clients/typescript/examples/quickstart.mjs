// A tour of @eskv/client against a running stack (make run):
//   ESKV_URL=http://127.0.0.1:8080 ESKV_TOKEN=$(cat .eskv/dev-token) node examples/quickstart.mjs
// It writes under tenant/acme/project/demo/ts-quickstart/.
import { EskvClient, VersionConflictError } from "@eskv/client";

const c = new EskvClient(process.env.ESKV_URL ?? "http://127.0.0.1:8080", process.env.ESKV_TOKEN ?? "");
const p = "tenant/acme/project/demo/ts-quickstart/";

// Follow the prefix while we write (resumes by itself after a dropped stream).
const ac = new AbortController();
const watching = (async () => {
  for await (const ev of c.watch({ prefix: p, signal: ac.signal })) console.log("watch:", ev.kind, ev.key, ev.version);
})();

const { entry } = await c.put(`${p}config`, { mode: "fast" });
console.log("put version", entry.version);
try {
  await c.put(`${p}config`, { mode: "slow" }, { expectedVersion: entry.version - 1 });
} catch (err) {
  if (!(err instanceof VersionConflictError)) throw err;
  console.log("CAS refused, current version", err.currentVersion);
}
const n = await c.increment(`${p}visits`, { create: true });
console.log("visits", n.value);

const lease = await c.keepLock(`${p}lock`, "quickstart", { ttlSeconds: 10 });
console.log("lock token", lease.token);
await lease.release();

await c.qpush(`${p}jobs`, { job: 1 });
const job = await c.qpop(`${p}jobs`, { visibilityTimeoutSeconds: 30 });
await c.qack(`${p}jobs`, job.receipt);
console.log("job", job.data, "acked");

for await (const k of c.listKeysAll({ prefix: p })) console.log("key", k.key, k.version);
await new Promise((r) => setTimeout(r, 500));
ac.abort();
await watching;
