// keepLock: take a lock and renew its lease in the background, every third
// of its TTL, until release(), the caller's signal, or a loss (the Go
// client's KeepLock). The lease is timed on the local clock: a lease
// granted by an answer to a request sent at t ends at t+TTL at the
// earliest; a renewal that does not get through before that end less the
// margin counts as a loss, so the holder stops before another may take over.

import { EscalationError, EskvError, LeaseLostError, LeaseReleasedError, NetworkError } from "./errors.js";
import type { components } from "./schema.js";
import { abortReason, endlessSchedule, retryAfterMs, sleep } from "./retry.js";
import { deadlineSignal } from "./transport.js";
import type { Transport } from "./transport.js";

/** A lock's answer: its holder, fencing token, version and lease. */
export type Lock = components["schemas"]["LockAnswer"];

/** The lock calls keepLock makes (the client's acquireLock, extendLock, releaseLock). */
export interface LockCalls {
  acquire(signal: AbortSignal | undefined): Promise<Lock>;
  extend(signal: AbortSignal | undefined): Promise<Lock>;
  release(signal: AbortSignal | undefined): Promise<unknown>;
}

/** Options of keepLock. */
export interface KeepLockOptions {
  /** The lease, whole seconds (the server's default, 60, when absent). */
  ttlSeconds?: number;
  /** Count the lease as lost this long before it would end when no renewal got through (default and at most a third of the TTL). */
  marginMs?: number;
  /** Ends the keeping (not a loss): the lock is left to expire unless release() is called. */
  signal?: AbortSignal;
}

/** A lock whose lease is being renewed. */
export interface KeptLock {
  /** The tenure's fencing token: hand it to the resources the lock protects. */
  readonly token: number;
  /** The latest answer: the acquire's, or the last renewal's. */
  readonly lock: Lock;
  /**
   * Resolves (never rejects) once the lease is no longer kept, with why: a
   * LeaseLostError when it was lost, a LeaseReleasedError after release(),
   * or the reason of the caller's signal.
   */
  readonly lost: Promise<Error>;
  /** Aborts when the lease is no longer kept, with the same reason as lost: run the protected work under it. */
  readonly signal: AbortSignal;
  /** Stops renewing and releases the lock, once (later calls answer the first one's result). Sends nothing when the server already said the lease was lost. */
  release(signal?: AbortSignal): Promise<void>;
}

/** transientRenewal tells errors worth retrying a renewal for. */
function transientRenewal(err: unknown): boolean {
  if (err instanceof EscalationError) err = err.cause;
  if (err instanceof NetworkError) return true;
  return err instanceof EskvError && (err.unexpected || ["partition_unavailable", "outcome_unknown", "forward_loop", "internal", "too_many_requests"].includes(err.code));
}

/** keepLock takes the lock once and keeps renewing it; see KeptLock. */
export async function keepLock(t: Transport, calls: LockCalls, key: string, o: KeepLockOptions): Promise<KeptLock> {
  const sent = Date.now();
  let lock = await calls.acquire(o.signal);
  if (lock.reentered) {
    throw new EskvError(409, { code: "lock_held", message: `${lock.holder} already holds ${key} (token ${lock.token}): keeping it would share one tenure` }, { key });
  }
  let ttlMs = (o.ttlSeconds ?? 0) * 1000;
  if (!ttlMs && lock.expiresAt) ttlMs = Math.round((Date.parse(lock.expiresAt) - Date.parse(lock.acquiredAt)) / 1000) * 1000;
  if (!(ttlMs > 0)) {
    await calls.release(undefined).catch(() => {});
    throw new EskvError(500, { code: "internal", message: `${key} answered without a lease` }, { key });
  }
  const every = ttlMs / 3;
  const margin = o.marginMs && o.marginMs > 0 ? Math.min(o.marginMs, every) : every;
  const stop = new AbortController();
  const parent = o.signal;
  const onParent = () => stop.abort(parent?.reason);
  parent?.addEventListener("abort", onParent, { once: true });
  let end = sent + ttlMs;
  const token = lock.token;
  const renewOnce = async (): Promise<void> => {
    const limit = end - margin;
    const waits = endlessSchedule(t.policy);
    let last: unknown;
    for (;;) {
      if (Date.now() >= limit) throw new LeaseLostError(key, token, last, true);
      const d = deadlineSignal(stop.signal, limit - Date.now());
      const at = Date.now();
      try {
        const got = await calls.extend(d.signal);
        if (got.token !== token) throw new LeaseLostError(key, token, new Error(`the token is ${got.token} now`), false);
        lock = got;
        end = at + ttlMs;
        return;
      } catch (err) {
        if (stop.signal.aborted || err instanceof LeaseLostError) throw err;
        if (!transientRenewal(err) && !d.signal.aborted) throw new LeaseLostError(key, token, err, false);
        last = err;
      } finally {
        d.done();
      }
      await sleep(Math.min(Math.max(waits.take() ?? 0, retryAfterMs(last)), Math.max(limit - Date.now(), 0)), stop.signal);
    }
  };
  const lost = (async (): Promise<Error> => {
    try {
      for (;;) {
        await sleep(end + every - ttlMs - Date.now(), stop.signal);
        await renewOnce();
      }
    } catch (err) {
      const why = stop.signal.aborted ? (abortReason(stop.signal) as Error) : (err as Error);
      if (!stop.signal.aborted) stop.abort(why);
      parent?.removeEventListener("abort", onParent);
      return why;
    }
  })();
  let released: Promise<void> | undefined;
  return {
    token,
    get lock() {
      return lock;
    },
    lost,
    signal: stop.signal,
    release(signal?: AbortSignal) {
      released ??= (async () => {
        if (!stop.signal.aborted) stop.abort(new LeaseReleasedError(key));
        const why = await lost;
        if (why instanceof LeaseLostError && !why.unconfirmed) throw why;
        await calls.release(signal);
      })();
      return released;
    },
  };
}
