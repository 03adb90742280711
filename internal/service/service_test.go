package service

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFlags(t *testing.T) {
	newFlags := func() (*Flags, *int, *time.Duration, *bool, *string, *string) {
		f := NewFlags("t", io.Discard)
		own := f.Scope("ESKV_TEST_FLAGS")
		n := own.Int("count", 1, "how many")
		d := own.Duration("interval", time.Second, "how often")
		b := own.Bool("on", true, "whether")
		id := f.String("id", "x", "who")
		f.Rename("id", "ESKV_TEST_FLAGS_ID")
		arg := f.Arguments().String("arg", "a", "an argument of one run")
		return f, n, d, b, id, arg
	}
	vars := []string{"ESKV_TEST_FLAGS_COUNT", "ESKV_TEST_FLAGS_INTERVAL", "ESKV_TEST_FLAGS_ON", "ESKV_TEST_FLAGS_ID", "ESKV_ID", "ESKV_ARG", "ESKV_COUNT"}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		n       int
		d       time.Duration
		b       bool
		id, arg string
		wantErr string
	}{
		{name: "OKDefaults", n: 1, d: time.Second, b: true, id: "x", arg: "a"},
		{name: "OKEnv", env: map[string]string{"ESKV_TEST_FLAGS_COUNT": "3", "ESKV_TEST_FLAGS_INTERVAL": "5m", "ESKV_TEST_FLAGS_ON": "FALSE", "ESKV_TEST_FLAGS_ID": "y"},
			n: 3, d: 5 * time.Minute, id: "y", arg: "a"},
		{name: "OKFlagOverridesEnv", args: []string{"-count", "4", "-id", "z"}, env: map[string]string{"ESKV_TEST_FLAGS_COUNT": "many", "ESKV_TEST_FLAGS_ID": "y"},
			n: 4, d: time.Second, b: true, id: "z", arg: "a"},
		{name: "OKArguments", args: []string{"-arg", "b"}, n: 1, d: time.Second, b: true, id: "x", arg: "b"},
		{name: "OKOtherNamesSetNothing", env: map[string]string{"ESKV_ID": "y", "ESKV_ARG": "b", "ESKV_COUNT": "2"}, n: 1, d: time.Second, b: true, id: "x", arg: "a"},
		{name: "ErrInt", env: map[string]string{"ESKV_TEST_FLAGS_COUNT": "twelve"}, wantErr: `"ESKV_TEST_FLAGS_COUNT": invalid value "twelve"`},
		{name: "ErrDuration", env: map[string]string{"ESKV_TEST_FLAGS_INTERVAL": "5"}, wantErr: `"ESKV_TEST_FLAGS_INTERVAL": invalid value "5"`},
		{name: "ErrBool", env: map[string]string{"ESKV_TEST_FLAGS_ON": "yes"}, wantErr: `"ESKV_TEST_FLAGS_ON": invalid value "yes"`},
		{name: "ErrArguments", args: []string{"extra"}, wantErr: `unexpected arguments: ["extra"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range vars {
				t.Setenv(v, tc.env[v])
			}
			f, n, d, b, id, arg := newFlags()
			err := f.Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse: %v, want an error saying %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || *n != tc.n || *d != tc.d || *b != tc.b || *id != tc.id || *arg != tc.arg {
				t.Fatalf("Parse: %v; got %d %v %v %q %q, want %d %v %v %q %q", err, *n, *d, *b, *id, *arg, tc.n, tc.d, tc.b, tc.id, tc.arg)
			}
		})
	}
}

// TestFlagsVariables: every setting's variable is named after its flag
// by ff's rule, in its scope, but where renamed; an argument has none.
func TestFlagsVariables(t *testing.T) {
	f := NewFlags("t", io.Discard)
	f.Int("max-list-bytes", 1, "")
	f.Scope("ESKV_PROJECTOR").String("addr-file", "", "")
	f.String("instance-id", "", "")
	f.Rename("instance-id", "ESKV_WRITER_ID")
	f.Arguments().String("into", "", "")
	if err := f.Parse(nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"max-list-bytes": "ESKV_MAX_LIST_BYTES", "addr-file": "ESKV_PROJECTOR_ADDR_FILE", "instance-id": "ESKV_WRITER_ID"}
	if got := f.Variables(); !maps.Equal(got, want) {
		t.Fatalf("Variables: %v, want %v", got, want)
	}
	if u := f.Lookup("addr-file").Usage; u != " (ESKV_PROJECTOR_ADDR_FILE)" {
		t.Fatalf("usage of -addr-file: %q", u)
	}
}

// TestFlagsRenameRefusesTheRulesName: Rename is for the exceptions.
func TestFlagsRenameRefusesTheRulesName(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Rename(\"topic\", \"ESKV_TOPIC\") did not panic")
		}
	}()
	f := NewFlags("t", io.Discard)
	f.String("topic", "", "")
	f.Rename("topic", "ESKV_TOPIC")
	_ = f.Parse(nil)
}

func TestFlagsCheck(t *testing.T) {
	f := NewFlags("t", io.Discard)
	f.Int("partitions", 0, "partition count")
	f.Int("batch", 5, "batch size")
	if err := f.Parse([]string{"-partitions", "0"}); err != nil {
		t.Fatal(err)
	}
	err := f.Positive("partitions", "batch")
	if err == nil || err.Error() != "-partitions (ESKV_PARTITIONS) must be at least 1, got 0" {
		t.Fatalf("Positive: %v", err)
	}
}

func TestFlagsHelpListsTheVariables(t *testing.T) {
	var out bytes.Buffer
	f := NewFlags("t", &out)
	LogLevel(f, slog.LevelInfo)
	if err := f.Parse([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Parse -h: %v", err)
	}
	if !strings.Contains(out.String(), "(ESKV_LOG_LEVEL)") {
		t.Fatalf("-h does not name ESKV_LOG_LEVEL:\n%s", out.String())
	}
}

// TestServe: the HTTP server answers until the service stops, stops
// before the parts are cancelled, and a clean stop returns nil.
func TestServe(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addrFile := filepath.Join(t.TempDir(), "addr")
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	httpDown := make(chan bool, 1)
	part := func(ctx context.Context) error {
		<-ctx.Done()
		_, err := http.Get("http://" + ln.Addr().String() + "/healthz")
		httpDown <- err != nil
		return nil
	}
	done := make(chan error, 1)
	h := Handler(NewRegistry(), func(context.Context) error { return errors.New("not yet") }, "")
	go func() { done <- Serve(ctx, log, "test", HTTP{Listener: ln, AddrFile: addrFile, Handler: h}, part) }()

	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(addrFile); err == nil && string(b) == ln.Addr().String() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no address file")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 503, "/metrics": 200} {
		r, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil || r.StatusCode != want {
			t.Fatalf("GET %s: %v %v, want %d", path, r, err, want)
		}
		r.Body.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
	if !<-httpDown {
		t.Error("the HTTP server still answered when the parts were cancelled")
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Errorf("no stopped line:\n%s", logs.String())
	}
}

func TestServeStopsWhenAPartEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		ret  error
		want string
	}{
		{"ErrPart", errors.New("boom"), "boom"},
		{"ErrPartReturnsEarly", nil, "test stopped unexpectedly"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			long := func(ctx context.Context) error { <-ctx.Done(); return nil }
			short := func(context.Context) error { return tc.ret }
			err = Serve(context.Background(), slog.New(slog.DiscardHandler), "test", HTTP{Listener: ln, Handler: http.NotFoundHandler()}, long, short)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Serve: %v, want %q", err, tc.want)
			}
		})
	}
}
