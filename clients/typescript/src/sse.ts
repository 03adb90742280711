// A Server-Sent Events parser over a fetch body's bytes (no EventSource:
// it cannot send the bearer header).

/** One dispatched SSE event. */
export interface SseEvent {
  /** The event's type ("" for none: the stream's opening id). */
  event: string;
  /** The last id field of the event, "" when none. */
  id: string;
  /** The data lines joined with "\n". */
  data: string;
}

/** maxLine bounds one line of a stream: an event of the largest value, escaped, fits. */
const maxLine = 4 << 20;

/**
 * SseParser turns chunks of text into events: feed() each chunk, get the
 * events it completed. Lines end with \n, \r\n or \r; comments (":
 * ping") are skipped; a blank line dispatches.
 */
export class SseParser {
  private buf = "";
  private event = "";
  private id = "";
  private data: string[] = [];
  private sawField = false;

  /** feed parses chunk and returns the events it completed. */
  feed(chunk: string): SseEvent[] {
    this.buf += chunk;
    const out: SseEvent[] = [];
    for (;;) {
      const m = /\r\n|\n|\r/.exec(this.buf);
      if (!m) break;
      // A lone \r at the end may be the start of \r\n: wait for more.
      if (m[0] === "\r" && m.index === this.buf.length - 1) break;
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      const ev = this.line(line);
      if (ev) out.push(ev);
    }
    if (this.buf.length > maxLine) throw new Error(`a line of the stream is longer than ${maxLine} characters`);
    return out;
  }

  private line(line: string): SseEvent | undefined {
    if (line === "") {
      if (!this.sawField) return undefined;
      const ev = { event: this.event, id: this.id, data: this.data.join("\n") };
      this.event = "";
      this.id = "";
      this.data = [];
      this.sawField = false;
      return ev;
    }
    if (line.startsWith(":")) return undefined;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    this.sawField = true;
    if (field === "event") this.event = value;
    else if (field === "id") this.id = value;
    else if (field === "data") this.data.push(value);
    return undefined;
  }
}
