package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/testenv"
)

func TestRunPersistsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	const topic = "devbroker.test"

	addr, stop := mustRun(t, dir)
	cl := mustClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	rec := &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("kept")}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cl.Close()
	stop()

	addr, stop = mustRun(t, dir)
	defer stop()
	cl = mustClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no record read back before the deadline: %v", err)
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			t.Fatalf("fetch: %v", errs)
		}
		if recs := fetches.Records(); len(recs) > 0 {
			if got := string(recs[0].Value); got != "kept" {
				t.Fatalf("read back %q, want %q", got, "kept")
			}
			return
		}
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		wantPort int
		wantHost string
		wantDir  string
		wantErr  bool
	}{
		{name: "Defaults", wantPort: 19092, wantDir: ".eskv/broker"},
		{name: "Env", env: map[string]string{"ESKV_BROKER_PORT": "29092", "ESKV_BROKER_DATA": "/tmp/b"}, wantPort: 29092, wantDir: "/tmp/b"},
		{name: "FlagOverridesEnv", args: []string{"-addr", "127.0.0.1:1234"}, env: map[string]string{"ESKV_BROKER_PORT": "29092"}, wantPort: 1234, wantDir: ".eskv/broker"},
		{name: "ColonPort", args: []string{"-addr", ":0"}, wantPort: 0, wantDir: ".eskv/broker"},
		{name: "OtherHost", args: []string{"-addr", "10.1.2.3:1234"}, wantPort: 1234, wantHost: "10.1.2.3", wantDir: ".eskv/broker"},
		{name: "ErrUnspecifiedHost", args: []string{"-addr", "0.0.0.0:19092"}, wantErr: true},
		{name: "ErrHostName", args: []string{"-addr", "kafka:19092"}, wantErr: true},
		{name: "ErrNotAPort", args: []string{"-addr", "kafka"}, wantErr: true},
		{name: "ErrEmptyData", args: []string{"-data", ""}, wantErr: true},
		{name: "ErrLogLevel", args: []string{"-log-level", "loud"}, wantErr: true},
		{name: "ErrEnvNotAPort", env: map[string]string{"ESKV_BROKER_PORT": "kafka"}, wantErr: true},
		{name: "ErrEnvOtherHost", env: map[string]string{"ESKV_BROKER_PORT": "0.0.0.0:19092"}, wantErr: true},
		{name: "ErrEnvLogLevel", env: map[string]string{"ESKV_BROKER_LOG_LEVEL": "loud"}, wantErr: true},
		{name: "ErrEnvSync", env: map[string]string{"ESKV_BROKER_SYNC": "yes"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []string{"ESKV_BROKER_PORT", "ESKV_BROKER_DATA", "ESKV_BROKER_LOG_LEVEL", "ESKV_BROKER_SYNC"} {
				t.Setenv(v, tc.env[v])
			}
			cfg, err := parseFlags(tc.args, io.Discard)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("want an error, got %+v", cfg)
				}
				for name := range tc.env {
					if !strings.Contains(err.Error(), name) {
						t.Errorf("error %q does not name %s", err, name)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.addr.port != tc.wantPort || cfg.addr.host != tc.wantHost || cfg.dataDir != tc.wantDir {
				t.Fatalf("got %+v dir %q, want port %d host %q dir %q", cfg.addr, cfg.dataDir, tc.wantPort, tc.wantHost, tc.wantDir)
			}
		})
	}
}

func TestRunHelp(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"-h"}, io.Discard, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("want flag.ErrHelp, got %v", err)
	}
	for _, name := range []string{"ESKV_BROKER_PORT", "ESKV_BROKER_DATA"} {
		if !strings.Contains(stderr.String(), name) {
			t.Errorf("usage does not mention %s:\n%s", name, stderr.String())
		}
	}
}

// mustRun starts run in-process on a free port with dir as its data
// directory and returns the broker's address and a func that stops it and
// waits for run to return.
func mustRun(tb testing.TB, dir string) (addr string, stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "0", "-data", dir}, io.Discard, logs)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("run: %v", err)
				}
			case <-time.After(20 * time.Second):
				tb.Errorf("run did not return after cancel; logs:\n%s", logs.String())
			}
		})
	}
	tb.Cleanup(stop)

	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			tb.Fatalf("run returned before listening: %v; logs:\n%s", err, logs.String())
		default:
		}
		if addr := listenAddr(logs.String()); addr != "" {
			return addr, stop
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("broker did not log its address; logs:\n%s", logs.String())
	return "", nil
}

func listenAddr(logs string) string {
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "broker listening" {
			return line.Addr
		}
	}
	return ""
}

func mustClient(tb testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		tb.Fatalf("kafka client: %v", err)
	}
	return cl
}
