package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// The fakes hold no history: a key's state says whether it was written.

func (fakeLister) History(context.Context, string, int64, int, int) ([]contract.HistoryVersion, int64, error) {
	return []contract.HistoryVersion{}, 0, nil
}

func (l failingLister) History(context.Context, string, int64, int, int) ([]contract.HistoryVersion, int64, error) {
	return nil, 0, l.err
}

func (l stubLister) History(context.Context, string, int64, int, int) ([]contract.HistoryVersion, int64, error) {
	return nil, 0, l.err
}

// TestHistoryHandler: :history refuses bad parameters (400 naming the
// field), answers 404 for a key never written (version 0), and a page for
// one that was (deleted since: its state keeps its version).
func TestHistoryHandler(t *testing.T) {
	deleted := map[string]keystate.State{"tenant/acme/project/demo/gone": {Version: 3}}
	for _, tc := range []struct {
		name, path string
		status     int
		code       string
		field      string
	}{
		{"ErrFromVersionZero", key + "k:history?fromVersion=0", 400, contract.EInvalid, "fromVersion"},
		{"ErrFromVersionText", key + "k:history?fromVersion=one", 400, contract.EInvalid, "fromVersion"},
		{"ErrCursor", key + "k:history?cursor=abc", 400, contract.EInvalid, "cursor"},
		{"ErrLimitZero", key + "k:history?limit=0", 400, contract.EInvalid, "limit"},
		{"ErrLimitTooLarge", key + "k:history?limit=1001", 400, contract.EInvalid, "limit"},
		{"ErrUnknownParam", key + "k:history?from=1", 400, contract.EInvalid, "from"},
		{"ErrTwice", key + "k:history?limit=1&limit=2", 400, contract.EInvalid, "limit"},
		{"ErrNeverWritten", key + "k:history", 404, contract.ENotFound, "key"},
		{"OKDeleted", key + "gone:history?fromVersion=2&limit=5", 200, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(mustServer(t, &fakeWriter{states: deleted}), "GET", tc.path, "")
			var e struct{ Error contract.Error }
			_ = json.Unmarshal(rec.Body.Bytes(), &e)
			if rec.Code != tc.status || e.Error.Code != tc.code || e.Error.Field != tc.field {
				t.Fatalf("%d %s, want %d %s on %q", rec.Code, rec.Body, tc.status, tc.code, tc.field)
			}
			if rec.Code == http.StatusOK && rec.Body.String() != `{"key":"tenant/acme/project/demo/gone","versions":[]}`+"\n" {
				t.Fatalf("answer %q", rec.Body)
			}
		})
	}
}
