package projection_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// trickyValue is a value whose indexed fields the Go derivation
// (projection's valueFields) must find exactly as kv_value_fields does;
// goPath says Go decides it (false: Apply falls back to kv_value_fields).
type trickyValue struct {
	name, value string
	goPath      bool
}

func trickyValues() []trickyValue {
	long := strings.Repeat("x", contract.MaxFieldStringBytes)
	longName := strings.Repeat("n", contract.MaxFieldNameBytes)
	euro := strings.Repeat("€", contract.MaxFieldStringBytes/3) // 255 bytes
	members := func(n int, value func(i int) string) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"f%03d":%s`, i, value(i))
		}
		b.WriteByte('}')
		return b.String()
	}
	digits := func(n int) string { return "1" + strings.Repeat("0", n-1) }
	deep := strings.Repeat("[", 300) + strings.Repeat("]", 300)
	return []trickyValue{
		{"Scalars", `{"s":"done","n":-1.50,"t":true,"f":false,"z":null}`, true},
		{"Empty", `{}`, true},
		{"EmptyName", `{"":1}`, true},
		{"Whitespace", " {\t\"a\" :\n1 ,\r\"b\" : [ 1 , { \"c\" : 2 } ] , \"c\":\"x\" } ", true},
		{"DuplicateLastWins", `{"a":1,"b":2,"a":"two"}`, true},
		{"DuplicateNestedHides", `{"a":1,"a":{"x":1}}`, true},
		{"DuplicateScalarAfterNested", `{"a":[1],"a":"s"}`, true},
		{"DuplicateTooLongHides", `{"a":"s","a":"` + long + `y"}`, true},
		{"DuplicateByEscape", `{"\u0061":1,"a":2,"\u0062":3}`, true},
		{"DuplicateThrice", `{"a":1,"a":2,"a":3}`, true},
		{"UnicodeEscapes", `{"\u00e9t\u00e9":"caf\u00e9","\ud83d\ude00":"\ud83d\ude00!","k\u20ac":"\u20AC"}`, true},
		{"ShortEscapes", `{"q":"\"\\\/\b\f\n\r\t","\n":"x"}`, true},
		{"RawUTF8", `{"ключ":"значение","😀":"日本"}`, true},
		{"ControlEscapes", `{"c":"\u0001\u001f\u007f"}`, true},
		{"Numbers", `{"a":1e3,"b":-0,"c":1.50,"d":1E+2,"e":-1.5e-3,"f":0.0,"g":-0.0e5,"h":123456789012345678901234567890.123}`, true},
		{"NumbersAtTheCap", `{"a":1e255,"b":1e256,"c":-1e254,"d":-1e255,"e":1e-254,"f":1e-255,"g":` + digits(256) + `,"h":` + digits(257) + `}`, true},
		{"NumberHugeExponent", `{"a":1e1000,"b":1}`, true},
		{"NameAtTheCap", `{"` + longName + `":1,"` + longName + `n":2}`, true},
		{"NameAtTheCapUTF8", `{"` + strings.Repeat("é", 128) + `":1,"` + strings.Repeat("é", 128) + `x":2}`, true},
		{"NameAtTheCapEscaped", `{"` + strings.Repeat(`\u00e9`, 128) + `":1,"` + strings.Repeat(`\u00e9`, 129) + `":2}`, true},
		{"StringAtTheCap", `{"ok":"` + long + `","long":"` + long + `y"}`, true},
		{"StringAtTheCapUTF8", `{"a":"` + euro + `a","b":"` + euro + `ab","c":"` + euro + `é"}`, true},
		{"StringAtTheCapEscaped", `{"a":"` + strings.Repeat(`\n`, 256) + `","b":"` + strings.Repeat(`\n`, 257) + `"}`, true},
		{"Nested", `{"o":{"a":1,"b":{"c":[1,"x",null]}},"a":[1,2,{"d":"e"}],"k":1}`, true},
		{"NestedNumbers", `{"o":[1,-2.5,0,1e3],"k":1}`, false},
		{"Fields64", members(64, func(i int) string { return fmt.Sprint(i) }), true},
		{"Fields65", members(65, func(i int) string { return fmt.Sprint(i) }), false},
		{"Fields65OneTooLong", members(65, func(i int) string {
			if i == 3 {
				return "1e300"
			}
			return fmt.Sprint(i)
		}), false},
		{"Fields70HalfNested", members(70, func(i int) string {
			if i%2 == 0 {
				return "[]"
			}
			return `"s"`
		}), true},
		{"Array", `[{"a":1}]`, true},
		{"String", `"a"`, true},
		{"Number", `7`, true},
		{"NumberExponent", `7e2`, false},
		{"True", `true`, true},
		{"Null", `null`, true},
		{"Deep", `{"a":` + deep + `,"b":1}`, false},
	}
}

// TestValueFieldsMatchPostgres checks, in real Postgres, that the rows
// the Go derivation gives a value (numbers cast and capped as writeFields
// does) are exactly those of kv_value_fields(value::jsonb), and that
// Apply stores them.
func TestValueFieldsMatchPostgres(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	values := trickyValues()
	for _, tt := range values {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.value)) {
				t.Fatalf("not JSON: %s", tt.value)
			}
			cands, ok := projection.ValueFields([]byte(tt.value))
			if ok != tt.goPath {
				t.Fatalf("Go decides %v: %v; want %v", abbrev(tt.value), ok, tt.goPath)
			}
			if !ok {
				return
			}
			got, want := goFieldRows(t, pool, cands), pgFieldRows(t, pool, tt.value)
			if !slices.Equal(got, want) {
				t.Errorf("fields of %s:\n Go %q\n pg %q", abbrev(tt.value), got, want)
			}
		})
	}
	t.Run("Apply", func(t *testing.T) {
		// Every value as a key's first version, then each key takes the
		// next key's value: creations and every kind of change.
		s := projection.New(pool)
		key := func(i int) string { return fmt.Sprintf("tenant/t/project/tricky/k%02d", i) }
		var all []string
		for _, v := range values {
			all = append(all, v.value)
		}
		declareFieldsOf(t, pool, "tenant/t/project/tricky", all...)
		var first, second []contract.Event
		for i := range values {
			first = append(first, put(t, key(i), 1, values[i].value))
			second = append(second, put(t, key(i), 2, values[(i+1)%len(values)].value))
		}
		mustApply(t, s, "kv.changes", batchOf(0, first...))
		checkFieldsDerived(t, pool)
		mustApply(t, s, "kv.changes", batchOf(int64(len(first)), second...))
		checkFieldsDerived(t, pool)
		// Then every key takes a value the Go reader decides, in a batch
		// without a fallback key (writeFields, not writeFieldsFallback),
		// over the rows kv_value_fields derived for some, and back.
		var third, fourth []contract.Event
		for i := range values {
			third = append(third, put(t, key(i), 3, fmt.Sprintf(`{"a":%d,"z":"s%d"}`, i, i)))
			fourth = append(fourth, put(t, key(i), 4, values[i].value))
		}
		mustApply(t, s, "kv.changes", batchOf(int64(2*len(first)), third...))
		checkFieldsDerived(t, pool)
		mustApply(t, s, "kv.changes", batchOf(int64(3*len(first)), fourth...))
		checkFieldsDerived(t, pool)
	})
}

// TestValueFieldsRandom compares the Go derivation with kv_value_fields
// over random objects built from the parts where they could differ:
// names equal but for escapes, duplicates, numbers written every way,
// strings and names about the caps, nesting.
func TestValueFieldsRandom(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	rnd := rand.New(rand.NewPCG(16, 6))
	pick := func(xs ...string) string { return xs[rnd.IntN(len(xs))] }
	// nearCap is a name or string of about 256 bytes once unescaped.
	nearCap := func() string {
		units := []struct {
			text  string
			bytes int
		}{{"n", 1}, {"é", 2}, {`\u00e9`, 2}, {"€", 3}, {`\u20ac`, 3}, {`\n`, 1}, {`\"`, 1}, {`\ud83d\ude00`, 4}}
		u := units[rnd.IntN(len(units))]
		return strings.Repeat(u.text, contract.MaxFieldStringBytes/u.bytes+rnd.IntN(3)-1) + pick("", "x")
	}
	name := func() string {
		if rnd.IntN(6) == 0 {
			return nearCap()
		}
		return pick("a", "b", `\u0061`, `\u0062`, "", "é", `\u00e9`, `\ud83d\ude00`, "😀", `a\/b`, "a/b", "B", "aa")
	}
	number := func() string {
		mant := pick("0", "1", "-0", "12", "-7", "1.50", "0.000", "123456789012345678901234567890", "9.99")
		switch rnd.IntN(3) {
		case 0:
			return mant
		case 1:
			return mant + pick("e", "E") + pick("", "+", "-") + fmt.Sprint(rnd.IntN(300))
		default:
			return mant + "e" + pick("", "-") + fmt.Sprint(250+rnd.IntN(10))
		}
	}
	var value func(depth int) string
	value = func(depth int) string {
		switch rnd.IntN(8) {
		case 0:
			return number()
		case 1:
			return `"` + nearCap() + `"`
		case 2:
			return `"` + pick("", "s", `caf\u00e9`, `\ud83d\ude00`, "日本") + `"`
		case 3:
			return pick("true", "false", "null")
		case 4:
			if depth < 3 {
				return "[" + pick("1", `"x"`, value(depth+1)) + "," + value(depth+1) + "]"
			}
			return "[]"
		case 5:
			if depth < 3 {
				return `{"` + name() + `":` + value(depth+1) + "}"
			}
			return "{}"
		default:
			return fmt.Sprint(rnd.IntN(100))
		}
	}
	decided := 0
	for range 1500 {
		var b strings.Builder
		b.WriteByte('{')
		for i := range rnd.IntN(8) + rnd.IntN(2)*rnd.IntN(70) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"` + name() + `":` + value(0))
		}
		b.WriteByte('}')
		v := b.String()
		cands, ok := projection.ValueFields([]byte(v))
		if !ok {
			continue
		}
		decided++
		goRows, gerr := goFieldRowsErr(pool, cands)
		pgRows, perr := pgFieldRowsErr(pool, v)
		if (gerr != nil) != (perr != nil) || !slices.Equal(goRows, pgRows) {
			t.Fatalf("fields of %s:\n Go %q, %v\n pg %q, %v", v, goRows, gerr, pgRows, perr)
		}
	}
	t.Logf("Go decided %d values of 1500", decided)
	if decided < 500 {
		t.Errorf("Go decided %d values of 1500; want most", decided)
	}
}

// TestValueFieldsRefused checks that what jsonb refuses, or could, is
// left to Postgres, and that a value it refuses fails the Apply as it did.
func TestValueFieldsRefused(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	tests := []struct {
		name, value string
		pgFails     bool
	}{
		{"EscapedNUL", `{"a":"x\u0000"}`, true},
		{"EscapedNULInName", `{"\u0000":1}`, true},
		{"EscapedNULNested", `{"a":["\u0000"]}`, true},
		{"LoneHighSurrogate", `{"a":"\ud83d"}`, true},
		{"LoneHighSurrogateThenText", `{"a":"\ud83dx"}`, true},
		{"HighSurrogateThenEscape", `{"a":"\ud83d\u0041"}`, true},
		{"LoneLowSurrogate", `{"a":"\ude00"}`, true},
		{"NotJSON", `{"a":01}`, true},
		{"TrailingComma", `{"a":1,}`, true},
		{"Truncated", `{"a":1`, true},
		{"BadLiteral", `{"a":tru}`, true},
		{"LiteralRunsOn", `{"a":truex}`, true},
		{"TrailingGarbage", `{"a":1}x`, true},
		{"NestedHugeExponent", `{"a":[1e1000000]}`, true},
		{"Empty", ``, true},
	}
	declareReady(t, pool, "tenant/t/project/refused", "a")
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := projection.ValueFields([]byte(tt.value)); ok {
				t.Errorf("Go decides %s; want it left to Postgres", tt.value)
			}
			e := put(t, fmt.Sprintf("tenant/t/project/refused/k%02d", i), 1, "{}")
			e.After = json.RawMessage(tt.value)
			err := s.Apply(context.Background(), "kv.changes", batchOf(0, e))
			if (err != nil) != tt.pgFails {
				t.Errorf("Apply: %v; want an error: %v", err, tt.pgFails)
			}
		})
	}
}

// FuzzValueFields checks valueFields against Postgres and encoding/json:
// whatever it decides is valid JSON, its rows are those of
// kv_value_fields (or both fail), and its candidates are the top-level
// scalar members (the last of equal names) within the caps, in byte
// order of their names.
func FuzzValueFields(f *testing.F) {
	pool := testenv.MustPostgres(f)
	for _, tt := range trickyValues() {
		f.Add(tt.value)
	}
	f.Add(`{"a":"\ud83d"}`)
	f.Add(`{"a":"\u0000","b":1}`)
	f.Add(`{"a":1e-100000}`)
	f.Fuzz(func(t *testing.T, v string) {
		cands, ok := projection.ValueFields([]byte(v))
		if !ok {
			return
		}
		if !json.Valid([]byte(v)) {
			t.Fatalf("Go decides %q, which is not JSON", v)
		}
		goRows, gerr := goFieldRowsErr(pool, cands)
		pgRows, perr := pgFieldRowsErr(pool, v)
		if (gerr != nil) != (perr != nil) || !slices.Equal(goRows, pgRows) {
			t.Fatalf("fields of %q:\n Go %q, %v\n pg %q, %v", v, goRows, gerr, pgRows, perr)
		}
		var members map[string]json.RawMessage
		if json.Unmarshal([]byte(v), &members) != nil {
			if len(cands) > 0 {
				t.Fatalf("%q is not an object, yet has fields %v", v, cands)
			}
			return
		}
		var want []projection.FieldCandidate
		for name, raw := range members {
			if len(name) > contract.MaxFieldNameBytes || !utf8.ValidString(name) {
				continue
			}
			c := projection.FieldCandidate{Field: name}
			switch raw[0] {
			case '"':
				var s string
				if json.Unmarshal(raw, &s) != nil || len(s) > contract.MaxFieldStringBytes {
					continue
				}
				c.Type, c.Str = "s", &s
			case 't', 'f':
				s := string(raw)
				c.Type, c.Str = "b", &s
			case 'n':
				s := ""
				c.Type, c.Str = "z", &s
			case '{', '[':
				continue
			default:
				n := string(raw)
				c.Type, c.Num = "n", &n
			}
			want = append(want, c)
		}
		slices.SortFunc(want, func(a, b projection.FieldCandidate) int { return strings.Compare(a.Field, b.Field) })
		if len(want) > projection.MaxFilterFields {
			t.Fatalf("Go decides %q with %d candidates", v, len(want))
		}
		if fmt.Sprint(candidateStrings(cands)) != fmt.Sprint(candidateStrings(want)) {
			t.Fatalf("fields of %q:\n got %q\nwant %q", v, candidateStrings(cands), candidateStrings(want))
		}
	})
}

func candidateStrings(cs []projection.FieldCandidate) []string {
	var out []string
	for _, c := range cs {
		s := c.Field + " " + c.Type
		if c.Num != nil {
			s += " num " + *c.Num
		}
		if c.Str != nil {
			s += " str " + *c.Str
		}
		out = append(out, s)
	}
	return out
}

// goFieldRows turns candidates into kv_fields rows as writeFields does:
// numbers cast to numeric, those written out in more than 256
// characters left out.
func goFieldRows(tb testing.TB, pool *pgxpool.Pool, cands []projection.FieldCandidate) []string {
	tb.Helper()
	rows, err := goFieldRowsErr(pool, cands)
	if err != nil {
		tb.Fatal(err)
	}
	return rows
}

func goFieldRowsErr(pool *pgxpool.Pool, cands []projection.FieldCandidate) ([]string, error) {
	var field, typ []string
	var num, str []*string
	for _, c := range cands {
		field, typ, num, str = append(field, c.Field), append(typ, c.Type), append(num, c.Num), append(str, c.Str)
	}
	return textRows(pool, `SELECT field, type::text, num::text, str FROM (
		SELECT field, type::"char" AS type, num::numeric AS num, str
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS f(field, type, num, str)
	) f WHERE num IS NULL OR length(num::text) <= 256 ORDER BY field COLLATE "C"`, field, typ, num, str)
}

// pgFieldRows returns kv_value_fields of value.
func pgFieldRows(tb testing.TB, pool *pgxpool.Pool, value string) []string {
	tb.Helper()
	rows, err := pgFieldRowsErr(pool, value)
	if err != nil {
		tb.Fatal(err)
	}
	return rows
}

func pgFieldRowsErr(pool *pgxpool.Pool, value string) ([]string, error) {
	return textRows(pool, `SELECT field, type::text, num::text, str FROM kv_value_fields($1::jsonb)
		ORDER BY field COLLATE "C"`, value)
}

func textRows(pool *pgxpool.Pool, sql string, args ...any) ([]string, error) {
	rows, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		return nil, err
	}
	var out []string
	var field, typ string
	var num, str *string
	if _, err := pgx.ForEachRow(rows, []any{&field, &typ, &num, &str}, func() error {
		out = append(out, fmt.Sprintf("%q %s %s %s", field, typ, deref(num), deref(str)))
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", *s)
}

func abbrev(v string) string {
	if len(v) > 80 {
		return v[:77] + "..."
	}
	return v
}

// TestApplyFieldsOverlappingProjectors: two projectors overlapping after
// a rebalance apply batches of the same keys at once, an older and a
// newer version of each, with other fields: neither fails (no deadlock,
// no duplicate kv_fields row) and kv_fields ends up holding the fields
// of the versions kv_entries holds, whichever committed first.
func TestApplyFieldsOverlappingProjectors(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	keys := []string{"tenant/t/project/p/ov-a", "tenant/t/project/p/ov-b", "tenant/t/project/p/ov-c"}
	declared := []string{"shared", "k0", "k1", "k2"}
	for v := range 62 {
		declared = append(declared, fmt.Sprintf("v%d", v))
	}
	declareReady(t, pool, "tenant/t/project/p", declared...)
	value := func(v int64) string {
		// Each version drops the previous version's own field and
		// changes a shared one, so the kv_fields rows of the older one
		// must go.
		return fmt.Sprintf(`{"v%d":%d,"shared":%d,"k%d":"x"}`, v, v, v, v%3)
	}
	for round := range 30 {
		v := int64(2*round + 1)
		var older, newer []contract.Event
		for _, k := range keys {
			older = append(older, put(t, k, v, value(v)))
			newer = append(newer, put(t, k, v+1, value(v+1)))
		}
		errs := make(chan error, 2)
		go func() { errs <- s.Apply(context.Background(), "kv.overlap", batchOf(v*10, newer...)) }()
		go func() {
			errs <- s.Apply(context.Background(), "kv.overlap", batchOf(v*10, append(older, newer[:round%3]...)...))
		}()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		for _, k := range keys {
			if st := mustState(t, s, k); st.Version != v+1 {
				t.Fatalf("round %d: %s at version %d; want %d", round, k, st.Version, v+1)
			}
		}
		checkFieldsDerived(t, pool)
	}
}
