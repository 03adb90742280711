package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// writeThenRead: put, get (same value and version), delete, get →
// not_found.
func writeThenRead(ctx context.Context, r *runner) error {
	k, v := r.key("k"), json.RawMessage(`{"n":1}`)
	put, err := r.c.Put(ctx, client.PutRequest{Key: k, Value: v})
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	check("put %s answered version %d", k, put.Entry.Version)
	got, err := r.c.Get(ctx, k)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if !sameJSON(got.Value, v) || got.Version != put.Entry.Version {
		return failf("get answered %s at version %d, want %s at %d", got.Value, got.Version, v, put.Entry.Version)
	}
	check("get answers the same value at the same version")
	if _, err := r.c.Delete(ctx, k, client.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	check("delete succeeded")
	if _, err = r.c.Get(ctx, k); err == nil {
		return failf("get after delete succeeded")
	}
	if _, ok := typed(err, contract.ENotFound); !ok {
		return failf("get after delete: %v, want the typed not_found error", err)
	}
	check("get after delete is the typed not_found error (*contract.Error code %s)", contract.ENotFound)
	return nil
}

// casConflict: a CAS on the current version succeeds, on an old one is
// the typed version_conflict carrying the current version.
func casConflict(ctx context.Context, r *runner) error {
	k := r.key("k")
	first, err := r.c.Put(ctx, client.PutRequest{Key: k, Value: json.RawMessage(`{"n":1}`)})
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	v1 := first.Entry.Version
	check("put answered v1 = %d", v1)
	second, err := r.c.Put(ctx, client.PutRequest{Key: k, Value: json.RawMessage(`{"n":2}`), ExpectedVersion: &v1})
	if err != nil {
		return fmt.Errorf("CAS put on v1: %w", err)
	}
	v2 := second.Entry.Version
	if v2 <= v1 {
		return failf("CAS put answered version %d, not above v1 %d", v2, v1)
	}
	check("CAS put expecting v1 succeeded with v2 = %d", v2)
	_, err = r.c.Put(ctx, client.PutRequest{Key: k, Value: json.RawMessage(`{"n":3}`), ExpectedVersion: &v1})
	e, ok := typed(err, contract.EConflict)
	if !ok {
		return failf("CAS put expecting v1 again: %v, want the typed version_conflict", err)
	}
	if e.Current == nil || e.Current.Version != v2 {
		return failf("the version_conflict's current entry is %+v, want version %d", e.Current, v2)
	}
	check("CAS put expecting v1 again is the typed version_conflict, current version %d", e.Current.Version)
	got, err := r.c.Get(ctx, k)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if got.Version != v2 || !sameJSON(got.Value, json.RawMessage(`{"n":2}`)) {
		return failf("get answered %s at %d, want v2's value at %d", got.Value, got.Version, v2)
	}
	check("get still shows v2's value")
	return nil
}

// retryReplay: the answer of a put with a requestId is dropped after the
// write; the client's retry with the same requestId is answered as a
// replay and the key has one version.
func retryReplay(ctx context.Context, r *runner) error {
	k := r.key("k")
	path, err := url.JoinPath("/v1/kv/", k)
	if err != nil {
		return err
	}
	if err := r.post(ctx, "/drop-next-response", url.Values{"path": {path}}); err != nil {
		return err
	}
	check("armed drop-next-response for %s", path)
	res, err := r.c.Put(ctx, client.PutRequest{Key: k, Value: json.RawMessage(`{"n":1}`), RequestID: fmt.Sprintf("conformance-%d", time.Now().UnixNano())})
	if err != nil {
		return fmt.Errorf("put through the retry policy: %w", err)
	}
	if r.retries.Load() < 1 {
		return failf("the put succeeded without a retry: the answer was not dropped")
	}
	check("put succeeded after %d retried transport error(s), version %d", r.retries.Load(), res.Entry.Version)
	if !res.Replayed {
		return failf("the retried put was not answered as a replay (Eskv-Replayed)")
	}
	check("the retry was answered as a replay (Eskv-Replayed: true)")
	var versions []int64
	for v, err := range r.c.History(ctx, k, client.HistoryOptions{}) {
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		versions = append(versions, v.Version)
	}
	if len(versions) != 1 || versions[0] != res.Entry.Version {
		return failf("history holds versions %v, want exactly [%d]", versions, res.Entry.Version)
	}
	check("history holds exactly one version (%d)", versions[0])
	return nil
}
