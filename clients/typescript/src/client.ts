// EskvClient: the HTTP API of eskv (docs/api.md) with the Go client's
// surface and retry policy. Every write carries a requestId (the caller's,
// or a new UUIDv7), reused by its retries, so a retry after a lost answer
// is applied once at most and answered as a replay.

import { EscalationError, EskvError, InvalidError, NotFoundError, OutcomeUnknownUpdateError } from "./errors.js";
import { keepLock } from "./lease.js";
import type { KeepLockOptions, KeptLock, Lock } from "./lease.js";
import { newRequestId, orNewId } from "./requestid.js";
import { classify, conflictSchedule, retrying, withDefaults } from "./retry.js";
import type { RetryPolicy } from "./retry.js";
import type { components } from "./schema.js";
import { Transport } from "./transport.js";
import type { Answer, Call, FetchLike, Query } from "./transport.js";
import { watch } from "./watch.js";
import type { WatchEvent, WatchOptions } from "./watch.js";

type S = components["schemas"];
/** An entry: a key's value, version, times, writer and semantics. */
export type Entry = S["Entry"];
/** Semantics of an entry: purpose, producer, consumer hints. */
export type Semantics = S["Semantics"];
/** One page of a listing. */
export type ListPage = S["ListAnswer"];
/** One page of a keys-only listing. */
export type KeysPage = S["KeysAnswer"];
/** One key of a keys-only listing. */
export type KeyInfo = S["KeyInfo"];
/** One version of a key's history. */
export type HistoryVersion = S["HistoryVersion"];
/** One page of a key's history. */
export type HistoryPage = S["HistoryAnswer"];
/** One op of a transaction. */
export type TxnOp = S["TxnOp"];
/** A transaction's answer. */
export type TxnAnswer = S["TxnAnswer"];
/** One page of the projects a token may read. */
export type ProjectsPage = S["ProjectsAnswer"];
/** One project of a listing of projects. */
export type ProjectInfo = S["ProjectInfo"];

/** The answer of a write whose answer is an entry. */
export interface WriteResult {
  /** The key's entry after the write. */
  entry: Entry;
  /** True when the request repeated the key's last write (same requestId and body): nothing new was written. */
  replayed: boolean;
}

/** A counter after an increment. */
export interface Counter extends WriteResult {
  /** The counter's new value. */
  value: number;
}

/** Options of every call. */
export interface CallOptions {
  /** Aborts the call (and its retries): the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** Options of a write: a requestId (one is made when absent) and, for some, a directive. */
export interface WriteOptions extends CallOptions {
  /** Makes the write idempotent; a new UUIDv7 when absent. Its retries reuse it. */
  requestId?: string;
}

/** Options of put. */
export interface PutOptions extends WriteOptions {
  /** Compare-and-swap: 0 requires the key to be absent, N its current version to be N. */
  expectedVersion?: number;
  /** Expire the entry this many seconds after the write; absent: no expiry (unless keepTtl). */
  ttlSeconds?: number;
  /** Keep the entry's current expiry. */
  keepTtl?: boolean;
  semantics?: Semantics;
  specRef?: string;
  /** Attach the key to the session at this key. */
  session?: string;
}

/** Options of patch. */
export interface PatchOptions extends WriteOptions {
  /** Fields and their new JSON values. */
  set?: Record<string, unknown>;
  /** Fields removed. */
  unset?: string[];
  /** Apply only while this field equals this value (field_mismatch otherwise). */
  if?: S["FieldCondition"];
  /** Start a missing key from {}. */
  create?: boolean;
  expectedVersion?: number;
  ttlSeconds?: number;
  semantics?: Semantics;
  specRef?: string;
}

/** Options of increment. */
export interface IncrementOptions extends WriteOptions {
  /** The amount (default 1; negative decrements). */
  by?: number;
  /** Bounds of the result: out_of_range (field min or max) beyond them, nothing written. */
  min?: number;
  max?: number;
  /** Start a missing key from 0. */
  create?: boolean;
  expectedVersion?: number;
  ttlSeconds?: number;
  semantics?: Semantics;
  specRef?: string;
}

/** Options of a read of one key. */
export interface ReadOptions extends CallOptions {
  /** Read the past: a position (p<partition>.o<offset>) or an RFC 3339 time. */
  at?: string;
}

/** Options of a listing page. */
export interface ListOptions extends ReadOptions {
  /** The prefix: tenant/<t>/project/<p>/… */
  prefix: string;
  /** Page size (listing 1..1000, default 100; keys-only 1..10000, default 1000). */
  limit?: number;
  /** The previous page's nextCursor. */
  cursor?: string;
}

/** Options of a lock call. */
export interface LockOptions extends WriteOptions {
  /** The lease, whole seconds (server default 60). */
  ttlSeconds?: number;
  semantics?: Semantics;
  specRef?: string;
  session?: string;
}

/** Options of update(). */
export interface UpdateOptions extends CallOptions {
  /** Expire the entry this long after the update; absent: keep its expiry. */
  ttlSeconds?: number;
  semantics?: Semantics;
  specRef?: string;
  /** Names the update (≤ 112 characters): attempt n writes with requestId "<requestId>-<n>". Give a stable one to run an update again without applying it twice. */
  requestId?: string;
}

/** The answer of update(). */
export interface UpdateResult extends WriteResult {
  /** The read-modify-write rounds: 1 when no other writer came in between. */
  attempts: number;
}

/** Options of the client. */
export interface ClientOptions {
  /** The fetch to call (default globalThis.fetch): a test's fake, or one with an agent. */
  fetch?: FetchLike;
  /** The retry policy; absent fields keep the defaults. */
  retry?: Partial<RetryPolicy>;
  /** The directive every write is made for (Eskv-Directive header). */
  directive?: string;
}

/** The verbs of the custom methods that read (GET); every other verb is a POST. */
const readVerbs = new Set(["lock", "leader", "counter", "sismember", "smembers", "scard", "history", "lrange", "llen", "qpeek", "qsize"]);
/** The verbs that may wait on the server (?wait=). */
const waitVerbs = new Set(["qpop", "lpop", "rpop", "acquire"]);
/** The longest wait the server takes. */
const maxWaitMs = 30000;

/** keyPath is the escaped path of a key's route: each component escaped on its own, ':' kept. */
export function keyPath(key: string): string {
  if (!key) throw new InvalidError(400, { code: "invalid", message: "key is empty", field: "key" });
  return "/v1/kv/" + key.split("/").map((p) => encodeURIComponent(p).replace(/%3A/gi, ":")).join("/");
}

/** EskvClient calls one eskv API with one bearer token. */
export class EskvClient {
  /** @internal */
  readonly t: Transport;

  /** A client of the API at baseUrl (e.g. http://127.0.0.1:8080) authenticating with token. */
  constructor(baseUrl: string, token: string, options: ClientOptions = {}) {
    this.t = new Transport(baseUrl.replace(/\/+$/, ""), token, withDefaults(options.retry), options.fetch, options.directive);
  }

  /** The API's base URL as the client uses it. */
  get baseUrl(): string {
    return this.t.baseUrl;
  }

  /** The client's retry policy. */
  get policy(): RetryPolicy {
    return this.t.policy;
  }

  /** The key's current entry (or, with at, its entry then). An absent key is NotFoundError. */
  async get(key: string, o: ReadOptions = {}): Promise<Entry> {
    return (await this.getWithPosition(key, o)).entry;
  }

  /** get, also answering the log position the entry reflects (watch after it to follow the key from there). */
  async getWithPosition(key: string, o: ReadOptions = {}): Promise<{ entry: Entry; position: string }> {
    const a = await this.t.do<Entry>({ method: "GET", path: keyPath(key), query: { at: o.at }, key, retry: true, signal: o.signal });
    return { entry: a.body, position: a.headers.get("ESKV-Position") ?? "" };
  }

  /** One top-level field of the object at key. */
  async getField(key: string, field: string, o: CallOptions = {}): Promise<S["FieldAnswer"]> {
    return (await this.t.do<S["FieldAnswer"]>({ method: "GET", path: keyPath(key), query: { field }, key, retry: true, signal: o.signal })).body;
  }

  /** put writes a new version of key; expectedVersion makes it a compare-and-swap (VersionConflictError with currentVersion when it does not match). */
  async put(key: string, value: unknown, o: PutOptions = {}): Promise<WriteResult> {
    const body: S["PutBody"] = {
      value: value === undefined ? null : value, expectedVersion: o.expectedVersion, ttlSeconds: o.ttlSeconds, keepTtl: o.keepTtl,
      semantics: o.semantics, requestId: orNewId(o.requestId), specRef: o.specRef, session: o.session,
    };
    return this.writeEntry("PUT", key, body, o);
  }

  /**
   * fieldIndexes returns the fields scope (tenant/<t>/project/<p>) declares for its filtered scans (the reserved key
   * <scope>/.eskv/field-indexes) and the declaration's version: none and 0 when it declares nothing. A field it does not
   * declare is scanned from the values, a bounded number per page (pages may come short, with a cursor).
   */
  async fieldIndexes(scope: string, o: CallOptions = {}): Promise<{ fields: string[]; version: number }> {
    try {
      const e = await this.get(`${scope}/.eskv/field-indexes`, o);
      return { fields: ((e.value as { fields?: string[] } | null)?.fields ?? []).slice().sort(), version: e.version };
    } catch (err) {
      if (err instanceof NotFoundError) return { fields: [], version: 0 };
      throw err;
    }
  }

  /**
   * fieldIndexStatus answers whether each field scope declares is indexed yet: its fields in name order, each "ready" (its
   * scans read the index) or "building" (its scans read the values until then), and the declaration's version (0: none).
   */
  async fieldIndexStatus(scope: string, o: CallOptions = {}): Promise<S["FieldIndexStatusAnswer"]> {
    return (await this.verb<S["FieldIndexStatusAnswer"]>("indexStatus", `${scope}/.eskv/field-indexes`, undefined, o)).body;
  }

  /**
   * setFieldIndexes declares exactly fields (at most 16) for scope's filtered scans; expectedVersion (0: none yet, else the
   * version fieldIndexes answered) makes it a compare-and-swap, so that a concurrent declarer's change is not lost.
   */
  async setFieldIndexes(scope: string, fields: string[], o: WriteOptions & { expectedVersion?: number } = {}): Promise<WriteResult> {
    return this.put(`${scope}/.eskv/field-indexes`, { fields }, { ...o, semantics: { purpose: "config" } });
  }

  /** patch changes top-level fields of the object at key without a read-modify-write. */
  async patch(key: string, o: PatchOptions): Promise<WriteResult> {
    const body = {
      set: o.set, unset: o.unset, if: o.if, create: o.create, expectedVersion: o.expectedVersion, ttlSeconds: o.ttlSeconds,
      semantics: o.semantics, requestId: orNewId(o.requestId), specRef: o.specRef,
    };
    return this.writeEntry("PATCH", key, body, o);
  }

  private async writeEntry(method: string, key: string, body: unknown, o: CallOptions & { onRetry?: (err: unknown) => void }): Promise<WriteResult> {
    const a = await this.t.do<Entry>({ method, path: keyPath(key), body, key, retry: true, signal: o.signal, onRetry: o.onRetry });
    return { entry: a.body, replayed: a.replayed };
  }

  /** delete deletes key (itself a version); expectedVersion makes it conditional. An absent key is NotFoundError. */
  async delete(key: string, o: WriteOptions & { expectedVersion?: number } = {}): Promise<S["DeleteAnswer"] & { replayed: boolean }> {
    const a = await this.t.do<S["DeleteAnswer"]>({
      method: "DELETE", path: keyPath(key), query: { expectedVersion: o.expectedVersion, requestId: orNewId(o.requestId) }, key, retry: true, signal: o.signal,
    });
    return { ...a.body, replayed: a.replayed };
  }

  /** increment adds o.by (default 1) to the integer at key atomically; see IncrementOptions. */
  async increment(key: string, o: IncrementOptions = {}): Promise<Counter> {
    const body: S["IncrementBody"] = {
      by: o.by, min: o.min, max: o.max, create: o.create, expectedVersion: o.expectedVersion, ttlSeconds: o.ttlSeconds,
      semantics: o.semantics, requestId: orNewId(o.requestId), specRef: o.specRef,
    };
    const a = await this.verb<Entry>("increment", key, body, o);
    return { value: a.body.value as number, entry: a.body, replayed: a.replayed };
  }

  /** counter reads a counter's value. */
  async counter(key: string, o: CallOptions = {}): Promise<S["CounterAnswer"]> {
    return (await this.verb<S["CounterAnswer"]>("counter", key, undefined, o)).body;
  }

  /** touch gives key a new expiry (ttlSeconds from now) or none (persist), the value kept. */
  async touch(key: string, o: WriteOptions & { ttlSeconds?: number; persist?: boolean; expectedVersion?: number }): Promise<WriteResult> {
    const body: S["TouchBody"] = { ttlSeconds: o.ttlSeconds, persist: o.persist, expectedVersion: o.expectedVersion, requestId: orNewId(o.requestId) };
    const a = await this.verb<Entry>("touch", key, body, o);
    return { entry: a.body, replayed: a.replayed };
  }

  /**
   * verb calls a custom method /v1/kv/{key}:{verb}: a GET for a read
   * (body undefined), else a POST of body. waitMs (qpop, lpop, rpop,
   * acquire) has the server hold the call up to that long.
   */
  async verb<T>(verb: string, key: string, body: unknown, o: CallOptions & { query?: Query; waitMs?: number } = {}): Promise<Answer<T>> {
    const c: Call = { method: readVerbs.has(verb) ? "GET" : "POST", path: `${keyPath(key)}:${verb}`, query: o.query, key, retry: true, signal: o.signal };
    // A write carries a requestId, so that its retries are applied once at most.
    if (c.method === "POST") c.body = isObject(body) && !body.requestId ? { ...body, requestId: newRequestId() } : body ?? { requestId: newRequestId() };
    if (o.waitMs && o.waitMs > 0 && waitVerbs.has(verb)) {
      if (o.waitMs > maxWaitMs) throw new InvalidError(400, { code: "invalid", message: `wait ${o.waitMs} ms is over ${maxWaitMs} ms`, field: "wait" });
      c.waitMs = o.waitMs;
    }
    return this.t.do<T>(c);
  }

  /** list returns one page of the live entries under o.prefix; its position is the log position it reflects (watch after it). */
  async list(o: ListOptions): Promise<ListPage> {
    return this.listPage<ListPage>(o, false);
  }

  /** listKeys returns one page of the keys under o.prefix without their values. */
  async listKeys(o: ListOptions): Promise<KeysPage> {
    return this.listPage<KeysPage>(o, true);
  }

  private async listPage<T extends { position?: string }>(o: ListOptions, keysOnly: boolean): Promise<T> {
    const query = { prefix: o.prefix, limit: o.limit, cursor: o.cursor, at: o.at, keysOnly: keysOnly ? "true" : undefined };
    const a = await this.t.do<T>({ method: "GET", path: "/v1/kv", query, retry: true, signal: o.signal });
    a.body.position ??= a.headers.get("ESKV-Position") ?? undefined;
    return a.body;
  }

  /** listAll yields every live entry under o.prefix, page after page (one snapshot: the first page's position). */
  async *listAll(o: ListOptions): AsyncGenerator<Entry, void, undefined> {
    for (let cursor = o.cursor; ;) {
      const page = await this.list({ ...o, cursor });
      yield* page.items ?? [];
      if (!page.truncated || !page.nextCursor) return;
      cursor = page.nextCursor;
    }
  }

  /** listKeysAll yields every key under o.prefix, page after page. */
  async *listKeysAll(o: ListOptions): AsyncGenerator<KeyInfo, void, undefined> {
    for (let cursor = o.cursor; ;) {
      const page = await this.listKeys({ ...o, cursor });
      yield* page.items ?? [];
      if (!page.truncated || !page.nextCursor) return;
      cursor = page.nextCursor;
    }
  }

  /** historyPage returns one page of key's versions, oldest first. */
  async historyPage(key: string, o: CallOptions & { fromVersion?: number; limit?: number; cursor?: string } = {}): Promise<HistoryPage> {
    return (await this.verb<HistoryPage>("history", key, undefined, { ...o, query: { fromVersion: o.fromVersion, limit: o.limit, cursor: o.cursor } })).body;
  }

  /** history yields the versions of key, oldest first, page after page. */
  async *history(key: string, o: CallOptions & { fromVersion?: number; limit?: number } = {}): AsyncGenerator<HistoryVersion, void, undefined> {
    for (let cursor: string | undefined; ;) {
      const page = await this.historyPage(key, { ...o, cursor });
      yield* page.versions ?? [];
      if (!page.cursor) return;
      cursor = page.cursor;
    }
  }

  /** watch follows the changes of o.prefix or o.key, resuming by itself after a dropped stream; see WatchOptions. */
  watch(o: WatchOptions): AsyncGenerator<WatchEvent, void, undefined> {
    return watch(this.t, o);
  }

  /**
   * txn applies ops to keys of one project atomically. A failed op is an
   * EskvError whose failedOp is its index (and field ops[i]…); nothing is
   * applied then.
   */
  async txn(ops: TxnOp[], o: WriteOptions = {}): Promise<TxnAnswer & { replayed: boolean }> {
    const body: S["TxnBody"] = { requestId: orNewId(o.requestId), ops };
    const a = await this.t.do<TxnAnswer>({ method: "POST", path: "/v1/txn", body, retry: true, signal: o.signal });
    return { ...a.body, replayed: a.replayed };
  }

  /** update is a read-modify-write of key that never loses another writer's change: fn computes the next value from the current entry (undefined when absent); a conflict is retried on the policy's conflict schedule (1 s … 32 s), then escalates. */
  async update(key: string, fn: (current: Entry | undefined) => unknown | Promise<unknown>, o: UpdateOptions = {}): Promise<UpdateResult> {
    if (o.requestId && o.requestId.length > 112) throw new InvalidError(400, { code: "invalid", message: "an update's requestId is at most 112 characters", field: "requestId" });
    const base = o.requestId || `update-${newRequestId()}`;
    let attempts = 0;
    const p = this.t.policy;
    return retrying(p, conflictSchedule(p), (err) => classify(err) === "conflict", async (n) => {
      attempts = n;
      const current = await this.get(key, { signal: o.signal }).catch((err: unknown) => {
        if (err instanceof EskvError && err.code === "not_found") return undefined;
        throw err;
      });
      if (current && o.requestId && isAttemptOf(current.requestId, base)) return { entry: current, replayed: true, attempts };
      const next = await fn(current);
      const requestId = `${base}-${n}`;
      let unsure = false;
      const body: S["PutBody"] = {
        value: next === undefined ? null : next, expectedVersion: current?.version ?? 0, ttlSeconds: o.ttlSeconds,
        keepTtl: o.ttlSeconds === undefined && !o.semantics?.ttlSeconds, semantics: o.semantics, requestId, specRef: o.specRef,
      };
      try {
        const w = await this.writeEntry("PUT", key, body, { signal: o.signal, onRetry: () => (unsure = true) });
        return { ...w, attempts };
      } catch (err) {
        if (unsure && classify(err) === "conflict") throw new EscalationError(n, new OutcomeUnknownUpdateError(requestId, err));
        throw err;
      }
    }, o.signal);
  }

  /** acquireLock takes the lock at key for holder; another holder's lock is LockHeldError. waitMs has the server wait for it (granted in arrival order). */
  async acquireLock(key: string, holder: string, o: LockOptions & { waitMs?: number } = {}): Promise<Lock> {
    return this.lockCall("acquire", key, holder, o);
  }

  /** extendLock renews the lease of a lock holder holds; otherwise NotLockHolderError. */
  async extendLock(key: string, holder: string, o: LockOptions = {}): Promise<Lock> {
    return this.lockCall("extend", key, holder, o);
  }

  /** releaseLock frees a lock holder holds; otherwise NotLockHolderError. */
  async releaseLock(key: string, holder: string, o: WriteOptions = {}): Promise<S["ReleaseAnswer"] & { replayed: boolean }> {
    const a = await this.verb<S["ReleaseAnswer"]>("release", key, { holder, requestId: orNewId(o.requestId) }, o);
    return { ...a.body, replayed: a.replayed };
  }

  /** checkLock returns the lock's holder; a free lock is NotFoundError. */
  async checkLock(key: string, o: CallOptions = {}): Promise<Lock> {
    return (await this.verb<Lock>("lock", key, undefined, o)).body;
  }

  /** elect makes holder the leader of the pool at key, or renews its leadership; another leader is NotLeaderError. */
  async elect(key: string, holder: string, o: LockOptions = {}): Promise<Lock> {
    return this.lockCall("elect", key, holder, o);
  }

  /** heartbeat renews holder's leadership; otherwise NotLeaderError. */
  async heartbeat(key: string, holder: string, o: LockOptions = {}): Promise<Lock> {
    return this.lockCall("heartbeat", key, holder, o);
  }

  /** resign ends holder's leadership. */
  async resign(key: string, holder: string, o: WriteOptions = {}): Promise<S["ReleaseAnswer"]> {
    return (await this.verb<S["ReleaseAnswer"]>("resign", key, { holder, requestId: orNewId(o.requestId) }, o)).body;
  }

  /** leader returns the pool's leader; none is NotFoundError. */
  async leader(key: string, o: CallOptions = {}): Promise<Lock> {
    return (await this.verb<Lock>("leader", key, undefined, o)).body;
  }

  private async lockCall(verb: string, key: string, holder: string, o: LockOptions & { waitMs?: number }): Promise<Lock> {
    const body: S["LockBody"] = { holder, ttlSeconds: o.ttlSeconds, semantics: o.semantics, requestId: orNewId(o.requestId), specRef: o.specRef, session: o.session };
    return (await this.verb<Lock>(verb, key, body, o)).body;
  }

  /**
   * keepLock takes the lock at key for holder (once) and renews its lease
   * every third of its TTL until release(), o.signal, or a loss, which
   * `lost` and `signal` report; see KeptLock.
   */
  async keepLock(key: string, holder: string, o: KeepLockOptions = {}): Promise<KeptLock> {
    const lo = { ttlSeconds: o.ttlSeconds };
    return keepLock(this.t, {
      acquire: (signal) => this.acquireLock(key, holder, { ...lo, signal }),
      extend: (signal) => this.extendLock(key, holder, { ...lo, signal }),
      release: (signal) => this.releaseLock(key, holder, { signal }),
    }, key, o);
  }

  /** qpush pushes data onto the queue at key, creating it. */
  async qpush(key: string, data: unknown, o: WriteOptions & Omit<S["QPushBody"], "data" | "requestId"> = {}): Promise<S["QPushAnswer"]> {
    const body: S["QPushBody"] = {
      data, priority: o.priority, dedupId: o.dedupId, expectedVersion: o.expectedVersion, ttlSeconds: o.ttlSeconds, itemTtlSeconds: o.itemTtlSeconds, requestId: orNewId(o.requestId),
    };
    return (await this.verb<S["QPushAnswer"]>("qpush", key, body, o)).body;
  }

  /** qpop takes the next item of the queue at key (hidden for visibilityTimeoutSeconds, else removed); an empty queue is QueueEmptyError. */
  async qpop(key: string, o: WriteOptions & { visibilityTimeoutSeconds?: number; expectedVersion?: number; waitMs?: number } = {}): Promise<S["QPopAnswer"]> {
    const body: S["QPopBody"] = { visibilityTimeoutSeconds: o.visibilityTimeoutSeconds, expectedVersion: o.expectedVersion, requestId: orNewId(o.requestId) };
    return (await this.verb<S["QPopAnswer"]>("qpop", key, body, o)).body;
  }

  /** qack acknowledges the delivery receipt names; any other receipt is StaleReceiptError. */
  async qack(key: string, receipt: string, o: WriteOptions = {}): Promise<S["QAckAnswer"]> {
    return (await this.verb<S["QAckAnswer"]>("qack", key, { receipt, requestId: orNewId(o.requestId) }, o)).body;
  }

  /** qpeek returns the next count ready items (1..1000) without removing them. */
  async qpeek(key: string, count = 1, o: CallOptions = {}): Promise<S["QPeekAnswer"]> {
    return (await this.verb<S["QPeekAnswer"]>("qpeek", key, undefined, { ...o, query: { count } })).body;
  }

  /** qsize returns the queue's size and in-flight count (0 for a missing queue). */
  async qsize(key: string, o: CallOptions = {}): Promise<S["QSizeAnswer"]> {
    return (await this.verb<S["QSizeAnswer"]>("qsize", key, undefined, o)).body;
  }

  /** sadd adds member to the set at key, creating it. */
  async sadd(key: string, member: string, o: WriteOptions & { expectedVersion?: number; ttlSeconds?: number } = {}): Promise<S["SetChangeAnswer"]> {
    return this.member("sadd", key, member, o);
  }

  /** srem removes member from the set at key. */
  async srem(key: string, member: string, o: WriteOptions & { expectedVersion?: number } = {}): Promise<S["SetChangeAnswer"]> {
    return this.member("srem", key, member, o);
  }

  private async member(verb: string, key: string, member: string, o: WriteOptions & { expectedVersion?: number; ttlSeconds?: number }): Promise<S["SetChangeAnswer"]> {
    const body: S["MemberBody"] = { member, expectedVersion: o.expectedVersion, ttlSeconds: o.ttlSeconds, requestId: orNewId(o.requestId) };
    return (await this.verb<S["SetChangeAnswer"]>(verb, key, body, o)).body;
  }

  /** sismember reports whether member belongs to the set at key. */
  async sismember(key: string, member: string, o: CallOptions = {}): Promise<boolean> {
    return (await this.verb<S["IsMemberAnswer"]>("sismember", key, undefined, { ...o, query: { member } })).body.isMember;
  }

  /** scard returns the set's size (0 for a missing set). */
  async scard(key: string, o: CallOptions = {}): Promise<number> {
    return (await this.verb<S["CardAnswer"]>("scard", key, undefined, o)).body.size;
  }

  /** smembersPage returns up to limit members after cursor, in byte order; its cursor continues. */
  async smembersPage(key: string, o: CallOptions & { cursor?: string; limit?: number } = {}): Promise<S["MembersAnswer"]> {
    return (await this.verb<S["MembersAnswer"]>("smembers", key, undefined, { ...o, query: { cursor: o.cursor, limit: o.limit } })).body;
  }

  /** smembers yields every member of the set at key, page after page. */
  async *smembers(key: string, o: CallOptions = {}): AsyncGenerator<string, void, undefined> {
    for (let cursor: string | undefined; ;) {
      const page = await this.smembersPage(key, { ...o, cursor, limit: 1000 });
      yield* page.members ?? [];
      if (!page.cursor) return;
      cursor = page.cursor;
    }
  }

  /** lpush prepends value to the list at key, creating it. */
  async lpush(key: string, value: unknown, o: WriteOptions & { expectedVersion?: number; ttlSeconds?: number } = {}): Promise<S["ListChangeAnswer"]> {
    return this.push("lpush", key, value, o);
  }

  /** rpush appends value to the list at key, creating it. */
  async rpush(key: string, value: unknown, o: WriteOptions & { expectedVersion?: number; ttlSeconds?: number } = {}): Promise<S["ListChangeAnswer"]> {
    return this.push("rpush", key, value, o);
  }

  private async push(verb: string, key: string, value: unknown, o: WriteOptions & { expectedVersion?: number; ttlSeconds?: number }): Promise<S["ListChangeAnswer"]> {
    const body: S["PushBody"] = { value, expectedVersion: o.expectedVersion, ttlSeconds: o.ttlSeconds, requestId: orNewId(o.requestId) };
    return (await this.verb<S["ListChangeAnswer"]>(verb, key, body, o)).body;
  }

  /** lpop removes and returns the first value of the list at key; empty is NotFoundError (waitMs: the server waits for one). */
  async lpop(key: string, o: WriteOptions & { waitMs?: number } = {}): Promise<S["ListChangeAnswer"]> {
    return (await this.verb<S["ListChangeAnswer"]>("lpop", key, { requestId: orNewId(o.requestId) }, o)).body;
  }

  /** rpop removes and returns the last value of the list at key. */
  async rpop(key: string, o: WriteOptions & { waitMs?: number } = {}): Promise<S["ListChangeAnswer"]> {
    return (await this.verb<S["ListChangeAnswer"]>("rpop", key, { requestId: orNewId(o.requestId) }, o)).body;
  }

  /** ltrim keeps the values from start to stop (inclusive, negative from the end). */
  async ltrim(key: string, start: number, stop: number, o: WriteOptions = {}): Promise<S["ListChangeAnswer"]> {
    return (await this.verb<S["ListChangeAnswer"]>("ltrim", key, { start, stop, requestId: orNewId(o.requestId) }, o)).body;
  }

  /** lrange returns the values from start to stop (inclusive, negative from the end); truncated when the range held more. */
  async lrange(key: string, start: number, stop: number, o: CallOptions = {}): Promise<S["RangeAnswer"]> {
    return (await this.verb<S["RangeAnswer"]>("lrange", key, undefined, { ...o, query: { start, stop } })).body;
  }

  /** llen returns the list's length (0 for a missing list). */
  async llen(key: string, o: CallOptions = {}): Promise<number> {
    return (await this.verb<S["LenAnswer"]>("llen", key, undefined, o)).body.length;
  }

  /** projects returns one page of the projects the token may read keys of, with their live key counts. */
  async projects(o: CallOptions & { limit?: number; cursor?: string } = {}): Promise<ProjectsPage> {
    return (await this.t.do<ProjectsPage>({ method: "GET", path: "/v1/projects", query: { limit: o.limit, cursor: o.cursor }, retry: true, signal: o.signal })).body;
  }

  /** projectsAll yields every project the token may read, page after page. */
  async *projectsAll(o: CallOptions = {}): AsyncGenerator<ProjectInfo, void, undefined> {
    for (let cursor: string | undefined; ;) {
      const page = await this.projects({ ...o, cursor });
      yield* page.items ?? [];
      if (!page.truncated || !page.nextCursor) return;
      cursor = page.nextCursor;
    }
  }
}

/** isObject reports whether v is a JSON object (not an array). */
function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** isAttemptOf reports whether requestId is an attempt of the update named base: base, "-", digits. */
function isAttemptOf(requestId: string | undefined, base: string): boolean {
  return !!requestId && requestId.startsWith(`${base}-`) && /^\d+$/.test(requestId.slice(base.length + 1));
}
