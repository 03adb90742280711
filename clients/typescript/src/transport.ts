// One HTTP request of the API and its retries: headers, the attempt's
// timeout linked with the caller's signal, error answers turned into
// EskvError, transient errors retried as the policy says.

import { InternalError, NetworkError, PartitionUnavailableError, makeError } from "./errors.js";
import type { EskvError } from "./errors.js";
import { abortReason, classify, endlessSchedule, retrying, transientSchedule } from "./retry.js";
import type { RetryPolicy } from "./retry.js";

/** The fetch function the client calls (globalThis.fetch by default). */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** Query parameters; undefined values are left out. */
export type Query = Record<string, string | number | boolean | undefined>;

/** One API call. */
export interface Call {
  method: string;
  /** The escaped path, e.g. /v1/kv/tenant/a/project/p/k:qpop. */
  path: string;
  query?: Query;
  /** The JSON body, when any. */
  body?: unknown;
  /** The key addressed, for the error's key. */
  key?: string;
  /** Safe to repeat: reads, and writes that carry a requestId. */
  retry: boolean;
  /** A blocking wait (ms): each attempt asks for what is left of it. */
  waitMs?: number;
  signal?: AbortSignal;
  /** Told each retried error (besides the policy's onRetry). */
  onRetry?: (err: unknown) => void;
}

/** A 2xx answer. */
export interface Answer<T> {
  body: T;
  headers: Headers;
  /** The Eskv-Replayed header: the write repeated the key's last one. */
  replayed: boolean;
}

/** How long after its wait's end a blocking wait is still retried (the server's request deadline). */
const waitGraceMs = 5000;

/** Transport sends calls to one API with one token. */
export class Transport {
  constructor(
    readonly baseUrl: string,
    private readonly token: string,
    readonly policy: RetryPolicy,
    private readonly fetchFn: FetchLike | undefined,
    private readonly directive: string | undefined,
  ) {}

  /** do sends the call, retrying transient errors when it is safe to repeat, and decodes the 2xx answer. */
  async do<T>(c: Call): Promise<Answer<T>> {
    const until = Date.now() + (c.waitMs ?? 0);
    const schedule = c.waitMs ? endlessSchedule(this.policy) : transientSchedule(this.policy);
    const outer = c.waitMs ? deadlineSignal(c.signal, c.waitMs + waitGraceMs) : { signal: c.signal, done() {} };
    const p = { ...this.policy, onRetry: (err: unknown, n: number, w: number) => (c.onRetry?.(err), this.policy.onRetry?.(err, n, w)) };
    try {
      return await retrying(p, schedule, (err) => c.retry && classify(err) === "transient", () => {
        const left = c.waitMs ? Math.max(until - Date.now(), 0) : 0;
        const query = c.waitMs ? { ...c.query, wait: `${left}ms` } : c.query;
        return this.once<T>({ ...c, query, signal: outer.signal }, left);
      }, outer.signal);
    } finally {
      outer.done();
    }
  }

  /** url is the call's full URL. */
  url(path: string, query?: Query): string {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) q.set(k, String(v));
    const s = q.toString();
    return this.baseUrl + path + (s ? `?${s}` : "");
  }

  /** once sends one try of c, bounded by the attempt timeout plus extraMs. */
  private async once<T>(c: Call, extraMs: number): Promise<Answer<T>> {
    const u = this.url(c.path, c.query);
    const timeout = this.policy.attemptTimeoutMs > 0 ? this.policy.attemptTimeoutMs + extraMs : 0;
    const { res, signal, done } = await this.send(c.method, u, c.body, "application/json", c.signal, timeout);
    try {
      let text: string;
      try {
        text = await res.text();
      } catch (err) {
        throw failure(c.method, u, err, c.signal, signal);
      }
      if (res.ok) {
        return { body: (text ? JSON.parse(text) : undefined) as T, headers: res.headers, replayed: res.headers.get("Eskv-Replayed") === "true" };
      }
      throw answerError(res, text, c.key);
    } finally {
      done();
    }
  }

  /**
   * send sends one request with the client's headers; no answer at all is
   * a NetworkError (the caller's abort is thrown as its reason). The
   * returned signal aborts at timeoutMs; done() stops its timer.
   */
  async send(method: string, u: string, body: unknown, accept: string, signal: AbortSignal | undefined, timeoutMs: number): Promise<{ res: Response; signal: AbortSignal; done: () => void }> {
    if (signal?.aborted) throw abortReason(signal);
    const linked = deadlineSignal(signal, timeoutMs);
    const headers: Record<string, string> = { Accept: accept };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (this.directive) headers["Eskv-Directive"] = this.directive;
    const f = this.fetchFn ?? ((i: string, init: RequestInit) => globalThis.fetch(i, init));
    try {
      const res = await f(u, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: linked.signal });
      return { res, signal: linked.signal, done: linked.done };
    } catch (err) {
      linked.done();
      throw failure(method, u, err, signal, linked.signal);
    }
  }
}

/** failure is the error of a try that got no answer: the caller's abort reason, or a NetworkError. */
function failure(method: string, u: string, err: unknown, caller: AbortSignal | undefined, linked: AbortSignal): unknown {
  if (caller?.aborted) return abortReason(caller);
  if (linked.aborted) return new NetworkError(method, u, linked.reason ?? err);
  return new NetworkError(method, u, err);
}

/** answerError turns an error answer into an EskvError; a body that is not eskv's is internal, or partition_unavailable (transient) for 429, 502, 503 and 504. */
export function answerError(res: Response, text: string, key?: string): EskvError {
  const retryAfterSeconds = parseRetryAfter(res.headers.get("Retry-After"));
  let detail: { code?: unknown; message?: unknown } | undefined;
  try {
    detail = (JSON.parse(text) as { error?: { code?: unknown; message?: unknown } })?.error;
  } catch {
    detail = undefined;
  }
  if (detail && typeof detail.code === "string" && detail.code !== "") {
    return makeError(res.status, detail as { code: string; message: string }, { key, retryAfterSeconds });
  }
  const message = `unexpected answer ${res.status} from ${res.url || "the server"}: ${snippet(text)}`;
  if ([429, 502, 503, 504].includes(res.status)) {
    return new PartitionUnavailableError(res.status, { code: "partition_unavailable", message }, { key, unexpected: true, retryAfterSeconds });
  }
  return new InternalError(res.status, { code: "internal", message }, { key, unexpected: true });
}

/** parseRetryAfter reads a Retry-After header: seconds or an HTTP date; 0 when none. */
export function parseRetryAfter(v: string | null): number {
  if (!v) return 0;
  if (/^\d+$/.test(v.trim())) return Number(v.trim());
  const t = Date.parse(v);
  if (Number.isNaN(t)) return 0;
  return Math.max(Math.round((t - Date.now()) / 1000), 0);
}

function snippet(s: string): string {
  s = s.trim();
  if (s === "") return "(empty body)";
  return s.length > 200 ? `${s.slice(0, 200)}…` : s;
}

/** TimeoutReason is the reason of a try that ran out of its own time. */
export class AttemptTimeout extends Error {
  constructor(ms: number) {
    super(`no answer within ${ms} ms`);
    this.name = "TimeoutError";
  }
}

/**
 * deadlineSignal is a signal that aborts when parent does or after ms
 * (ms 0: never); done() releases its timer and listener.
 */
export function deadlineSignal(parent: AbortSignal | undefined, ms: number): { signal: AbortSignal; done: () => void } {
  const ac = new AbortController();
  const onAbort = () => ac.abort(parent?.reason);
  if (parent?.aborted) ac.abort(parent.reason);
  else parent?.addEventListener("abort", onAbort, { once: true });
  const t = ms > 0 ? setTimeout(() => ac.abort(new AttemptTimeout(ms)), ms) : undefined;
  return {
    signal: ac.signal,
    done() {
      if (t !== undefined) clearTimeout(t);
      parent?.removeEventListener("abort", onAbort);
    },
  };
}
