package service

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// DefaultLogFlush is how long an INFO or DEBUG line may wait in a
// buffered logger (BufferedLogger) before it is written out.
const DefaultLogFlush = 5 * time.Millisecond

// logBufferMax is the size at which a buffered logger writes out at once.
const logBufferMax = 64 << 10

// LogFlush defines -log-flush (ESKV_LOG_FLUSH) on f: how long INFO and
// DEBUG lines may wait before they are written (BufferedLogger).
func LogFlush(f *Flags) *time.Duration {
	d := DefaultLogFlush
	f.DurationVar(&d, "log-flush", DefaultLogFlush, "how long INFO and DEBUG lines may wait to be written together (one write instead of one per line; a kill -9 loses at most this much of them); WARN and ERROR lines, and all before them, are written at once; 0 writes every line at once")
	return &d
}

// BufferedLogger is Logger for a service that logs a line per request:
// INFO and DEBUG lines gather in memory and are written together every
// flush (at most; sooner when 64 KiB gathered), a WARN or ERROR line
// writes itself and everything before it at once, in order. One write(2)
// per line costs the writer about a tenth of its CPU per write on a VM
// whose syscalls are dear (docs/performance.md). What a kill -9 or a
// crash loses is at most flush of INFO lines, never a WARN or ERROR one;
// the log is not the record of a write (the changes topic and the audit
// trail are). close writes out what is buffered; lines logged after it are
// written at once. A flush of 0 or less returns Logger's.
func BufferedLogger(w io.Writer, level slog.Level, service string, flush time.Duration) (log *slog.Logger, close func()) {
	if flush <= 0 {
		return Logger(w, level, service), func() {}
	}
	b := &logBuffer{w: w, every: flush}
	b.timer = time.AfterFunc(time.Hour, b.Flush)
	b.timer.Stop()
	h := flushingHandler{Handler: slog.NewJSONHandler(b, &slog.HandlerOptions{Level: level}), b: b}
	return slog.New(h).With("service", service), b.close
}

// logBuffer gathers log lines and writes them out every so often (see
// BufferedLogger). The JSON handler writes each line with one Write.
type logBuffer struct {
	w     io.Writer
	every time.Duration

	mu     sync.Mutex
	buf    []byte
	timer  *time.Timer
	armed  bool // the timer will flush
	closed bool // write through
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= logBufferMax {
		return len(p), b.flushLocked()
	}
	if !b.armed {
		b.armed = true
		b.timer.Reset(b.every)
	}
	return len(p), nil
}

// Flush writes out the buffered lines.
func (b *logBuffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.flushLocked() // nowhere to report a failing log
}

func (b *logBuffer) flushLocked() error {
	if b.armed {
		b.armed = false
		b.timer.Stop()
	}
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	if cap(b.buf) > 4*logBufferMax {
		b.buf = nil // a burst's buffer is not kept
	} else {
		b.buf = b.buf[:0]
	}
	return err
}

func (b *logBuffer) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.flushLocked()
	b.closed = true
}

// flushingHandler writes out its logBuffer after each line at WARN or
// above.
type flushingHandler struct {
	slog.Handler
	b *logBuffer
}

func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.b.Flush()
	}
	return err
}

func (h flushingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushingHandler{Handler: h.Handler.WithAttrs(attrs), b: h.b}
}

func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{Handler: h.Handler.WithGroup(name), b: h.b}
}
