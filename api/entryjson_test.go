package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
)

// encodeLikeEcho is what c.JSON wrote for an entry: jsonSerializer's
// encoder, HTML escaping off, a final newline.
func encodeLikeEcho(t testing.TB, e *contract.Entry) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// entryStrings are strings that take every path of codec.AppendJSONString.
var entryStrings = []string{"", "plain", `q"uote\back`, "<b>&amp;</b>", "ctl\x00\x01\x1f\b\f\n\r\t\x7f", "é ü 日本 😀",
	"bad \xff utf8 \xc3", "line\u2028sep\u2029", "tenant/acme/project/p/k"}

// TestAnswerEntryMatchesEncodingJSON: the reflection-free encoder writes
// the same bytes as the encoding/json answer it replaced, for entries
// with and without each optional field, odd strings, values with spaces
// (as jsonb returns them) and none.
func TestAnswerEntryMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 24, 2, 3, 4, 500600700, time.UTC)
	exp := at.Add(time.Hour).In(time.FixedZone("x", 3600))
	values := []json.RawMessage{nil, json.RawMessage(`{"a": [1, 2, {"b": "<c>"}], "d": null}`), json.RawMessage(`"s"`), json.RawMessage(`12.5e3`)}
	n := 0
	for i, s := range entryStrings {
		for j, v := range values {
			e := &contract.Entry{Key: s, Value: v, Version: int64(i*7 - 3), CreatedAt: at, UpdatedAt: at.Add(time.Duration(j)),
				LastWriter: entryStrings[(i+1)%len(entryStrings)], Semantics: contract.Semantics{Purpose: s}}
			if (i+j)%2 == 0 {
				e.ExpiresAt, e.RequestID, e.SpecRef = &exp, s, "spec/"+s
				e.Semantics = contract.Semantics{Purpose: "config", Producer: s, ConsumerHints: []string{s, "b"}, TTLSeconds: int64(i + 1)}
			}
			if j == 3 {
				e.Semantics.ConsumerHints = []string{}
			}
			got, ok := appendEntry(nil, e)
			if want := encodeLikeEcho(t, e); !ok || !bytes.Equal(got, want) {
				t.Errorf("entry %d/%d: got %q (ok %v), encoding/json %q", i, j, got, ok, want)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no entries compared")
	}
}

// TestAppendEntryRefusesWhatEncodingJSONRefuses: an invalid value or a
// year past 9999 is not encoded here (answerEntry falls back to c.JSON,
// which reports it).
func TestAppendEntryRefusesWhatEncodingJSONRefuses(t *testing.T) {
	if _, ok := appendEntry(nil, &contract.Entry{Value: json.RawMessage(`{"a":`)}); ok {
		t.Error("invalid value encoded")
	}
	if _, ok := appendEntry(nil, &contract.Entry{CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); ok {
		t.Error("year 10000 encoded")
	}
}

// FuzzAppendEntry compares the two encoders on arbitrary strings.
func FuzzAppendEntry(f *testing.F) {
	for _, s := range entryStrings {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, key, hint string) {
		e := &contract.Entry{Key: key, Value: json.RawMessage(`true`), LastWriter: hint, RequestID: hint,
			Semantics: contract.Semantics{Purpose: key, ConsumerHints: []string{hint}}}
		got, ok := appendEntry(nil, e)
		if want := encodeLikeEcho(t, e); !ok || !bytes.Equal(got, want) {
			t.Fatalf("got %q (ok %v), encoding/json %q", got, ok, want)
		}
	})
}
