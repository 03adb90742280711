package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/eskv/eskv/contract"
)

// jsonString returns a JSON string literal of exactly n bytes.
func jsonString(n int) string {
	return `"` + strings.Repeat("x", n-2) + `"`
}

func TestCompactValue(t *testing.T) {
	t.Run("DefaultLimit", func(t *testing.T) {
		if contract.DefaultMaxValueBytes != 64*1024 {
			t.Errorf("contract.DefaultMaxValueBytes = %d, want 65536", contract.DefaultMaxValueBytes)
		}
	})

	tests := []struct {
		name  string
		in    string
		limit int
		want  string // compacted value when code is ""
		code  string
	}{
		{"OKObject", `{"a": 1, "b": [true, null]}`, contract.DefaultMaxValueBytes, `{"a":1,"b":[true,null]}`, ""},
		{"OKIndented", "{\n\t\"a\": {\n\t\t\"b\": \"c d\"\n\t}\n}\n", contract.DefaultMaxValueBytes, `{"a":{"b":"c d"}}`, ""},
		{"OKSurroundingSpace", "  [1, 2]  ", contract.DefaultMaxValueBytes, `[1,2]`, ""},
		{"OKString", `"hello world"`, contract.DefaultMaxValueBytes, `"hello world"`, ""},
		{"OKNumber", `-12.5e3`, contract.DefaultMaxValueBytes, `-12.5e3`, ""},
		{"OKBigNumberKeptExactly", `12345678901234567890123`, contract.DefaultMaxValueBytes, `12345678901234567890123`, ""},
		{"OKTrue", `true`, contract.DefaultMaxValueBytes, `true`, ""},
		{"OKLargeDouble", `[1.7e308, -1e-300, 0e5, "1e999999 in a string", {"k\\\"1e999999":2}]`, contract.DefaultMaxValueBytes, `[1.7e308,-1e-300,0e5,"1e999999 in a string",{"k\\\"1e999999":2}]`, ""},
		{"ErrNumberBeyondDouble", `{"a":[1e200000]}`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrNegativeNumberBeyondDouble", `-2e308`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrTooManyFractionDigits", `1e-20000`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"OKNull", `null`, contract.DefaultMaxValueBytes, `null`, ""},
		{"OKUnicode", `{"name": "Zoë ✓ 🎉"}`, contract.DefaultMaxValueBytes, `{"name":"Zoë ✓ 🎉"}`, ""},
		{"OKEscapesKept", `"a\u00e9\n<b>"`, contract.DefaultMaxValueBytes, `"a\u00e9\n<b>"`, ""},
		{"OKSurrogatePair", `"\ud83c\udf89"`, contract.DefaultMaxValueBytes, `"\ud83c\udf89"`, ""},
		{"OKSurrogatePairUppercase", `{"\uD83C\uDF89":1}`, contract.DefaultMaxValueBytes, `{"\uD83C\uDF89":1}`, ""},
		{"OKEscapedBackslashBeforeU0000", `"\\u0000"`, contract.DefaultMaxValueBytes, `"\\u0000"`, ""},
		{"OKControlEscape", `"\u0001\u001f"`, contract.DefaultMaxValueBytes, `"\u0001\u001f"`, ""},
		{"OKExactlyTheLimit", jsonString(contract.DefaultMaxValueBytes), contract.DefaultMaxValueBytes, jsonString(contract.DefaultMaxValueBytes), ""},
		{"OKLimitMeasuredAfterCompaction", "[" + strings.Repeat(" ", 100) + jsonString(10) + "]", 12, "[" + jsonString(10) + "]", ""},
		{"OKSmallLimit", `[1, 2, 3]`, 7, `[1,2,3]`, ""},

		{"ErrEmpty", ``, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrOnlySpace", " \n\t ", contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrTruncated", `{"a": 1`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrSingleQuotes", `{'a': 1}`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrBareWord", `hello`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrTrailingComma", `[1, 2,]`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrTwoValues", `{"a":1} {"b":2}`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrTrailingGarbage", `true x`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrNaN", `NaN`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrControlCharInString", "\"a\x01b\"", contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrInvalidUTF8", "\"a\xffb\"", contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrTruncatedUTF8", "\"\xe2\x9c\"", contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrNULEscape", `"a\u0000b"`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrNULEscapeInName", `{"\u0000":1}`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrNULEscapeAfterEscapedBackslash", `"\\\u0000"`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrLoneHighSurrogate", `"\ud800"`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrHighSurrogateAtEnd", `["x\ud83c"]`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrHighSurrogateThenOther", `"\ud83c\u0041"`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrHighSurrogateThenHigh", `"\ud83c\ud83c\udf89"`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrLoneLowSurrogate", `"\udf89"`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrReversedPair", `"\udf89\ud83c"`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrDuplicateMember", `{"a":1,"a":2}`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrDuplicateMemberNested", `[{"x":{"b":1,"c":2,"b":3}}]`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"ErrDuplicateMemberEscaped", `{"a":1,"\u0061":2}`, contract.DefaultMaxValueBytes, "", contract.EInvalid},
		{"OKSameNameInTwoObjects", `[{"a":1},{"a":{"a":2}}]`, contract.DefaultMaxValueBytes, `[{"a":1},{"a":{"a":2}}]`, ""},
		{"OKSameNameDifferentCase", `{"a":1,"A":2}`, contract.DefaultMaxValueBytes, `{"a":1,"A":2}`, ""},
		{"OKStringEqualToAName", `{"a":"a","b":"a"}`, contract.DefaultMaxValueBytes, `{"a":"a","b":"a"}`, ""},
		{"ErrOneOverTheLimit", jsonString(contract.DefaultMaxValueBytes + 1), contract.DefaultMaxValueBytes, "", contract.ETooLarge},
		{"ErrTooLargeAfterCompaction", "[" + jsonString(12) + "]", 13, "", contract.ETooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CompactValue(json.RawMessage(tt.in), tt.limit)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("CompactValue(%q): %v", tt.in, err)
				}
				if string(got) != tt.want {
					t.Errorf("CompactValue(%q) = %s, want %s", tt.in, got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("CompactValue(%q) = %s, want a %s error", tt.in, got, tt.code)
			}
			var e *contract.Error
			if !errors.As(err, &e) || e.Code != tt.code || e.Field != "value" {
				t.Errorf("error %v, want an *contract.Error with code %q and field %q", err, tt.code, "value")
			}
			if got != nil {
				t.Errorf("returned %q with the error", got)
			}
		})
	}
}

func FuzzCompactValue(f *testing.F) {
	for _, s := range []string{
		`{"a": 1, "b": [true, null]}`, `"x"`, `null`, `1e400`, `[`, ``, " ", `{"a":"\ud800"}`, `"\ud83c\udf89"`, `"\u0000"`, `"\\u0000"`,
		"\"\xff\"", `{"a":1} {"b":2}`, "[" + strings.Repeat(" ", 64) + "1]",
	} {
		f.Add([]byte(s), 64)
	}
	f.Fuzz(func(t *testing.T, raw []byte, limit int) {
		got, err := CompactValue(raw, limit)
		if err != nil {
			var e *contract.Error
			if !errors.As(err, &e) || (e.Code != contract.EInvalid && e.Code != contract.ETooLarge) || e.Field != "value" {
				t.Fatalf("CompactValue(%q): error %v, want an *contract.Error with code %q or %q and field %q", raw, err, contract.EInvalid, contract.ETooLarge, "value")
			}
			if e.Code == contract.ETooLarge && !json.Valid(raw) {
				t.Fatalf("CompactValue(%q): invalid JSON reported as too large", raw)
			}
			return
		}
		if len(got) > limit {
			t.Fatalf("CompactValue(%q, %d) = %d bytes, over the limit", raw, limit, len(got))
		}
		if !json.Valid(got) {
			t.Fatalf("CompactValue(%q) = %q, not valid JSON", raw, got)
		}
		again, err := CompactValue(got, limit)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("compacting %q again = %q, %v; want it unchanged", got, again, err)
		}
		in, out := decodeNumbers(t, raw), decodeNumbers(t, got)
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("CompactValue(%q) = %q changes the value: %v vs %v", raw, got, in, out)
		}
		if hasNUL(out) {
			t.Fatalf("CompactValue(%q) = %q holds a NUL, which Postgres cannot store", raw, got)
		}
	})
}

// decodeNumbers decodes one JSON value, keeping numbers as written.
func decodeNumbers(tb testing.TB, b []byte) any {
	tb.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		tb.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// hasNUL reports whether a decoded JSON value holds U+0000 in a string.
func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, 0)
	case []any:
		for _, e := range v {
			if hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	}
	return false
}

func TestDuplicateMember(t *testing.T) {
	many := func(n int, extra string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, `"m%d":%d,`, i, i)
		}
		return b.String() + extra + "}"
	}
	for _, tc := range []struct {
		name, in, dup string
	}{
		{"OKNone", `{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, ""},
		{"OKSpaced", "{ \"a\" : 1 ,\n \"b\" : \"a\" }", ""},
		{"OKEscapedQuoteInName", `{"a\"":1,"a":2}`, ""},
		{"OKBackslashAtNameEnd", `{"a\\":1,"a":2}`, ""},
		{"OKSiblingAfterNested", `{"a":{"b":1},"b":2}`, ""},
		{"OKManyMembers", many(100, `"x":1`), ""},
		{"ErrTopLevel", `{"a":1,"a":2}`, "a"},
		{"ErrSpaced", "{ \"a\" : 1 ,\n \"a\" : 2 }", "a"},
		{"ErrAfterNested", `{"a":{"a":1,"b":2},"a":3}`, "a"},
		{"ErrInArray", `[1,{"b":[{"c":1,"c":1}]}]`, "c"},
		{"ErrEscapedForm", `{"é":1,"\u00e9":2}`, "é"},
		{"ErrManyMembers", many(100, `"m77":1`), "m77"},
		{"ErrManyMembersNested", many(40, `"o":{"p":1,"p":2}`), "p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, dup := duplicateMember([]byte(tc.in))
			if dup != (tc.dup != "") || name != tc.dup {
				t.Fatalf("duplicateMember(%s) = %q, %v; want %q", tc.in, name, dup, tc.dup)
			}
		})
	}
}

// FuzzDuplicateMember: duplicateMember agrees with a token-level walk of
// encoding/json on every valid JSON text.
func FuzzDuplicateMember(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a\"":1,"a":2}`, `[{"a":{"a":1}},{"b":1,"\u0062":2}]`, `"x"`, `{ "a" : "b" , "b" : 1 }`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		_, got := duplicateMember(b)
		if want := tokenDuplicate(t, b); got != want {
			t.Fatalf("duplicateMember(%q) = %v; the token walk says %v", b, got, want)
		}
	})
}

// tokenDuplicate reports a duplicate member with encoding/json's tokens.
func tokenDuplicate(tb testing.TB, b []byte) bool {
	tb.Helper()
	type frame struct {
		names    map[string]bool // nil in an array
		wantName bool
	}
	d := json.NewDecoder(bytes.NewReader(b))
	var stack []*frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].names != nil {
			stack[n-1].wantName = true
		}
	}
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok {
		case json.Delim('{'):
			if top != nil {
				top.wantName = false
			}
			stack = append(stack, &frame{names: map[string]bool{}, wantName: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			if top != nil && top.names != nil && top.wantName {
				name := tok.(string)
				if top.names[name] {
					return true
				}
				top.names[name], top.wantName = true, false
				continue
			}
			valueDone()
		}
	}
}

// FuzzMembers: Members and Elements split valid JSON as encoding/json's
// decoder does: the same names, in order, with the same value bytes.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{` { "a" : [1, {"b":"}"}] , "c\"" : "x\\" ,"d":-1.5e3,"e":{}} `, `[1, "a", [], {"x":[2]}]`, `{}`, `[]`, `"s"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		var got []string
		_ = Members(b, func(name string, v []byte) error {
			got = append(got, name, string(v))
			return nil
		})
		_ = Elements(b, func(i int, v []byte) error {
			got = append(got, fmt.Sprint(i), string(v))
			return nil
		})
		if want := tokenItems(b); !reflect.DeepEqual(got, want) {
			t.Fatalf("Members/Elements(%q) = %q; encoding/json says %q", b, got, want)
		}
	})
}

// tokenItems lists the names and values (or indexes and elements) of the
// top-level object (array) b with encoding/json's decoder.
func tokenItems(b []byte) []string {
	d := json.NewDecoder(bytes.NewReader(b))
	tok, _ := d.Token()
	var items []string
	for i := 0; (tok == json.Delim('{') || tok == json.Delim('[')) && d.More(); i++ {
		name := fmt.Sprint(i)
		if tok == json.Delim('{') {
			t, _ := d.Token()
			name = t.(string)
		}
		var v json.RawMessage
		_ = d.Decode(&v)
		items = append(items, name, string(v))
	}
	return items
}

// FuzzScanValue: ScanValue accepts only what encoding/json accepts, ends
// the value where it does, and says a value holds no space only when
// json.Compact returns it unchanged; so compactJSON says true only of
// such values, and CompactValue's answers are json.Compact's.
func FuzzScanValue(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[true,null,false,-0.5e+3,"x\"\\\/\b\f\n\r\t\u00e9"]}`, `{"a": 1}`, `[1,]`, `{"a":1,}`, `01`, `1.`,
		`-`, `1e`, `"\x"`, `"\u12g4"`, `tru`, `nul`, "\"\xff\"", "\"a\x01\"", `{"a"1}`, `{1:2}`, `[]`, `{}`, `""`, `1 `, ` 1`, `[1][2]`,
		" { \"a\" : [ 1 , 2 ] } ", "[\t\n\r1]", strings.Repeat("[", 600) + strings.Repeat("]", 600)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, spaced, ok := ScanValue(b, 0)
		if !ok {
			return
		}
		if !json.Valid(b[:end]) {
			t.Fatalf("ScanValue(%q) accepts %q, which encoding/json refuses", b, b[:end])
		}
		if json.Valid(b) && len(bytes.TrimSpace(b[end:])) != 0 {
			t.Fatalf("ScanValue(%q) ends the value at %d, inside it", b, end)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, b[:end]); err != nil || bytes.Equal(buf.Bytes(), b[:end]) == spaced {
			t.Fatalf("ScanValue(%q): spaced %v; json.Compact gives %q, %v", b[:end], spaced, buf.Bytes(), err)
		}
	})
}

func TestCompactJSON(t *testing.T) {
	for _, s := range []string{`{"a":1,"b":[true,null,false,-0.5e+3,"x\"\\\/\b\f\n\r\t\u00e9"]}`, `[]`, `{}`, `""`, `0`, `-0`, `1E5`, "\"\xff\""} {
		if !compactJSON([]byte(s)) {
			t.Errorf("compactJSON(%q) = false", s)
		}
	}
	for _, s := range []string{`{"a": 1}`, `[1,]`, `01`, `1.`, `"\x"`, `tru`, "\"a\x01\"", `1 `, `[1][2]`, ``} {
		if compactJSON([]byte(s)) {
			t.Errorf("compactJSON(%q) = true", s)
		}
	}
}

// FuzzAppendCompact: AppendCompact answers as json.Compact does, bytes
// and error.
func FuzzAppendCompact(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a": 1}`, `[1,]`, `"\u12g4"`, ``, ` `, `1 `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := AppendCompact([]byte("x"), b)
		want := bytes.NewBufferString("x")
		werr := json.Compact(want, b)
		if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) || (err == nil && !bytes.Equal(got, want.Bytes())) {
			t.Fatalf("AppendCompact(%q) = %q, %v; json.Compact %q, %v", b, got, err, want.Bytes(), werr)
		}
	})
}
