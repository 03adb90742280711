package api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// stubLister answers every listing with its entries, cut to the limit
// and the byte budget (counting values only), or its error. When entered
// is set, each listing says so there and waits until release is closed.
type stubLister struct {
	entries []contract.Entry
	err     error
	entered chan<- struct{}
	release <-chan struct{}
}

func (l stubLister) List(_ context.Context, _ string, pg projection.Page) ([]contract.Entry, bool, error) {
	limit, maxBytes := pg.Limit, pg.MaxBytes
	if l.entered != nil {
		l.entered <- struct{}{}
		<-l.release
	}
	if l.err != nil {
		return nil, false, l.err
	}
	n, size := 0, 0
	for n < min(limit, len(l.entries)) && (n == 0 || size+len(l.entries[n].Value) <= maxBytes) {
		size += len(l.entries[n].Value)
		n++
	}
	return l.entries[:n], n < len(l.entries), nil
}

// Keys answers the keys of List's page.
func (l stubLister) Keys(ctx context.Context, prefix string, pg projection.Page) ([]contract.KeyInfo, bool, error) {
	entries, truncated, err := l.List(ctx, prefix, pg)
	keys := make([]contract.KeyInfo, len(entries))
	for i, e := range entries {
		keys[i] = contract.KeyInfo{Key: e.Key, Version: e.Version, Purpose: e.Semantics.Purpose, ExpiresAt: e.ExpiresAt}
	}
	return keys, truncated, err
}

func (l stubLister) Projects(context.Context, projection.KeyRange, int, time.Time) ([]contract.ProjectInfo, error) {
	return nil, l.err
}

func (l stubLister) Scan(ctx context.Context, prefix string, _ projection.Filter, pg projection.Page) ([]contract.Entry, string, error) {
	items, truncated, err := l.List(ctx, prefix, pg)
	if !truncated || len(items) == 0 {
		return items, "", err
	}
	return items, items[len(items)-1].Key, err
}

// mustServerWith returns the API around a fake writer and list, and
// its log.
func mustServerWith(tb testing.TB, cfg api.Config, list api.Lister) (http.Handler, *bytes.Buffer) {
	tb.Helper()
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Tokens = tokens
	var logs bytes.Buffer
	s, err := api.New(cfg, &fakeWriter{}, list, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	return s.Handler(), &logs
}

// TestAnswersHideDriverErrors: /readyz and 503 answers say a stable
// message; the driver's error, with host, user and database, is logged.
func TestAnswersHideDriverErrors(t *testing.T) {
	const secret = "failed to connect to `user=secretuser database=secretdb`: db.internal:5432"
	driverErr := fmt.Errorf("projection: list: %w: %w",
		&contract.Error{Code: contract.EUnavailable, Message: "the projection database is unavailable; retry", RetryAfterSeconds: 1}, errors.New(secret))
	for _, tc := range []struct {
		name string
		cfg  api.Config
		list api.Lister
		path string
	}{
		{"OKReadyz", api.Config{Ready: func(context.Context) error { return errors.New(secret) }}, fakeLister{}, "/readyz"},
		{"OKListUnavailable", api.Config{}, stubLister{err: driverErr}, "/v1/kv?prefix=tenant/acme/project/demo/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, logs := mustServerWith(t, tc.cfg, tc.list)
			rec := serve(h, "GET", tc.path, "")
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
				t.Fatalf("status %d, Retry-After %q: want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
			}
			for _, s := range []string{"secretuser", "secretdb", "db.internal"} {
				if strings.Contains(rec.Body.String(), s) {
					t.Errorf("answer %s tells %s", rec.Body.String(), s)
				}
			}
			if !strings.Contains(logs.String(), "secretdb") {
				t.Errorf("the cause is not logged:\n%s", logs.String())
			}
		})
	}
}
