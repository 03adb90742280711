package schemas_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/elemkey"
	"github.com/eskv/eskv/schemas"
)

// The event codec (encode.go, decode.go) must write the bytes
// encoding/json writes and read what encoding/json reads: these tests
// hold it to the reflection-based reference below, which is what
// codec.MarshalEvent and codec.UnmarshalEvent were before.

// reflectUnmarshal is codec.UnmarshalEvent as it was with encoding/json.
func reflectUnmarshal(b []byte) (contract.Event, error) {
	var e contract.Event
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&e); err != nil {
		return contract.Event{}, err
	}
	if e.Key == "" || e.Version < 1 || e.PrevVersion >= e.Version {
		return contract.Event{}, fmt.Errorf("bad identity")
	}
	switch e.Kind {
	case contract.KindPut, contract.KindDelete, contract.KindExpire:
	default:
		return contract.Event{}, fmt.Errorf("bad kind")
	}
	return e, nil
}

// elementSamples are events of collections, one per element op, with
// every Element field used somewhere.
func elementSamples() map[string]contract.Event {
	base := samples()["PutSet"]
	base.Key, base.Op = "tenant/acme/project/web/sets/tags", contract.OpSAdd
	base.Before, base.After = json.RawMessage(`{"size":1,"since":3}`), json.RawMessage(`{"size":2,"since":3}`)
	base.Semantics = contract.Semantics{Purpose: "set"}
	visible, pushed, expires := t1.Add(30*time.Second), t1.Add(-time.Minute), t2
	out := map[string]contract.Event{}
	add := func(name string, op contract.Op, kind contract.Kind, el contract.Element) {
		e := base
		e.Op, e.Kind, e.Element = op, kind, &el
		if op.IsQueueWrite() {
			e.Semantics.Purpose = "queue"
		} else if op == contract.OpLPush || op == contract.OpRPop || op == contract.OpLPop || op == contract.OpRPush {
			e.Semantics.Purpose = "list"
		}
		out[name] = e
	}
	add("SAdd", contract.OpSAdd, contract.KindPut, contract.Element{Op: contract.ElementAdd, Member: "blue <&> \u2028"})
	add("SRem", contract.OpSRem, contract.KindPut, contract.Element{Op: contract.ElementRemove, Member: "blue"})
	add("LPush", contract.OpLPush, contract.KindPut, contract.Element{Op: contract.ElementAdd, Member: elemkey.ListPosition(-3), Value: json.RawMessage(`{"job":1}`)})
	add("RPop", contract.OpRPop, contract.KindPut, contract.Element{Op: contract.ElementRemove, Member: elemkey.ListPosition(7), Value: json.RawMessage(`"x"`)})
	add("QPush", contract.OpQPush, contract.KindPut, contract.Element{Op: contract.ElementAdd, Member: elemkey.QueueMember(3, 0, 9),
		Value: json.RawMessage(`{"n":1}`), State: decide.ItemReady, DedupID: "d-1", PushedAt: &pushed, ExpiresAt: &expires})
	add("QPop", contract.OpQPop, contract.KindPut, contract.Element{Op: contract.ElementAdd, Member: elemkey.QueueMember(3, -5, 9),
		Value: json.RawMessage(`null`), State: decide.ItemInFlight, Deliveries: 2, VisibleAt: &visible, PushedAt: &pushed,
		ReceiptNonce: "0123456789abcdef0123456789abcdef"})
	add("QAck", contract.OpQAck, contract.KindPut, contract.Element{Op: contract.ElementRemove, Member: elemkey.QueueMember(3, 0, 9), Value: json.RawMessage(`1`)})
	return out
}

// allSamples is every sample event: plain, transactional and element.
func allSamples() map[string]contract.Event {
	all := samples()
	for name, e := range elementSamples() {
		all[name] = e
	}
	return all
}

func TestMarshalMatchesEncodingJSON(t *testing.T) {
	for name, e := range allSamples() {
		t.Run("OK"+name, func(t *testing.T) {
			want, err := contract.EncodeJSON(&e)
			if err != nil {
				t.Fatal(err)
			}
			got := mustMarshal(t, &e)
			if !bytes.Equal(got, want) {
				t.Errorf("Marshal differs from encoding/json:\n got %s\nwant %s", got, want)
			}
			if err := schemas.ValidateChange(got); err != nil {
				t.Errorf("%v\n%s", err, got)
			}
			back, err := codec.UnmarshalEvent(got)
			if err != nil {
				t.Fatal(err)
			}
			if ref, _ := reflectUnmarshal(got); !reflect.DeepEqual(back, ref) || !reflect.DeepEqual(back, e) {
				t.Errorf("Unmarshal(%s) =\n%+v\nwant %+v", got, back, e)
			}
		})
	}
	t.Run("OKValuesCompactedKeepingTheirBytes", func(t *testing.T) {
		e := samples()["PutSet"]
		e.Before = json.RawMessage(" {\"a\" : [1, 2,\t3], \"s\": \"<&> \u2028 \xff\"}\n")
		e.After = json.RawMessage(`"\u00e9\ud83d\ude00"`)
		e.Element = &contract.Element{Op: "add", Member: "\x00\x1f\"\\\xff\u2029", Value: json.RawMessage("[ ]")}
		checkMarshal(t, &e)
	})
	t.Run("OKOtherZones", func(t *testing.T) {
		e := samples()["PutSet"]
		e.TS = t1.In(time.FixedZone("x", -(9*3600 + 30*60)))
		e.CreatedAt = time.Date(1, 1, 1, 0, 0, 0, 0, time.FixedZone("y", 23*3600+59*60+59))
		checkMarshal(t, &e)
	})
	for name, mutate := range map[string]func(e *contract.Event){
		"ErrBeforeInvalid":  func(e *contract.Event) { e.Before = json.RawMessage(`{"a":`) },
		"ErrAfterEmpty":     func(e *contract.Event) { e.After = json.RawMessage{} },
		"ErrAfterTwoValues": func(e *contract.Event) { e.After = json.RawMessage(`1 2`) },
		"ErrElementValue":   func(e *contract.Event) { e.Element = &contract.Element{Value: json.RawMessage(`tru`)} },
		"ErrYear10000":      func(e *contract.Event) { e.TS = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"ErrYearNegative":   func(e *contract.Event) { e.CreatedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) },
		"ErrZone24h":        func(e *contract.Event) { e.TS = t1.In(time.FixedZone("x", 24*3600)) },
		"ErrZoneMinus24h": func(e *contract.Event) {
			t := t1.In(time.FixedZone("x", -24*3600-59))
			e.ExpiresAt = &t
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := samples()["PutSet"]
			mutate(&e)
			if _, err := contract.EncodeJSON(&e); err == nil {
				t.Fatal("encoding/json encodes it: not an error case")
			}
			if b, err := codec.MarshalEvent(&e); err == nil {
				t.Errorf("Marshal encoded %s", b)
			}
		})
	}
}

// checkMarshal checks that Marshal writes e as encoding/json does, or
// fails as it does.
func checkMarshal(tb testing.TB, e *contract.Event) {
	tb.Helper()
	want, wantErr := contract.EncodeJSON(e)
	got, err := codec.MarshalEvent(e)
	switch {
	case (err != nil) != (wantErr != nil):
		tb.Fatalf("Marshal: error %v, encoding/json: error %v", err, wantErr)
	case !bytes.Equal(got, want):
		tb.Fatalf("Marshal differs from encoding/json:\n got %q\nwant %q", got, want)
	}
}

// checkUnmarshal checks that Unmarshal reads b as encoding/json does, and
// that what it reads encodes as encoding/json encodes it.
func checkUnmarshal(tb testing.TB, b []byte) {
	tb.Helper()
	want, wantErr := reflectUnmarshal(b)
	got, err := codec.UnmarshalEvent(b)
	switch {
	case (err != nil) != (wantErr != nil):
		tb.Fatalf("Unmarshal(%q): error %v, encoding/json: error %v", b, err, wantErr)
	case !reflect.DeepEqual(got, want):
		tb.Fatalf("Unmarshal(%q) =\n%#v\nencoding/json:\n%#v", b, got, want)
	}
	rec, verbatim, recErr := codec.UnmarshalRecord(b)
	if !reflect.DeepEqual(rec, got) || (recErr != nil) != (err != nil) {
		tb.Fatalf("UnmarshalRecord(%q) = %+v, %v; Unmarshal: %+v, %v", b, rec, recErr, got, err)
	}
	if err != nil {
		return
	}
	checkMarshal(tb, &got)
	if enc, err := codec.MarshalEvent(&got); err == nil && verbatim && !reflect.DeepEqual(jsonValue(tb, b), jsonValue(tb, enc)) {
		tb.Fatalf("UnmarshalRecord(%q): verbatim, but its encoding says otherwise: %q", b, enc)
	}
	// What Marshal writes reads back to what encodes to the same bytes:
	// a record's value is what the projector would write for its event
	// (projection.Applied.Raw).
	if enc, err := codec.MarshalEvent(&got); err == nil {
		again, err := codec.UnmarshalEvent(enc)
		if err != nil {
			tb.Fatalf("Unmarshal(%q): %v", enc, err)
		}
		if b := mustMarshal(tb, &again); !bytes.Equal(b, enc) {
			tb.Fatalf("Marshal∘Unmarshal changed %q into %q", enc, b)
		}
		// (Invalid UTF-8 in a value, which the encoding keeps, is odd.)
		if _, verbatim, _ := codec.UnmarshalRecord(enc); !verbatim && utf8.Valid(enc) {
			tb.Fatalf("UnmarshalRecord(%q): not verbatim, but it is an event's encoding", enc)
		}
	}
}

// jsonValue returns the JSON value of the first value in b, numbers as
// written.
func jsonValue(tb testing.TB, b []byte) any {
	tb.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		tb.Fatal(err)
	}
	return v
}

func TestUnmarshalMatchesEncodingJSON(t *testing.T) {
	e := goldenPut()
	valid := string(mustMarshal(t, &e))
	for name, in := range map[string]string{
		"OKGolden":              valid,
		"OKSpacesAndTrailer":    " \n" + valid[:1] + " \t" + valid[1:] + " {garbage",
		"OKNamesIgnoringCase":   `{"KEY":"k","Version":2,"PREVVERSION":1,"kInd":"put","\u0073cope":"s","\u212aind":"delete"}`,
		"OKExactNameWins":       `{"Key":"a","key":"b","KEY":"c","version":1,"kind":"put"}`,
		"OKNullsLeaveFields":    `{"key":"k","version":1,"kind":"put","key":null,"version":null,"ts":null,"semantics":null,"op":null}`,
		"OKNullPointersAndRaw":  `{"key":"k","version":1,"kind":"put","expiresAt":null,"element":null,"before":null}`,
		"OKRepeatedMembers":     `{"key":"k","version":1,"kind":"put","semantics":{"purpose":"a"},"semantics":{"producer":"p"},"element":{"op":"add"},"element":{"member":"m","value":1}}`,
		"OKHintsReused":         `{"key":"k","version":1,"kind":"put","semantics":{"consumerHints":["a","b","c"]},"semantics":{"consumerHints":["x"]},"semantics":{"consumerHints":[null,null,null,null]}}`,
		"OKHintsEmpty":          `{"key":"k","version":1,"kind":"put","semantics":{"consumerHints":[]}}`,
		"OKEscapes":             `{"key":"\ud83d\ude00\ud800x\udc00\u00e9\"\\\/\b\f\n\r\t` + "\xff\xc3" + `","version":1,"kind":"put"}`,
		"OKRawKeptAsIs":         `{"key":"k","version":1,"kind":"put","after":  { "a" : [ 1 , 2.5e-3 , true , null ] } ,"before":"\u00e9"}`,
		"OKUnknownNested":       `{"key":"k","version":1,"kind":"put","x":{"y":[{"z":[]}, -0, 1E+2]}}`,
		"OKIntegerLimits":       `{"key":"k","version":9223372036854775807,"prevVersion":-9223372036854775808,"kind":"put"}`,
		"OKZone":                `{"key":"k","version":1,"kind":"put","ts":"2026-03-01T10:15:30.5+05:30","expiresAt":"2026-03-01T10:15:30Z"}`,
		"OKTimeOtherForm":       `{"key":"k","version":1,"kind":"put","ts":"2026-03-01T10:15:30.500+00:00"}`,
		"OKMinusZero":           `{"key":"k","version":1,"prevVersion":-0,"kind":"put"}`,
		"OKEmptyOptional":       `{"key":"k","version":1,"kind":"put","specRef":"","txnSize":0}`,
		"OKNULAfter":            valid + "\x00",
		"ErrVersionOverflow":    `{"key":"k","version":9223372036854775808,"kind":"put"}`,
		"ErrVersionFraction":    `{"key":"k","version":1.0,"kind":"put"}`,
		"ErrVersionExponent":    `{"key":"k","version":1e2,"kind":"put"}`,
		"ErrLeadingZero":        `{"key":"k","version":01,"kind":"put"}`,
		"ErrKeyNumber":          `{"key":1,"version":1,"kind":"put"}`,
		"ErrSemanticsString":    `{"key":"k","version":1,"kind":"put","semantics":"x"}`,
		"ErrHintsObject":        `{"key":"k","version":1,"kind":"put","semantics":{"consumerHints":{}}}`,
		"ErrElementArray":       `{"key":"k","version":1,"kind":"put","element":[]}`,
		"ErrTimeNumber":         `{"key":"k","version":1,"kind":"put","ts":1}`,
		"ErrTimeEscaped":        `{"key":"k","version":1,"kind":"put","ts":"2026-03-01T10:15:30\u002e5Z"}`,
		"ErrUnknownBadSyntax":   `{"key":"k","version":1,"kind":"put","x":[1,]}`,
		"ErrControlInString":    "{\"key\":\"k\x01\",\"version\":1,\"kind\":\"put\"}",
		"ErrBadEscape":          `{"key":"\x","version":1,"kind":"put"}`,
		"ErrShortUnicodeEscape": `{"key":"\u12","version":1,"kind":"put"}`,
		"ErrTrailingComma":      `{"key":"k","version":1,"kind":"put",}`,
		"ErrTruncated":          valid[:len(valid)-1],
		"ErrNull":               `null`,
		"ErrString":             `"x"`,
		"ErrSpaces":             " \n",
		"ErrTooDeep":            `{"key":"k","version":1,"kind":"put","after":` + deep(10000) + `}`,
	} {
		t.Run(name, func(t *testing.T) { checkUnmarshal(t, []byte(in)) })
	}
	t.Run("OKDeepest", func(t *testing.T) {
		checkUnmarshal(t, []byte(`{"key":"k","version":1,"kind":"put","after":`+deep(9999)+`}`))
	})
}

// deep returns n nested arrays.
func deep(n int) string {
	return string(bytes.Repeat([]byte("["), n)) + string(bytes.Repeat([]byte("]"), n))
}

// FuzzUnmarshal holds codec.UnmarshalEvent to encoding/json on any input, and
// Marshal to encoding/json on what it reads.
func FuzzUnmarshal(f *testing.F) {
	for _, e := range allSamples() {
		f.Add(mustMarshal(f, &e))
	}
	f.Add([]byte(`{"KEY":"k","Version":2,"kind":"put","semantics":{"consumerHints":["a",null]},"element":{"VALUE":[ 1 ]}}`))
	f.Add([]byte(`{"key":"\ud800\u00e9\xff","version":1,"kind":"put","ts":"2026-03-01T10:15:30.5+05:30"}`))
	f.Fuzz(func(t *testing.T, b []byte) { checkUnmarshal(t, b) })
}

// FuzzMarshal holds codec.MarshalEvent to encoding/json on events of any
// strings, values, numbers and times.
func FuzzMarshal(f *testing.F) {
	f.Add("k", "put", "set", []byte(`{"a":1}`), []byte(`null`), int64(7), int64(1772359200), int32(0), "add", "m", []byte(` [1, "<&>"] `), true)
	f.Add("\xff\u2028", "\x00", "\"", []byte("\"\xff\""), []byte{}, int64(-1), int64(-62135596800), int32(-30), "", "", []byte(nil), false)
	f.Fuzz(func(t *testing.T, key, kind, op string, before, after []byte, n, unix int64, zoneMinutes int32, elOp, member string, value []byte, withElement bool) {
		ts := time.Unix(unix, n%1e9).In(time.FixedZone("z", int(zoneMinutes)*60+int(n%60)))
		e := contract.Event{SchemaVersion: int(n), Key: key, Scope: op, Version: n, PrevVersion: -n, Kind: contract.Kind(kind), Op: contract.Op(op),
			Before: before, After: after, CreatedAt: ts, ExpiresAt: &ts, TS: ts.UTC(), Principal: member, RequestID: kind, RequestDigest: key,
			SpecRef: elOp, TxnID: member, TxnSize: int(n % 3), WriterEpoch: unix,
			Semantics: contract.Semantics{Purpose: elOp, Producer: key, ConsumerHints: []string{key, member}, TTLSeconds: n % 5}}
		if withElement {
			e.Element = &contract.Element{Op: elOp, Member: member, Value: value, State: kind, Deliveries: n % 4, DedupID: op, VisibleAt: &ts, PushedAt: nil, ExpiresAt: &ts,
				ReceiptNonce: key}
		}
		checkMarshal(t, &e)
	})
}

// BenchmarkEventMarshal and BenchmarkEventUnmarshal are figure 18a's
// event (a CAS of a small object), with encoding/json and with the codec.
func BenchmarkEventMarshal(b *testing.B) {
	e := benchEvent()
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := contract.EncodeJSON(&e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := codec.MarshalEvent(&e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkEventUnmarshal(b *testing.B) {
	e := benchEvent()
	rec := mustMarshal(b, &e)
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reflectUnmarshal(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := codec.UnmarshalEvent(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchEvent() contract.Event {
	return contract.Event{
		SchemaVersion: contract.SchemaVersion,
		Key:           "tenant/bench/project/peers-caef0f-3/cas18a-caef0f-k017",
		Scope:         "tenant/bench/project/peers-caef0f-3",
		Version:       1207,
		PrevVersion:   1206,
		Kind:          contract.KindPut,
		Op:            contract.OpCAS,
		Before:        json.RawMessage(`{"client":17,"seq":1205}`),
		After:         json.RawMessage(`{"client":17,"seq":1206}`),
		CreatedAt:     t0,
		Semantics:     contract.Semantics{Purpose: "other"},
		RequestID:     "01a20bb6-df24-79dd-a38b-5e9c401dfc1c",
		RequestDigest: "sha256:3f1b0c9a0e1d2c3b4a5f6e7d8c9b0a1f",
		Principal:     "dev",
		TS:            t1,
		WriterEpoch:   3,
	}
}

func TestUnmarshalRecordVerbatim(t *testing.T) {
	e := goldenPut()
	valid := string(mustMarshal(t, &e))
	body := valid[1 : len(valid)-1]
	for in, want := range map[string]bool{
		valid:                          true,
		" {\n" + body + "}\n":          true,
		`{"region":"eu",` + body + "}": false,
		valid + "{}":                   false,
		`{"KEY":"k",` + body + "}":     false,
		`{"specRef":"",` + body[len(`"schemaVersion":1,`):] + "}": false,
		`{"ts":"2026-03-01T10:15:30.500Z",` + body + "}":          false,
	} {
		if _, got, err := codec.UnmarshalRecord([]byte(in)); err != nil || got != want {
			t.Errorf("UnmarshalRecord(%s): verbatim %v, %v; want %v", in, got, err, want)
		}
	}
}
