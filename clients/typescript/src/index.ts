// @eskv/client: the TypeScript client of eskv's HTTP API.

export { EskvClient, keyPath } from "./client.js";
export type {
  CallOptions, ClientOptions, Counter, Entry, HistoryPage, HistoryVersion, IncrementOptions, KeyInfo, KeysPage, ListOptions, ListPage,
  LockOptions, PatchOptions, ProjectInfo, ProjectsPage, PutOptions, ReadOptions, Semantics, TxnAnswer, TxnOp, UpdateOptions, UpdateResult,
  WriteOptions, WriteResult,
} from "./client.js";
export * from "./errors.js";
export type { KeepLockOptions, KeptLock, Lock } from "./lease.js";
export { newRequestId } from "./requestid.js";
export { classify, defaultRetryPolicy } from "./retry.js";
export type { ErrorClass, RetryPolicy } from "./retry.js";
export { SseParser } from "./sse.js";
export type { SseEvent } from "./sse.js";
export type { FetchLike } from "./transport.js";
export { WatchEndedError } from "./watch.js";
export type { WatchEvent, WatchOptions } from "./watch.js";
export type { components, paths, operations } from "./schema.js";
