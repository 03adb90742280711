package main

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/eskv/eskv/internal/service/servicetest"
	"github.com/eskv/eskv/testenv"
)

// TestReadyzFollowsItsDependencies: the projector's /readyz fails within
// 2 s of a lock stalling reads of the projection's tables (Postgres
// itself answers) or of the broker no longer answering, answers within
// 2 s meanwhile, and is ready again once they answer.
func TestReadyzFollowsItsDependencies(t *testing.T) {
	b, pg := mustStack(t, 2)
	addrFile := filepath.Join(t.TempDir(), "addr")
	t.Setenv("ESKV_PROJECTOR_ADDR_FILE", addrFile)
	base, _ := servicetest.Start(t, "serve", addrFile, func(ctx context.Context) error { return runServe(ctx, &testenv.Buffer{}) })
	servicetest.WaitReady(t, base)

	// unready polls /readyz until it fails and returns how long after
	// start it did; no answer may take 2 s.
	unready := func(what string, start time.Time) {
		t.Helper()
		for {
			asked := time.Now()
			code, _ := servicetest.Get(base + "/readyz")
			if took := time.Since(asked); took > 2*time.Second {
				t.Fatalf("/readyz took %v to answer", took)
			}
			if code == http.StatusServiceUnavailable {
				t.Logf("/readyz failed %v after %s", time.Since(start).Round(time.Millisecond), what)
				break
			}
			if time.Since(start) > 2*time.Second {
				t.Fatalf("/readyz still ready %v after %s", time.Since(start), what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	ready := func(what string, start time.Time) {
		t.Helper()
		servicetest.WaitReady(t, base)
		t.Logf("/readyz ready again %v after %s", time.Since(start).Round(time.Millisecond), what)
	}

	release := pg.Lock(t, "kv_entries")
	unready("the lock", time.Now())
	release()
	ready("the release", time.Now())

	resume := b.Pause(t)
	unready("the pause", time.Now())
	resume()
	ready("the resume", time.Now())
}
