package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/eskv/eskv/contract"
)

// maxWatchLine bounds one line of a watch stream: an event of the
// largest value, escaped, fits.
const maxWatchLine = 4 << 20

// WatchOptions select what Watch follows and from where.
type WatchOptions struct {
	// Prefix (every key under it, inside one project) or Key (one key).
	Prefix, Key string
	// After resumes after this cursor (an event's Cursor), exclusive.
	// Empty with FromVersion 0: from now.
	After string
	// FromVersion, with Key, starts at that version of the key.
	FromVersion int64
}

// ErrWatchEnded is the cause of a watch stream that ended without a
// word from the server (the connection closed); Watch reconnects.
var ErrWatchEnded = errors.New("the watch stream ended")

// Watch follows the changes of o.Prefix or o.Key in log order (GET
// /v1/watch), yielding each event. It reconnects on its own after any
// transient end — a broken connection, a writer restart, 503, or the
// server ending a client that fell behind (slow_consumer) — resuming
// after the last cursor it saw, so the events it yields have no gap and
// no duplicate; it waits between tries as the client's retry policy's
// transient waits (reset once an event arrives), at least Retry-After.
// A fatal error ends it with (zero event, err): 400, 403, or 410
// cursor_expired (the log no longer holds what follows the cursor: list
// the prefix again and watch from now). It ends, without an error, when
// ctx ends or the loop breaks. An http.Client given with WithHTTPClient
// must not have a Timeout: it would cut every stream.
func (c *Client) Watch(ctx context.Context, o WatchOptions) iter.Seq2[contract.WatchEvent, error] {
	return func(yield func(contract.WatchEvent, error) bool) {
		w := &watcher{c: c, o: o, yield: yield}
		waits := c.policy.waits()
		for {
			progressed, err := w.once(ctx)
			if w.stopped || ctx.Err() != nil {
				return
			}
			if !watchTransient(err) {
				yield(contract.WatchEvent{}, err)
				return
			}
			if progressed {
				waits = c.policy.waits()
			}
			wait, _ := waits.Next()
			wait = max(wait, retryAfter(err))
			if c.policy.OnRetry != nil {
				c.policy.OnRetry(err, 0, wait)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// watchTransient reports whether a watch reconnects after err.
func watchTransient(err error) bool {
	switch contract.ErrorCode(err) {
	case contract.ESlowConsumer, contract.ETooManyWatches:
		return true
	}
	return errors.Is(err, ErrWatchEnded) || Classify(err) == ClassTransient
}

// watcher is the state of one Watch across its connections.
type watcher struct {
	c       *Client
	o       WatchOptions
	yield   func(contract.WatchEvent, error) bool
	stopped bool
}

// query is the next connection's query: after the last cursor once one
// is known, else the caller's starting point.
func (w *watcher) query() url.Values {
	q := url.Values{}
	if w.o.Prefix != "" {
		q.Set("prefix", w.o.Prefix)
	}
	if w.o.Key != "" {
		q.Set("key", w.o.Key)
	}
	switch {
	case w.o.After != "":
		q.Set("after", w.o.After)
	case w.o.FromVersion > 0:
		q.Set("fromVersion", strconv.FormatInt(w.o.FromVersion, 10))
	}
	return q
}

// once runs one connection: it reports whether an event came and why
// the connection ended.
func (w *watcher) once(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	u := w.c.base + "/v1/watch?" + w.query().Encode()
	resp, err := w.c.send(ctx, http.MethodGet, u, nil, "text/event-stream")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
		if err != nil {
			return false, &NetworkError{Method: http.MethodGet, URL: u, Err: fmt.Errorf("read answer: %w", err)}
		}
		return false, answerError(resp, b, w.o.Key)
	}
	return w.read(bufio.NewReaderSize(resp.Body, 64<<10), u)
}

// read parses the event stream: each id moves the cursor, each change is
// yielded, an error event ends the connection with its error (and the
// cursor it names).
func (w *watcher) read(r *bufio.Reader, u string) (bool, error) {
	var progressed bool
	var event, id string
	var data []byte
	for {
		line, err := readLine(r)
		if err != nil {
			return progressed, &NetworkError{Method: http.MethodGet, URL: u, Err: fmt.Errorf("%w: %w", ErrWatchEnded, err)}
		}
		if len(line) > 0 {
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "id":
				id = string(value)
			case "event":
				event = string(value)
			case "data":
				data = append(data, value...)
			}
			continue
		}
		// A blank line dispatches what came before it.
		if id != "" {
			w.moveTo(id)
		}
		switch event {
		case "change":
			var ev contract.WatchEvent
			if err := json.Unmarshal(data, &ev); err != nil {
				return progressed, fmt.Errorf("client: decode watch event %s: %w", snippet(data), err)
			}
			progressed = true
			w.moveTo(ev.Cursor)
			if !w.yield(ev, nil) {
				w.stopped = true
				return progressed, nil
			}
		case "error":
			return progressed, w.ended(data)
		}
		event, id, data = "", "", data[:0]
	}
}

// moveTo makes cursor the next connection's starting point.
func (w *watcher) moveTo(cursor string) {
	w.o.After, w.o.FromVersion = cursor, 0
}

// ended is the error of an "error" event, after moving to its cursor.
func (w *watcher) ended(data []byte) error {
	var end contract.WatchEnd
	if err := json.Unmarshal(data, &end); err != nil || end.Error.Code == "" {
		return fmt.Errorf("client: decode the end of a watch %s: %w", snippet(data), ErrUnexpectedAnswer)
	}
	if end.Cursor != "" {
		w.moveTo(end.Cursor)
	}
	return end.Error.AsError(w.o.Key)
}

// readLine returns one line without its line break (\n, \r\n or \r is
// not split: the server ends lines with \n).
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		b, err := r.ReadSlice('\n')
		line = append(line, b...)
		if len(line) > maxWatchLine {
			return nil, fmt.Errorf("a line of the stream is longer than %d bytes", maxWatchLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")), nil
	}
}
