// A fake fetch for the unit tests: it records each request and answers
// from a script of handlers, one per request (the last one repeats).

/** json is a Response of status with body as JSON and headers. */
export function json(status, body, headers = {}) {
  return new Response(body === undefined ? "" : JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });
}

/** apiError is an eskv error answer. */
export function apiError(status, code, extra = {}, headers = {}) {
  return json(status, { error: { code, message: `${code} (fake)`, ...extra } }, headers);
}

/** stream is a 200 text/event-stream Response whose body is the chunks, then (end) closes or (hang) stays open until aborted. */
export function stream(chunks, { end = "close", signal } = {}) {
  const enc = new TextEncoder();
  const body = new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(enc.encode(c));
      if (end === "close") controller.close();
      else if (end === "error") setTimeout(() => controller.error(new TypeError("terminated")), 20);
      else signal?.addEventListener("abort", () => controller.error(signal.reason));
    },
  });
  return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
}

/** fakeFetch answers request i with script[min(i, last)](req), req = {url, method, headers, body, signal}. */
export function fakeFetch(script) {
  const calls = [];
  const fetch = async (url, init = {}) => {
    const req = { url: new URL(url), method: init.method ?? "GET", headers: init.headers ?? {}, body: init.body ? JSON.parse(init.body) : undefined, signal: init.signal };
    calls.push(req);
    const h = script[Math.min(calls.length - 1, script.length - 1)];
    return h(req);
  };
  return { fetch, calls };
}

/** fast is a retry policy with short waits, for tests. */
export const fast = { minWaitMs: 1, maxWaitMs: 5, conflictBaseMs: 5, conflictCapMs: 20 };
