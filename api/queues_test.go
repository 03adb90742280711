package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/elemkey"
)

// The fakes answer qpeek from nothing.

func (fakeLister) Peek(context.Context, string, int, int, time.Time) ([]contract.Element, bool, error) {
	return nil, false, nil
}

func (l failingLister) Peek(context.Context, string, int, int, time.Time) ([]contract.Element, bool, error) {
	return nil, false, l.err
}

func (l stubLister) Peek(context.Context, string, int, int, time.Time) ([]contract.Element, bool, error) {
	return nil, false, l.err
}

// TestQueueHandlers: the queue routes refuse bad data, priorities,
// dedupIds, visibility timeouts, receipts and counts (400 naming the
// field, nothing asked of the writer), carry priority, dedupId,
// visibility and the receipt's item and delivery in the request, and
// answer a missing queue as empty.
func TestQueueHandlers(t *testing.T) {
	item := elemkey.QueueMember(3, 0, 4)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"ErrPushNoData", "POST", key + "q:qpush", `{}`, 400, "data"},
		{"ErrPushPriorityTooLow", "POST", key + "q:qpush", `{"data":1,"priority":-1000000001}`, 400, "priority"},
		{"ErrPushPriorityTooHigh", "POST", key + "q:qpush", `{"data":1,"priority":1000000001}`, 400, "priority"},
		{"ErrPushDedupNUL", "POST", key + "q:qpush", `{"data":1,"dedupId":"a\u0000"}`, 400, "dedupId"},
		{"ErrPushTTLZero", "POST", key + "q:qpush", `{"data":1,"ttlSeconds":0}`, 400, "ttlSeconds"},
		{"ErrPushItemTTLZero", "POST", key + "q:qpush", `{"data":1,"itemTtlSeconds":0}`, 400, "itemTtlSeconds"},
		{"ErrPushItemTTLNegative", "POST", key + "q:qpush", `{"data":1,"itemTtlSeconds":-5}`, 400, "itemTtlSeconds"},
		{"ErrPushItemTTLTooLong", "POST", key + "q:qpush", `{"data":1,"itemTtlSeconds":315360001}`, 400, "itemTtlSeconds"},
		{"ErrPushUnknownField", "POST", key + "q:qpush", `{"data":1,"value":2}`, 400, "value"},
		{"ErrPopNegativeVisibility", "POST", key + "q:qpop", `{"visibilityTimeoutSeconds":-1}`, 400, "visibilityTimeoutSeconds"},
		{"ErrPopVisibilityTooLong", "POST", key + "q:qpop", `{"visibilityTimeoutSeconds":43201}`, 400, "visibilityTimeoutSeconds"},
		{"ErrAckNoReceipt", "POST", key + "q:qack", `{}`, 400, "receipt"},
		{"ErrAckMalformedReceipt", "POST", key + "q:qack", `{"receipt":"abc"}`, 400, "receipt"},
		{"ErrAckReceiptNoDelivery", "POST", key + "q:qack", `{"receipt":"` + item + `"}`, 400, "receipt"},
		{"ErrAckReceiptDeliveryZero", "POST", key + "q:qack", `{"receipt":"` + item + `#0"}`, 400, "receipt"},
		{"ErrAckReceiptUpperHex", "POST", key + "q:qack", `{"receipt":"` + strings.ToUpper(elemkey.QueueMember(10, 0, 11)) + `#1"}`, 400, "receipt"},
		{"ErrPeekCountZero", "GET", key + "q:qpeek?count=0", ``, 400, "count"},
		{"ErrPeekCountTooMany", "GET", key + "q:qpeek?count=1001", ``, 400, "count"},
		{"ErrPeekUnknownParam", "GET", key + "q:qpeek?limit=2", ``, 400, "limit"},
		{"ErrSizeParam", "GET", key + "q:qsize?count=1", ``, 400, "count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWriter{}
			rec := serve(mustServer(t, w), tc.method, tc.path, tc.body)
			var e struct{ Error contract.Error }
			_ = json.Unmarshal(rec.Body.Bytes(), &e)
			if rec.Code != tc.status || e.Error.Field != tc.field {
				t.Fatalf("status %d field %q (%s), want %d %q", rec.Code, e.Error.Field, rec.Body, tc.status, tc.field)
			}
			if len(w.reqs) != 0 {
				t.Fatalf("the writer was asked %v", w.reqs)
			}
		})
	}
	t.Run("OKRequests", func(t *testing.T) {
		w := &fakeWriter{}
		h := mustServer(t, w)
		for _, r := range []struct{ path, body string }{
			{key + "q:qpush", `{"data": {"a": 1}, "priority": -5, "dedupId": "d1", "requestId": "r1"}`},
			{key + "q:qpop", ``},
			{key + "q:qpop", `{"visibilityTimeoutSeconds":30}`},
			{key + "q:qack", `{"receipt":"` + item + `#2"}`},
		} {
			if rec := serve(h, "POST", r.path, r.body); rec.Code != http.StatusOK {
				t.Fatalf("POST %s: %d %s", r.path, rec.Code, rec.Body)
			}
		}
		if len(w.reqs) != 4 {
			t.Fatalf("requests %+v", w.reqs)
		}
		if r := w.reqs[0]; r.Op != contract.OpQPush || string(r.Value) != `{"a":1}` || r.Priority != -5 || r.DedupID != "d1" || r.RequestID != "r1" {
			t.Errorf("qpush %+v", r)
		}
		if r := w.reqs[1]; r.Op != contract.OpQPop || r.Visibility != 0 {
			t.Errorf("qpop %+v", r)
		}
		if r := w.reqs[2]; r.Op != contract.OpQPop || r.Visibility != 30 {
			t.Errorf("qpop with visibility %+v", r)
		}
		if r := w.reqs[3]; r.Op != contract.OpQAck || r.Item != item || r.Delivery != 2 {
			t.Errorf("qack %+v", r)
		}
	})
	t.Run("OKMissingQueueIsEmpty", func(t *testing.T) {
		h := mustServer(t, &fakeWriter{})
		q := strings.TrimPrefix(key, "/v1/kv/") + "q"
		for path, want := range map[string]string{
			key + "q:qsize":          `{"queue":"` + q + `","size":0,"inFlight":0}`,
			key + "q:qpeek?count=10": `{"queue":"` + q + `","items":[]}`,
		} {
			rec := serve(h, "GET", path, "")
			if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != want {
				t.Errorf("GET %s: %d %s, want %s", path, rec.Code, rec.Body, want)
			}
		}
	})
}
