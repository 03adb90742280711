package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/internal/service/servicetest"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

func TestHelpListsTheEnvironment(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"-h"}, io.Discard, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: %v, want flag.ErrHelp", err)
	}
	for _, v := range []string{"ESKV_BROKERS", "ESKV_POSTGRES_URL", "ESKV_TOPIC", "ESKV_PARTITIONS", "ESKV_PROJECTOR_ADDR", "ESKV_LOG_LEVEL"} {
		if !strings.Contains(stderr.String(), v) {
			t.Errorf("-h does not mention %s:\n%s", v, stderr.String())
		}
	}
}

// TestErrBadEnv: a variable the flag does not accept is an error naming
// the variable, never a silent default, in every command.
func TestErrBadEnv(t *testing.T) {
	for _, tc := range []struct {
		command     []string
		name, value string
	}{
		{nil, "ESKV_PARTITIONS", "zero"},
		{nil, "ESKV_PARTITIONS", "-3"},
		{nil, "ESKV_PROJECTOR_CHECK_INTERVAL", "30"},
		{nil, "ESKV_PROJECTOR_CHECK_INTERVAL", "0s"},
		{nil, "ESKV_LOG_LEVEL", "loud"},
		{[]string{"rebuild", "-into", "x"}, "ESKV_PARTITIONS", "twelve"},
		{[]string{"diff"}, "ESKV_LOG_LEVEL", "verbose"},
	} {
		t.Run(fmt.Sprint(tc.command, tc.name, "=", tc.value), func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			err := run(context.Background(), tc.command, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.name) {
				t.Fatalf("run with %s=%s: %v, want an error naming %s", tc.name, tc.value, err, tc.name)
			}
		})
	}
}

func TestRunProjectsAndServes(t *testing.T) {
	b, pg := mustStack(t, 3)
	addrFile := filepath.Join(t.TempDir(), "addr")
	t.Setenv("ESKV_PROJECTOR_ADDR_FILE", addrFile)
	var logs testenv.Buffer
	base, r := servicetest.Start(t, "serve", addrFile, func(ctx context.Context) error { return runServe(ctx, &logs) })
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := servicetest.Get(base + path); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}

	// One event, produced as a writer does: in a transaction.
	const key = "tenant/t/project/p/k"
	now := time.Now().UTC().Truncate(time.Microsecond)
	e := events.Event{
		SchemaVersion: events.SchemaVersion, Key: key, Scope: "tenant/t/project/p", Version: 1,
		Kind: events.KindPut, Op: events.OpCreate, After: json.RawMessage(`{"a":1}`),
		CreatedAt: now, TS: now, Principal: "tester", Semantics: events.Semantics{Purpose: "config"},
	}
	testenv.MustProduce(t, b, &e)
	s := projection.New(pg.Pool)
	testenv.WaitFor(t, servicetest.Timeout, "the event in Postgres", func() bool {
		st, err := s.State(context.Background(), key)
		return err == nil && st.Version == 1
	})
	if code, body := servicetest.Get(base + "/metrics"); code != http.StatusOK || !strings.Contains(body, "eskv_projector_events_applied_total 1") {
		t.Errorf("GET /metrics: %d, applied counter missing:\n%s", code, body)
	}

	if err := r.Stop(t); err != nil {
		t.Errorf("run after cancel: %v", err)
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Errorf("no JSON 'stopped' log line:\n%s", logs.String())
	}
}
