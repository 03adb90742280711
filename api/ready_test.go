package api_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/api"
)

// notReadyWriter is a writer joining its group, catching up, or whose
// brokers do not answer.
type notReadyWriter struct{ fakeWriter }

func (*notReadyWriter) Ready() bool { return false }

// loopingWriter forwards some partitions back to itself.
type loopingWriter struct{ fakeWriter }

func (*loopingWriter) ForwardLoops() []int32 { return []int32{3} }

// TestReadyGauge: eskv_writer_ready is what /readyz answers, checked at
// each scrape: 0 while the projection database does not answer, while
// the writer is not ready (its brokers silent) or loops, 1 once it is
// ready, so storage out of reach is seen with no request and no probe.
func TestReadyGauge(t *testing.T) {
	dbDown := errors.New("dial tcp db.internal:5432: connection refused")
	for _, tc := range []struct {
		name  string
		w     api.Writer
		ready func(context.Context) error
		want  float64
	}{
		{"OneWhenReady", &fakeWriter{}, func(context.Context) error { return nil }, 1},
		{"ZeroWhileTheDatabaseFails", &fakeWriter{}, func(context.Context) error { return dbDown }, 0},
		{"ZeroWhileTheWriterIsNotReady", &notReadyWriter{}, nil, 0},
		{"ZeroWhileItLoops", &loopingWriter{}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			s, err := api.New(api.Config{Tokens: tokens, Registerer: reg, Ready: tc.ready}, tc.w, fakeLister{}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			got := -1.0
			for _, mf := range mfs {
				if mf.GetName() == "eskv_writer_ready" {
					got = mf.GetMetric()[0].GetGauge().GetValue()
				}
			}
			if got != tc.want {
				t.Errorf("eskv_writer_ready %v, want %v", got, tc.want)
			}
			status := serve(s.Handler(), "GET", "/readyz", "").Code
			if (status == http.StatusOK) != (tc.want == 1) {
				t.Errorf("/readyz %d while eskv_writer_ready is %v", status, tc.want)
			}
		})
	}
}
