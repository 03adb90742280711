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
  const lock = await calls.acquire(o.signal);
  if (lock.reentered) {
    throw new EskvError(409, { code: "lock_held", message: `${lock.holder} already holds ${key} (token ${lock.token}): keeping it would share one tenure` }, { key });
  }
  let ttlMs = (o.ttlSeconds ?? 0) * 1000;
  if (!ttlMs && lock.expiresAt) ttlMs = Math.round((Date.parse(lock.expiresAt) - Date.parse(lock.acquiredAt)) / 1000) * 1000;
  if (!(ttlMs > 0)) {
    await calls.release(undefined).catch(() => {});
    throw new EskvError(500, { code: "internal", message: `${key} answered without a lease` }, { key });
  }
  return new Keeper(t, calls, key, lock, sent, ttlMs, o).start();
}

/** Keeper renews one tenure's lease. */
class Keeper {
  private readonly every: number;
  private readonly margin: number;
  private readonly stop = new AbortController();
  private end: number;
  private released: Promise<void> | undefined;

  constructor(
    private readonly t: Transport,
    private readonly calls: LockCalls,
    private readonly key: string,
    private lock: Lock,
    sent: number,
    private readonly ttlMs: number,
    private readonly o: KeepLockOptions,
  ) {
    this.every = ttlMs / 3;
    this.margin = o.marginMs && o.marginMs > 0 ? Math.min(o.marginMs, this.every) : this.every;
    this.end = sent + ttlMs;
  }

  /** start runs the renewals in the background and answers the KeptLock. */
  start(): KeptLock {
    const parent = this.o.signal;
    const onParent = () => this.stop.abort(parent?.reason);
    if (parent?.aborted) onParent();
    else parent?.addEventListener("abort", onParent, { once: true });
    const lost = this.loop().finally(() => parent?.removeEventListener("abort", onParent));
    const self = this;
    return {
      token: this.lock.token,
      get lock() {
        return self.lock;
      },
      lost,
      signal: this.stop.signal,
      release: (signal?: AbortSignal) => this.release(lost, signal),
    };
  }

  /** loop renews every third of the TTL until stopped or lost; it answers why it ended. */
  private async loop(): Promise<Error> {
    try {
      for (;;) {
        await sleep(this.end + this.every - this.ttlMs - Date.now(), this.stop.signal);
        await this.renewOnce();
      }
    } catch (err) {
      if (this.stop.signal.aborted) return abortReason(this.stop.signal) as Error;
      this.stop.abort(err);
      return err as Error;
    }
  }

  /** renewOnce renews the lease, retrying transient errors until the margin before its end. */
  private async renewOnce(): Promise<void> {
    const limit = this.end - this.margin;
    const waits = endlessSchedule(this.t.policy);
    let last: unknown;
    for (;;) {
      if (Date.now() >= limit) throw new LeaseLostError(this.key, this.lock.token, last, true);
      const d = deadlineSignal(this.stop.signal, limit - Date.now());
      const at = Date.now();
      try {
        const got = await this.calls.extend(d.signal);
        if (got.token !== this.lock.token) throw new LeaseLostError(this.key, this.lock.token, new Error(`the token is ${got.token} now`), false);
        this.lock = got;
        this.end = at + this.ttlMs;
        return;
      } catch (err) {
        if (this.stop.signal.aborted || err instanceof LeaseLostError) throw err;
        if (!transientRenewal(err) && !d.signal.aborted) throw new LeaseLostError(this.key, this.lock.token, err, false);
        last = err;
      } finally {
        d.done();
      }
      await sleep(Math.min(Math.max(waits.take() ?? 0, retryAfterMs(last)), Math.max(limit - Date.now(), 0)), this.stop.signal);
    }
  }

  /** release stops renewing and releases once; nothing is sent when the server said the lease was lost. */
  private release(lost: Promise<Error>, signal?: AbortSignal): Promise<void> {
    this.released ??= (async () => {
      if (!this.stop.signal.aborted) this.stop.abort(new LeaseReleasedError(this.key));
      const why = await lost;
      if (why instanceof LeaseLostError && !why.unconfirmed) throw why;
      await this.calls.release(signal);
    })();
    return this.released;
  }
}
