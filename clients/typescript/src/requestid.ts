// Request ids the caller did not give: UUIDv7 (RFC 9562), 48 bits of Unix
// milliseconds then 74 random bits, as the Go client's.

/** newRequestId returns a new UUIDv7 from the Web Crypto API (Node 20+, browsers). */
export function newRequestId(now: number = Date.now()): string {
  const u = new Uint8Array(16);
  globalThis.crypto.getRandomValues(u.subarray(6));
  let ms = now;
  for (let i = 5; i >= 0; i--) {
    u[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  u[6] = 0x70 | (u[6]! & 0x0f); // version 7
  u[8] = 0x80 | (u[8]! & 0x3f); // variant 10
  const h = Array.from(u, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** orNewId is id, or a new request id when it is empty. */
export function orNewId(id: string | undefined): string {
  return id ? id : newRequestId();
}
