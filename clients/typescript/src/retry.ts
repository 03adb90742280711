// The retry policy, as the Go client's (client/retry_policy.go): every
// error is transient (retried with jittered exponential waits, at least
// Retry-After), a conflict (retried only by update(), on its own schedule)
// or fatal (returned at once).

import { EscalationError, EskvError, NetworkError } from "./errors.js";

/** How the client retries; every field has a default (defaultRetryPolicy). */
export interface RetryPolicy {
  /** Tries of one call on transient errors, the first included (default 5; 1 disables retries). */
  attempts: number;
  /** Bounds of the transient waits: minWaitMs, 2×, 4× … capped at maxWaitMs, each drawn from its upper half (defaults 100 and 2000). */
  minWaitMs: number;
  maxWaitMs: number;
  /** Bound of each try on its own (default 10000; 0: none). A try that runs out of it is transient. Watches are not bounded by it. */
  attemptTimeoutMs: number;
  /** update()'s conflict schedule: conflictBaseMs doubling up to conflictCapMs (defaults 1000 and 32000: waits of 1, 2, 4, 8, 16, 32 s). */
  conflictBaseMs: number;
  conflictCapMs: number;
  /** Draw each conflict wait from its upper half too (default false: a deterministic schedule). */
  conflictJitter: boolean;
  /** Told each error that is retried, the attempt it ended (from 1) and the wait before the next. */
  onRetry?: (err: unknown, attempt: number, waitMs: number) => void;
}

/** defaultRetryPolicy is the policy of a client given none. */
export function defaultRetryPolicy(): RetryPolicy {
  return { attempts: 5, minWaitMs: 100, maxWaitMs: 2000, attemptTimeoutMs: 10000, conflictBaseMs: 1000, conflictCapMs: 32000, conflictJitter: false };
}

/** withDefaults fills the fields p leaves out. */
export function withDefaults(p: Partial<RetryPolicy> = {}): RetryPolicy {
  const d = defaultRetryPolicy();
  const out: RetryPolicy = { ...d, ...p };
  if (!(out.attempts >= 1)) out.attempts = d.attempts;
  if (!(out.minWaitMs >= 0)) out.minWaitMs = d.minWaitMs;
  if (!(out.maxWaitMs >= out.minWaitMs)) out.maxWaitMs = Math.max(d.maxWaitMs, out.minWaitMs);
  if (!(out.attemptTimeoutMs >= 0)) out.attemptTimeoutMs = d.attemptTimeoutMs;
  if (!(out.conflictBaseMs > 0)) out.conflictBaseMs = d.conflictBaseMs;
  if (!(out.conflictCapMs >= out.conflictBaseMs)) out.conflictCapMs = Math.max(d.conflictCapMs, out.conflictBaseMs);
  return out;
}

/** How the policy treats an error. */
export type ErrorClass = "transient" | "conflict" | "fatal";

const transientCodes = new Set(["partition_unavailable", "outcome_unknown", "forward_loop", "too_many_requests"]);

/** classify tells err's class: see RetryPolicy. An EscalationError is fatal (it was retried already). */
export function classify(err: unknown): ErrorClass {
  if (err instanceof EscalationError) return "fatal";
  if (err instanceof NetworkError) return "transient";
  if (!(err instanceof EskvError)) return "fatal";
  if (transientCodes.has(err.code)) return "transient";
  if (err.code === "version_conflict" && err.field !== "requestId") return "conflict";
  return "fatal";
}

/** A schedule of waits: next, doubling up to cap; with jitter each drawn from [w/2, w]. left < 0: no end. */
export class Backoff {
  private next: number;
  private left: number;
  constructor(first: number, private readonly cap: number, private readonly jitter: boolean, left: number) {
    this.next = first;
    this.left = left;
  }

  /** The next wait in ms, or undefined when the schedule has none left. */
  take(): number | undefined {
    if (this.left === 0) return undefined;
    if (this.left > 0) this.left--;
    let w = Math.min(this.next, this.cap);
    this.next = Math.min(this.next * 2, this.cap);
    if (this.jitter && w > 0) w = w / 2 + Math.random() * (w / 2);
    return Math.round(w);
  }
}

/** transientSchedule is attempts-1 jittered waits. */
export function transientSchedule(p: RetryPolicy): Backoff {
  return new Backoff(p.minWaitMs, p.maxWaitMs, true, Math.max(p.attempts - 1, 0));
}

/** endlessSchedule is the transient waits without end (watches, lease renewals). */
export function endlessSchedule(p: RetryPolicy): Backoff {
  return new Backoff(p.minWaitMs, p.maxWaitMs, true, -1);
}

/** conflictSchedule is update()'s: conflictBaseMs doubling, the last wait being conflictCapMs. */
export function conflictSchedule(p: RetryPolicy): Backoff {
  let waits = 0;
  for (let w = p.conflictBaseMs; ; w *= 2) {
    waits++;
    if (w >= p.conflictCapMs) break;
  }
  return new Backoff(p.conflictBaseMs, p.conflictCapMs, p.conflictJitter, waits);
}

/** retryAfterMs is the wait the server asked for with err, 0 when none. */
export function retryAfterMs(err: unknown): number {
  return err instanceof EskvError && err.retryAfterSeconds ? err.retryAfterSeconds * 1000 : 0;
}

/** abortReason is signal's reason as an error. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

/** sleep waits ms; it rejects with the signal's reason when signal aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const done = () => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    };
    const t = setTimeout(done, Math.max(ms, 0));
    const onAbort = () => {
      clearTimeout(t);
      reject(abortReason(signal!));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * retrying calls attempt until it succeeds, fails with an error retriable
 * does not accept, or the schedule stops (then EscalationError). The
 * caller's signal ending is never retried: the last error is thrown as is.
 */
export async function retrying<T>(
  p: RetryPolicy,
  schedule: Backoff,
  retriable: (err: unknown) => boolean,
  attempt: (n: number) => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      if (signal?.aborted || !retriable(err)) throw err;
      const w = schedule.take();
      if (w === undefined) throw new EscalationError(n, err);
      const wait = Math.max(w, retryAfterMs(err));
      p.onRetry?.(err, n, wait);
      try {
        await sleep(wait, signal);
      } catch {
        throw err;
      }
    }
  }
}
