// Watch: GET /v1/watch read with fetch streaming (the bearer header, so
// no EventSource), as an async iterator that reconnects after any
// transient end and resumes after the last cursor it saw: no gap, no
// duplicate (docs/watch.md; the Go client's Watch).

import { EskvError, InternalError, NetworkError, makeError } from "./errors.js";
import type { components } from "./schema.js";
import { AttemptTimeout, answerError, deadlineSignal } from "./transport.js";
import type { Transport } from "./transport.js";
import { classify, endlessSchedule, retryAfterMs, sleep } from "./retry.js";
import { SseParser } from "./sse.js";

/** One change of a watch: its cursor resumes after it. */
export type WatchEvent = components["schemas"]["WatchEvent"];

/** What a watch follows and from where. */
export interface WatchOptions {
  /** Every key under this prefix (inside one project)… */
  prefix?: string;
  /** …or one key. */
  key?: string;
  /** Resume after this cursor (an event's cursor, a read's position), exclusive. Neither after nor fromVersion: from now. */
  after?: string;
  /** With key: start at this version of the key. */
  fromVersion?: number;
  /** Ends the watch: the iterator then finishes without an error. */
  signal?: AbortSignal;
  /** Reconnect when nothing (not even the server's 15 s ping) came for this long (default 45000; 0: never). */
  idleTimeoutMs?: number;
  /** Told each transient end before the watch reconnects. */
  onReconnect?: (err: unknown, waitMs: number) => void;
}

/** The cause of a stream that ended without a word from the server: the watch reconnects. */
export class WatchEndedError extends Error {
  constructor() {
    super("the watch stream ended");
    this.name = "WatchEndedError";
  }
}

/** The resume point of a watch across its connections. */
interface Position {
  after?: string;
  fromVersion?: number;
}

/**
 * watch yields the changes of o.prefix or o.key in log order, reconnecting
 * by itself after a broken connection, a writer restart, 503 or a
 * slow_consumer end, after the last cursor it saw; it waits between tries
 * as the policy's transient waits (reset once an event arrives), at least
 * Retry-After. A fatal error (400, 401, 403, 410 cursor_expired) is thrown
 * by the iterator. Breaking out of the loop or aborting o.signal ends it.
 */
export async function* watch(t: Transport, o: WatchOptions): AsyncGenerator<WatchEvent, void, undefined> {
  const pos: Position = { after: o.after, fromVersion: o.after ? undefined : o.fromVersion };
  let waits = endlessSchedule(t.policy);
  for (;;) {
    const before = pos.after;
    try {
      yield* connection(t, o, pos);
    } catch (err) {
      if (o.signal?.aborted) return;
      if (!watchTransient(err)) throw err;
      if (pos.after !== before) waits = endlessSchedule(t.policy);
      const wait = Math.max(waits.take() ?? 0, retryAfterMs(err));
      o.onReconnect?.(err, wait);
      try {
        await sleep(wait, o.signal);
      } catch {
        return;
      }
    }
  }
}

/** watchTransient reports whether a watch reconnects after err. */
export function watchTransient(err: unknown): boolean {
  if (err instanceof EskvError && (err.code === "slow_consumer" || err.code === "too_many_watches")) return true;
  return err instanceof AttemptTimeout || classify(err) === "transient";
}

/** watchQuery is the next connection's query: after the last cursor once one is known, else the caller's start. */
function watchQuery(o: WatchOptions, pos: Position): Record<string, string | number | undefined> {
  return { prefix: o.prefix || undefined, key: o.key || undefined, after: pos.after || undefined, fromVersion: pos.after ? undefined : pos.fromVersion || undefined };
}

/** connection runs one connection, yielding its changes; it always ends by throwing why it ended. */
async function* connection(t: Transport, o: WatchOptions, pos: Position): AsyncGenerator<WatchEvent, void, undefined> {
  const idleMs = o.idleTimeoutMs ?? 45000;
  const conn = deadlineSignal(o.signal, 0);
  const ac = new AbortController();
  conn.signal.addEventListener("abort", () => ac.abort(conn.signal.reason), { once: true });
  const u = t.url("/v1/watch", watchQuery(o, pos));
  const { res, done } = await t.send("GET", u, undefined, "text/event-stream", ac.signal, 0);
  let idle: ReturnType<typeof setTimeout> | undefined;
  const arm = () => {
    if (idle !== undefined) clearTimeout(idle);
    if (idleMs > 0) idle = setTimeout(() => ac.abort(new AttemptTimeout(idleMs)), idleMs);
  };
  try {
    arm();
    if (!res.ok) throw answerError(res, await readText(res, u, ac.signal), o.key);
    if (!res.body) throw new NetworkError("GET", u, new WatchEndedError());
    const reader = res.body.getReader();
    try {
      yield* events(reader, u, pos, ac.signal, arm);
    } finally {
      reader.cancel().catch(() => {});
    }
  } finally {
    if (idle !== undefined) clearTimeout(idle);
    ac.abort();
    done();
    conn.done();
  }
}

/** events parses the stream: each id moves the position, each change is yielded, an error event ends it with its error. */
async function* events(reader: ReadableStreamDefaultReader<Uint8Array>, u: string, pos: Position, signal: AbortSignal, arm: () => void): AsyncGenerator<WatchEvent, never, undefined> {
  const dec = new TextDecoder();
  const parser = new SseParser();
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>;
    try {
      chunk = await reader.read();
    } catch (err) {
      throw signal.aborted && signal.reason instanceof AttemptTimeout ? signal.reason : new NetworkError("GET", u, err);
    }
    if (chunk.done) throw new NetworkError("GET", u, new WatchEndedError());
    arm();
    for (const ev of parser.feed(dec.decode(chunk.value, { stream: true }))) {
      if (ev.id) moveTo(pos, ev.id);
      if (ev.event === "change") {
        const change = JSON.parse(ev.data) as WatchEvent;
        moveTo(pos, change.cursor);
        yield change;
      } else if (ev.event === "error") {
        throw ended(ev.data, pos);
      }
    }
  }
}

function moveTo(pos: Position, cursor: string): void {
  pos.after = cursor;
  pos.fromVersion = undefined;
}

/** ended is the error of an "error" event, after moving to the cursor it names. */
function ended(data: string, pos: Position): EskvError {
  let end: components["schemas"]["WatchEnd"] | undefined;
  try {
    end = JSON.parse(data) as components["schemas"]["WatchEnd"];
  } catch {
    end = undefined;
  }
  if (!end?.error?.code) {
    return new InternalError(0, { code: "internal", message: `the end of a watch is not eskv's: ${data.slice(0, 200)}` }, { unexpected: true });
  }
  if (end.cursor) moveTo(pos, end.cursor);
  return makeError(0, end.error);
}

async function readText(res: Response, u: string, signal: AbortSignal): Promise<string> {
  try {
    return await res.text();
  } catch (err) {
    throw signal.aborted && signal.reason instanceof AttemptTimeout ? signal.reason : new NetworkError("GET", u, err);
  }
}
