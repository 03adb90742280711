package api_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// uiAtServer is a status page over a real projection whose partition 0
// holds, relative to base: key k set to value A (-50m), B (-40m), A again
// (-30m); key d set to A (-50m) and deleted (-20m). Every value carries
// pickerMarker.
func uiAtServer(t *testing.T, base time.Time) http.Handler {
	t.Helper()
	store := projection.New(testenv.MustPostgres(t))
	valueA := json.RawMessage(`{"secret":"` + pickerMarker + `","v":"A"}`)
	valueB := json.RawMessage(`{"secret":"` + pickerMarker + `","v":"B"}`)
	var batch []projection.Applied
	add := func(key string, version int64, ago time.Duration, value json.RawMessage) {
		k, err := contract.ParseKey(key)
		if err != nil {
			t.Fatal(err)
		}
		ts := base.Add(-ago)
		e := contract.Event{SchemaVersion: contract.SchemaVersion, Key: key, Scope: k.Scope(), Version: version, PrevVersion: version - 1,
			Kind: contract.KindPut, Op: contract.OpSet, After: value, CreatedAt: base.Add(-time.Hour), TS: ts,
			Semantics: contract.Semantics{Purpose: "checkpoint", Producer: "test"},
			RequestID: fmt.Sprintf("req-%d", len(batch)), Principal: "acme-svc", WriterEpoch: 1}
		if value == nil {
			e.Kind, e.Op = contract.KindDelete, contract.OpDelete
		}
		batch = append(batch, projection.Applied{Partition: 0, Offset: int64(len(batch)), Event: e})
	}
	const k, d = "tenant/acme/project/a/k", "tenant/acme/project/a/d"
	add(k, 1, 50*time.Minute, valueA)
	add(d, 1, 50*time.Minute, valueA)
	add(k, 2, 40*time.Minute, valueB)
	add(k, 3, 30*time.Minute, valueA)
	add(d, 2, 20*time.Minute, nil)
	if err := store.Apply(t.Context(), "kv.changes", batch); err != nil {
		t.Fatal(err)
	}
	tokens, err := api.NewTokens([]api.TokenConfig{{Token: pickerAcme, Principal: "acme-reader",
		Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Read}}}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Config{Tokens: tokens}, &fakeWriter{}, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s.Handler()
}

// TestUIAt: /ui/api/at answers a key's state at a past time as a row
// shows it: the fingerprint of the value then, equal to the row's when
// that value equals today's and different between, absent before the key
// was created and after it was deleted; a future time is 400 (field at),
// no session 401, a key the principal may not read 403; no answer
// carries a value (pickerGet).
func TestUIAt(t *testing.T) {
	base := time.Now().UTC()
	h := uiAtServer(t, base)
	acme := pickerLogin(t, h, pickerAcme)
	const k, d = "tenant/acme/project/a/k", "tenant/acme/project/a/d"
	var rows api.UIKeys
	pickerGet(t, h, "/ui/api/keys?prefix=tenant/acme/project/a/", acme, http.StatusOK, &rows)
	if len(rows.Keys) != 1 || rows.Keys[0].Key != k || rows.Keys[0].Fingerprint == "" {
		t.Fatalf("rows: %+v, want k alone, with a fingerprint", rows.Keys)
	}
	now := rows.Keys[0].Fingerprint
	at := func(key string, ago time.Duration, status int) api.UIAt {
		t.Helper()
		var a api.UIAt
		when := base.Add(-ago).Format(time.RFC3339Nano)
		pickerGet(t, h, "/ui/api/at?key="+url.QueryEscape(key)+"&at="+url.QueryEscape(when), acme, status, &a)
		return a
	}
	if a := at(k, 45*time.Minute, http.StatusOK); a.Key != k || a.Version != 1 || a.Purpose != "checkpoint" || a.Fingerprint != now || a.Absent || a.Position != "p0.o1" {
		t.Fatalf("k at -45m: %+v, want version 1 at p0.o1 with today's fingerprint %s (the same value)", a, now)
	}
	if a := at(k, 35*time.Minute, http.StatusOK); a.Version != 2 || a.Fingerprint == "" || a.Fingerprint == now || a.Absent {
		t.Fatalf("k at -35m: %+v, want version 2 with a fingerprint other than %s", a, now)
	}
	if a := at(k, 55*time.Minute, http.StatusOK); !a.Absent || a.Version != 0 || a.Fingerprint != "" {
		t.Fatalf("k before its creation: %+v, want absent", a)
	}
	if a := at(d, 25*time.Minute, http.StatusOK); a.Absent || a.Fingerprint != now {
		t.Fatalf("d before its delete: %+v, want the fingerprint of A, %s", a, now)
	}
	if a := at(d, 10*time.Minute, http.StatusOK); !a.Absent || a.Fingerprint != "" || a.Position != "p0.o4" {
		t.Fatalf("d after its delete: %+v, want absent at p0.o4", a)
	}
	var pos api.UIAt
	pickerGet(t, h, "/ui/api/at?key="+k+"&at=p0.o2", acme, http.StatusOK, &pos)
	if pos.Version != 2 || pos.At != "p0.o2" || pos.Position != "p0.o2" {
		t.Fatalf("k at p0.o2: %+v, want version 2", pos)
	}
	for _, bad := range []string{"&at=" + url.QueryEscape(base.Add(time.Hour).Format(time.RFC3339)), "&at=yesterday", ""} {
		var e struct{ Error contract.Error }
		pickerGet(t, h, "/ui/api/at?key="+k+bad, acme, http.StatusBadRequest, &e)
		if e.Error.Code != contract.EInvalid || e.Error.Field != "at" {
			t.Fatalf("at %q: %+v, want invalid on field at", bad, e.Error)
		}
	}
	pickerGet(t, h, "/ui/api/at?key=tenant/other/project/c/y&at=p0.o1", acme, http.StatusForbidden, nil)
	pickerGet(t, h, "/ui/api/at?key="+k+"&at=p0.o1", nil, http.StatusUnauthorized, nil)
}
