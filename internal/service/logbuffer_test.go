package service

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// writes records each Write it gets.
type writes struct {
	mu sync.Mutex
	w  []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w = append(w.w, string(p))
	return len(p), nil
}

func (w *writes) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.w...)
}

// lines returns the messages of the JSON lines written so far, in order.
func (w *writes) lines(t *testing.T) []string {
	t.Helper()
	var msgs []string
	for _, l := range strings.Split(strings.Join(w.get(), ""), "\n") {
		if l == "" {
			continue
		}
		i := strings.Index(l, `"msg":"`)
		if i < 0 {
			t.Fatalf("not a log line: %q", l)
		}
		msgs = append(msgs, strings.SplitN(l[i+7:], `"`, 2)[0])
	}
	return msgs
}

// TestBufferedLogger: INFO lines wait, a WARN line writes itself and
// everything before it in one write, in order; close writes out the rest
// and later lines go through at once.
func TestBufferedLogger(t *testing.T) {
	var w writes
	log, closeLog := BufferedLogger(&w, slog.LevelDebug, "t", time.Hour)
	log.Info("a")
	log.With("k", 1).Debug("b")
	if got := w.get(); len(got) != 0 {
		t.Fatalf("INFO and DEBUG lines written before the flush: %q", got)
	}
	log.WithGroup("g").Warn("c", "x", 1)
	if got := w.get(); len(got) != 1 {
		t.Fatalf("a WARN line and the two before it: %d writes, want 1: %q", len(got), got)
	}
	if got := strings.Join(w.lines(t), ","); got != "a,b,c" {
		t.Fatalf("lines %s, want a,b,c", got)
	}
	log.Info("d")
	log.Error("e")
	log.Info("f")
	closeLog()
	log.Info("g")
	if got := strings.Join(w.lines(t), ","); got != "a,b,c,d,e,f,g" {
		t.Fatalf("lines %s, want a,b,c,d,e,f,g", got)
	}
	if n := len(w.get()); n != 4 {
		t.Fatalf("%d writes, want 4 (a–c, d–e, f at close, g after it)", n)
	}
	if !strings.Contains(w.get()[0], `"service":"t"`) {
		t.Fatalf("no service attribute: %q", w.get()[0])
	}
}

// TestBufferedLoggerFlushes: buffered lines are written within the flush
// interval without any other line, and at once past 64 KiB.
func TestBufferedLoggerFlushes(t *testing.T) {
	var w writes
	log, closeLog := BufferedLogger(&w, slog.LevelInfo, "t", 20*time.Millisecond)
	defer closeLog()
	start := time.Now()
	log.Info("a")
	log.Info("b")
	for len(w.get()) == 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("buffered lines not written within 5 s of a 20 ms flush interval")
		}
		time.Sleep(time.Millisecond)
	}
	if got := w.get(); len(got) != 1 || strings.Count(got[0], "\n") != 2 {
		t.Fatalf("want one write of both lines, got %q", got)
	}

	var big writes
	log, closeBig := BufferedLogger(&big, slog.LevelInfo, "t", time.Hour)
	defer closeBig()
	pad := string(bytes.Repeat([]byte("x"), 1000))
	for range 70 {
		log.Info("line", "pad", pad)
	}
	got := big.get()
	if len(got) != 1 || len(got[0]) < logBufferMax {
		t.Fatalf("70 lines of 1 kB under an hour's flush: %d writes, want one of at least 64 KiB", len(got))
	}
}

// TestBufferedLoggerOff: a flush of 0 writes every line at once.
func TestBufferedLoggerOff(t *testing.T) {
	var w writes
	log, closeLog := BufferedLogger(&w, slog.LevelInfo, "t", 0)
	defer closeLog()
	log.Info("a")
	log.Info("b")
	if n := len(w.get()); n != 2 {
		t.Fatalf("%d writes, want 2", n)
	}
}
