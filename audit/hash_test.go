package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
)

// testKey is bytes 0..31 with id "k1".
func testKey() HMACKey {
	s := make([]byte, 32)
	for i := range s {
		s[i] = byte(i)
	}
	return HMACKey{ID: "k1", Secret: s}
}

// TestValueHashScheme1: scheme-1 hashes are what rows written before
// hash_scheme hold, so they must never change.
func TestValueHashScheme1(t *testing.T) {
	k := testKey()
	// Expected values computed independently (Python hmac over the
	// canonical bytes written out by hand).
	for _, tc := range []struct {
		name, raw, want string
	}{
		{"CanonicalizesOrderSpacingAndNumbers", `{ "b": [1.0, 2e1], "a": "x" }`, "1a38dc048f50c149bf16e5e878193a7fa22081427257ca2801b3e2f1a2ddd536"},
		{"AlreadyCanonical", `{"a":"x","b":[1,20]}`, "1a38dc048f50c149bf16e5e878193a7fa22081427257ca2801b3e2f1a2ddd536"},
		{"Null", `null`, "884ed757342dea179553ab752b618ea3727be91a8b5bc775d5b51aa17ed291c0"},
		{"AbsentIsNull", ``, "884ed757342dea179553ab752b618ea3727be91a8b5bc775d5b51aa17ed291c0"},
		{"EscapedUnicodeIsUTF8", `"\u00e9"`, "6d18243b749f85875d86ca17958b8ff44fbaaf87aeba8b7a9a171f8af78ab780"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Scheme1.ValueHash(k, "any/key", json.RawMessage(tc.raw)); got != tc.want {
				t.Fatalf("ValueHash(%s) = %s, want %s", tc.raw, got, tc.want)
			}
		})
	}
}

func TestValueHashDependsOnKey(t *testing.T) {
	k2 := testKey()
	k2.Secret = bytes.Repeat([]byte{7}, 32)
	if ValueHash(testKey(), "k", json.RawMessage(`1`)) == ValueHash(k2, "k", json.RawMessage(`1`)) {
		t.Fatal("two keys give the same hash")
	}
}

func TestCanonicalNonCanonicalValues(t *testing.T) {
	for _, tc := range []struct {
		scheme Scheme
		raw    string
	}{
		{Scheme1, `{"a":1,"a":2}`}, {Scheme1, `1e400`},
		{Scheme2, `{"a":1,"a":2}`}, {Scheme2, `{"\u0061":1,"a":2}`}, {Scheme2, `"\xff"`}, {Scheme2, `1e1000000000`},
		{Scheme2, `[1] 2`}, {Scheme2, `01`}, {Scheme2, `[1,]`}, {Scheme2, strings.Repeat("[", maxCanonicalDepth+2) + strings.Repeat("]", maxCanonicalDepth+2)},
	} {
		raw := strings.ReplaceAll(tc.raw, `\xff`, "\xff")
		c, ok := tc.scheme.Canonical(json.RawMessage(raw))
		if ok {
			t.Errorf("scheme %d: Canonical(%.40s) = %.40s, ok; want not ok", tc.scheme, raw, c)
		}
		if !bytes.HasPrefix(c, []byte(nonCanonicalPrefix)) || !bytes.HasSuffix(c, []byte(raw)) {
			t.Errorf("scheme %d: Canonical(%.40s) = %.40q; want the prefixed raw bytes", tc.scheme, raw, c)
		}
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1.5e3,"x",null,true]}`, `"\ud83d\ude00"`, `-0`, `[]`, `{"a":{"c":1,"b":2}}`,
		`9007199254740993`, `1e-400`, `-0.0e7`, `"\ud800"`, `{"\ud800":1,"\uffff":2,"\ud83d\ude00":3}`, `123.456e-30`, `0.000001`, `1e21`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		for _, scheme := range []Scheme{Scheme1, Scheme2} {
			c, ok := scheme.Canonical(json.RawMessage(s))
			if !ok {
				continue
			}
			// Canonical JSON is valid JSON, and a fixed point.
			if !json.Valid(c) {
				t.Fatalf("scheme %d: Canonical(%q) = %q is not valid JSON", scheme, s, c)
			}
			c2, ok := scheme.Canonical(c)
			if !ok || !bytes.Equal(c, c2) {
				t.Fatalf("scheme %d: Canonical is not idempotent: %q -> %q -> %q", scheme, s, c, c2)
			}
		}
		// Scheme 2 is injective: its form holds the same value, number
		// for number exactly.
		if c, ok := CanonicalExact([]byte(s)); ok && !bigExponent.MatchString(s) {
			if a, b := exactDecode(t, []byte(s)), exactDecode(t, c); !exactEqual(a, b) {
				t.Fatalf("CanonicalExact(%q) = %q holds another value", s, c)
			}
		}
	})
}

// bigExponent matches numbers whose exact value is too costly for big.Rat.
var bigExponent = regexp.MustCompile(`[eE][+-]?0*[0-9]{4,}`)

// exactDecode decodes b with numbers as json.Number.
func exactDecode(t *testing.T, b []byte) any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// exactEqual compares decoded JSON values, numbers by sign and exact
// decimal value.
func exactEqual(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		x, okx := new(big.Rat).SetString(string(a))
		y, oky := new(big.Rat).SetString(string(b))
		return okx && oky && x.Cmp(y) == 0 && strings.HasPrefix(string(a), "-") == strings.HasPrefix(string(b), "-")
	case []any:
		b, ok := b.([]any)
		return ok && slices.EqualFunc(a, b, exactEqual)
	case map[string]any:
		b, ok := b.(map[string]any)
		return ok && maps.EqualFunc(a, b, exactEqual)
	}
	return a == b
}

func TestParseKey(t *testing.T) {
	hexKey := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, in, id string
		err          string
	}{
		{"OKHexWithID", "k2026:" + hexKey, "k2026", ""},
		{"OKBareHexGetsFingerprint", hexKey, FingerprintID(bytes.Repeat([]byte{0xab}, 32)), ""},
		{"OKBase64", "b64:" + "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=", "b64", ""},
		{"ErrShort", "k:abcd", "", "at least 32"},
		{"ErrNotEncoded", "k:not a key!", "", "neither hex nor base64"},
		{"ErrEmpty", "", "", "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKey(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseKey: %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k.ID != tc.id || len(k.Secret) != 32 {
				t.Fatalf("ParseKey = id %q, %d bytes; want id %q, 32 bytes", k.ID, len(k.Secret), tc.id)
			}
		})
	}
}

func TestKeyringRejectsConflictingIDs(t *testing.T) {
	a := testKey()
	b := HMACKey{ID: a.ID, Secret: bytes.Repeat([]byte{1}, 32)}
	if _, err := NewKeyring(a, b); err == nil {
		t.Fatal("NewKeyring accepted one id with two keys")
	}
	kr, err := NewKeyring(a, HMACKey{ID: "old", Secret: b.Secret})
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := kr.Lookup("old"); !ok || !bytes.Equal(k.Secret, b.Secret) {
		t.Fatal("old key not found")
	}
}

func testEvent(version int64, before, after string) *contract.Event {
	ts := time.Date(2026, 5, 1, 12, 0, 0, 123456000, time.UTC)
	return &contract.Event{
		SchemaVersion: 1, Key: "tenant/acme/project/demo/flags/beta", Scope: "tenant/acme/project/demo",
		Version: version, PrevVersion: version - 1, Kind: contract.KindPut, Op: contract.OpCAS,
		Before: json.RawMessage(before), After: json.RawMessage(after),
		Semantics: contract.Semantics{Purpose: "feature_flag", Producer: "ops", ConsumerHints: []string{"ui"}},
		Principal: "alice", RequestID: "r-1", SpecRef: "adr-7", TS: ts, CreatedAt: ts,
	}
}

func TestEventRowChain(t *testing.T) {
	for _, s := range []Scheme{Scheme1, Scheme2} {
		t.Run(fmt.Sprintf("Scheme%d", s), func(t *testing.T) { testEventRowChain(t, s) })
	}
}

func testEventRowChain(t *testing.T, s Scheme) {
	k := testKey()
	r1 := EventRow(testEvent(1, `null`, `{"on":true}`), At{Partition: 3, Offset: 10}, k, s, "")
	r2 := EventRow(testEvent(2, `{"on":true}`, `{"on":false}`), At{Partition: 3, Offset: 11}, k, s, r1.ChainHash)

	t.Run("ScopeFromKey", func(t *testing.T) {
		if r1.Tenant != "acme" || r1.Project != "demo" {
			t.Fatalf("tenant %q project %q", r1.Tenant, r1.Project)
		}
	})
	t.Run("BeforeOfNextIsAfterOfPrevious", func(t *testing.T) {
		if r2.BeforeHash != r1.AfterHash {
			t.Fatalf("before_hash(2) %s != after_hash(1) %s", r2.BeforeHash, r1.AfterHash)
		}
	})
	t.Run("Deterministic", func(t *testing.T) {
		again := EventRow(testEvent(2, `{"on":true}`, `{"on":false}`), At{Partition: 3, Offset: 11}, k, s, r1.ChainHash)
		if again.ChainHash != r2.ChainHash {
			t.Fatal("the same event gives two chain hashes")
		}
	})
	t.Run("KafkaCoordinatesAreNotChained", func(t *testing.T) {
		moved := EventRow(testEvent(2, `{"on":true}`, `{"on":false}`), At{Partition: 5, Offset: 99}, k, s, r1.ChainHash)
		if moved.ChainHash != r2.ChainHash {
			t.Fatal("the chain hash depends on partition and offset")
		}
	})
	t.Run("EveryChainedFieldCounts", func(t *testing.T) {
		alter := []func(r *Row){
			func(r *Row) { r.TS = r.TS.Add(time.Microsecond) },
			func(r *Row) { r.Tenant = "x" },
			func(r *Row) { r.Project = "x" },
			func(r *Row) { r.Key += "x" },
			func(r *Row) { r.Version++ },
			func(r *Row) { r.PrevVersion++ },
			func(r *Row) { r.Kind = "delete" },
			func(r *Row) { r.Op = "set" },
			func(r *Row) { r.Purpose = "lock" },
			func(r *Row) { r.Producer = "x" },
			func(r *Row) { r.ConsumerHints = []string{"x"} },
			func(r *Row) { r.Principal = "mallory" },
			func(r *Row) { r.RequestID = "x" },
			func(r *Row) { r.SpecRef = "x" },
			func(r *Row) { r.TTLSeconds = 5 },
			func(r *Row) { r.ExpiresAtUS = 5 },
			func(r *Row) { r.BeforeHash = r1.BeforeHash },
			func(r *Row) { r.AfterHash = r1.AfterHash },
			func(r *Row) { r.HashKeyID = "k0" },
			func(r *Row) { r.HashScheme = 3 - r.HashScheme },
			func(r *Row) { r.PrevChainHash = "" },
			func(r *Row) { r.TxnID = "t-1" },
			func(r *Row) { r.TxnSize = 2 },
			func(r *Row) { r.Directive = "sync-onedrive" },
		}
		for i, f := range alter {
			r := r2
			r.ConsumerHints = slicesClone(r2.ConsumerHints)
			f(&r)
			if ChainHash(k, &r) == r2.ChainHash {
				t.Errorf("alteration %d does not change the chain hash", i)
			}
		}
	})
	t.Run("ChainInputIsCanonicalJSONOfColumns", func(t *testing.T) {
		in := string(ChainInput(&r1))
		want := `{"after_hash":"` + r1.AfterHash + `","before_hash":"` + r1.BeforeHash +
			`","consumer_hints":["ui"],"expires_at_us":0,"hash_key_id":"k1",` + map[Scheme]string{Scheme2: `"hash_scheme":2,`}[s] +
			`"key":"tenant/acme/project/demo/flags/beta",` +
			`"kind":"put","op":"cas","prev_chain_hash":"","prev_version":0,"principal":"alice","producer":"ops",` +
			`"project":"demo","purpose":"feature_flag","request_id":"r-1","spec_ref":"adr-7","tenant":"acme",` +
			`"ts_us":1777636800123456,"ttl_seconds":0,"version":1}`
		if in != want {
			t.Fatalf("chain input\n got %s\nwant %s", in, want)
		}
		// A transaction's row has txn_id and txn_size too; a single
		// write's row (above) has neither, as before transactions.
		e := testEvent(1, `null`, `{"on":true}`)
		e.TxnID, e.TxnSize = "t-1", 2
		r := EventRow(e, At{Partition: 3, Offset: 10}, k, s, "")
		in = string(ChainInput(&r))
		if want = strings.Replace(want, `"ttl_seconds":0,`, `"ttl_seconds":0,"txn_id":"t-1","txn_size":2,`, 1); in != want {
			t.Fatalf("chain input of a transaction's row\n got %s\nwant %s", in, want)
		}
		// A write that named a directive has it; one that named none
		// (above) hashes as every row before directives.
		e = testEvent(1, `null`, `{"on":true}`)
		e.Directive = "sync-onedrive"
		r = EventRow(e, At{Partition: 3, Offset: 10}, k, s, "")
		in = string(ChainInput(&r))
		want = strings.Replace(want, `"ttl_seconds":0,"txn_id":"t-1","txn_size":2,`, `"ttl_seconds":0,`, 1)
		if want = strings.Replace(want, `"consumer_hints":["ui"],`, `"consumer_hints":["ui"],"directive":"sync-onedrive",`, 1); in != want {
			t.Fatalf("chain input of a row with a directive\n got %s\nwant %s", in, want)
		}
	})
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func TestStatements(t *testing.T) {
	sql := "-- header\nCREATE TABLE a (\n  x String, -- a comment\n  y String DEFAULT '--not a comment'\n) ENGINE = Memory;\n\nCREATE VIEW v AS SELECT 1;\n"
	got := Statements(sql)
	if len(got) != 2 || !strings.Contains(got[0], "'--not a comment'") || strings.Contains(got[0], "-- a comment") || got[1] != "CREATE VIEW v AS SELECT 1" {
		t.Fatalf("Statements = %q", got)
	}
}

// FuzzChainInputFastPath: the direct RFC 8785 encoding of the chain input
// equals the definition (encoding/json, then jcs.Transform).
func FuzzChainInputFastPath(f *testing.F) {
	f.Add("tenant/a/project/p/k", "alice", "r-1", "ui", int64(1), int64(1777636800123456), int64(0))
	f.Add("k\"\\\b\f\n\r\t\x01\x1f\x7f", "<&>\u2028\u2029é😀", "\xff\xfe bad utf-8", "", int64(-5), int64(1<<53), int64(-(1 << 53)))
	f.Add("", "", "", "\x00", int64(1<<53+1), int64(0), int64(9))
	f.Fuzz(func(t *testing.T, key, principal, reqID, hint string, version, ts, ttl int64) {
		for _, scheme := range []Scheme{0, Scheme2} { // chainInput holds 0 for scheme 1
			in := &chainInput{TSUS: ts, Tenant: principal, Project: hint, Key: key, Version: version, PrevVersion: version - 1,
				Kind: "put", Op: reqID, Purpose: key, Producer: principal, ConsumerHints: []string{hint, key},
				Principal: principal, RequestID: reqID, SpecRef: hint, TTLSeconds: ttl, ExpiresAtUS: ts,
				BeforeHash: "ab", AfterHash: "cd", HashKeyID: "k", HashScheme: scheme, PrevChainHash: reqID,
				TxnID: hint, TxnSize: int32(ttl), Directive: hint}
			fast, ok := in.appendCanonical(nil)
			if !ok {
				continue
			}
			if slow := in.canonicalSlow(); !bytes.Equal(fast, slow) {
				t.Fatalf("scheme %d: fast path\n%q\ndefinition\n%q", scheme, fast, slow)
			}
		}
	})
}
