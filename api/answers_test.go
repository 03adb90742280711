package api_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// failingLister fails every listing with err.
type failingLister struct{ err error }

func (l failingLister) List(context.Context, string, projection.Page) ([]contract.Entry, bool, error) {
	return nil, false, l.err
}

func (l failingLister) Keys(context.Context, string, projection.Page) ([]contract.KeyInfo, bool, error) {
	return nil, false, l.err
}

func (l failingLister) Projects(context.Context, projection.KeyRange, int, time.Time) ([]contract.ProjectInfo, error) {
	return nil, l.err
}

func (l failingLister) Scan(context.Context, string, projection.Filter, projection.Page) ([]contract.Entry, string, error) {
	return nil, "", l.err
}

// TestInternalErrorsAnswerNoDetail: an internal error is answered as a
// bare "internal error"; the driver's words stay in the log.
func TestInternalErrorsAnswerNoDetail(t *testing.T) {
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
	if err != nil {
		t.Fatal(err)
	}
	detail := `projection: list: postgres error 22021: invalid byte sequence for encoding "UTF8": 0x00`
	s, err := api.New(api.Config{Tokens: tokens}, &fakeWriter{}, failingLister{&contract.Error{Code: contract.EInternal, Message: detail}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(s.Handler(), "GET", "/v1/kv?prefix=tenant/acme/project/demo/", "")
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != 500 || got != `{"error":{"code":"internal","message":"internal error"}}` {
		t.Fatalf("%d %s", rec.Code, got)
	}
}
