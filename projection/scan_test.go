package projection_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/schemas"
	"github.com/eskv/eskv/testenv"
)

func filter(field string, op contract.FilterOp, value string) projection.Filter {
	return projection.Filter{Field: field, Op: op, Value: json.RawMessage(value)}
}

func expiring(tb testing.TB, key string, version int64, value string, at time.Time) contract.Event {
	tb.Helper()
	e := put(tb, key, version, value)
	e.ExpiresAt = &at
	return e
}

// mustScan returns the keys (without prefix trim) of one scan page, and
// whether it has a next.
func mustScan(tb testing.TB, s *projection.Store, prefix string, f projection.Filter, after string, limit int, now time.Time) ([]string, bool) {
	tb.Helper()
	entries, next, err := s.Scan(context.Background(), prefix, f, projection.Page{After: after, Limit: limit, MaxBytes: noBudget, Now: now})
	if err != nil {
		tb.Fatalf("scan %s %+v: %v", prefix, f, err)
	}
	keys := []string{}
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	return keys, next != ""
}

// fieldRow is one kv_fields row, num and str as text.
type fieldRow struct {
	Key, Field, Type string
	Num, Str         *string
	Expires          *time.Time
}

func (r fieldRow) String() string {
	d := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return fmt.Sprintf("%q", *p)
	}
	return fmt.Sprintf("%s.%s %s num=%s str=%s exp=%v", r.Key, r.Field, r.Type, d(r.Num), d(r.Str), r.Expires)
}

func fieldRows(tb testing.TB, pool *pgxpool.Pool, sql string, args ...any) []string {
	tb.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
	var out []string
	var r fieldRow
	if _, err := pgx.ForEachRow(rows, []any{&r.Key, &r.Field, &r.Type, &r.Num, &r.Str, &r.Expires}, func() error {
		out = append(out, r.String())
		return nil
	}); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
	return out
}

// storedFields are the kv_fields rows of keys under prefix.
func storedFields(tb testing.TB, pool *pgxpool.Pool, prefix string) []string {
	tb.Helper()
	return fieldRows(tb, pool, `SELECT key, field, type::text, num::text, str, expires_at FROM kv_fields
		WHERE key LIKE $1 || '%' ORDER BY key, field`, prefix)
}

// checkFieldsDerived fails unless kv_fields holds exactly what
// kv_value_fields derives from the live rows of kv_entries, for the
// fields declared ready in their scope.
func checkFieldsDerived(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	const ready = `EXISTS (SELECT FROM kv_field_indexes i WHERE i.scope = kv_key_scope(%s) AND i.field = %s AND i.backfill_after IS NULL)`
	derived := `SELECT e.key, f.field, f.type::text, f.num::text, f.str, e.expires_at
		FROM kv_entries e CROSS JOIN LATERAL kv_value_fields(e.value::jsonb) f WHERE e.live AND ` + fmt.Sprintf(ready, "e.key", "f.field")
	stored := `SELECT key, field, type::text, num::text, str, expires_at FROM kv_fields WHERE ` + fmt.Sprintf(ready, "key", "field")
	if extra := fieldRows(tb, pool, stored+` EXCEPT `+derived); len(extra) > 0 {
		tb.Errorf("kv_fields rows not derived from kv_entries: %v", extra)
	}
	if missing := fieldRows(tb, pool, derived+` EXCEPT `+stored); len(missing) > 0 {
		tb.Errorf("kv_fields lacks rows derived from kv_entries: %v", missing)
	}
}

func TestApplyIndexesFields(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	const p = "tenant/t/project/fields/"
	many := map[string]int{}
	for i := range projection.MaxFilterFields + 6 {
		many[fmt.Sprintf("f%03d", i)] = i
	}
	manyJSON, _ := json.Marshal(many)
	long := strings.Repeat("x", contract.MaxFieldStringBytes)
	longName := strings.Repeat("n", contract.MaxFieldNameBytes)
	exp := t0.Add(time.Hour)

	tests := []struct {
		name  string
		value string
		exp   *time.Time
		want  []string // field type num str, in field order
	}{
		{"ScalarsByType", `{"s":"done","n":-1.50,"t":true,"f":false,"z":null}`, nil,
			[]string{"f b NULL false", "n n -1.50 -", "s s NULL done", "t b NULL true", "z z NULL "}},
		{"NestedAndArraysSkipped", `{"o":{"a":1},"a":[1,2],"k":1}`, nil, []string{"k n 1 -"}},
		{"NonObjectValuesHaveNone", `[{"a":1}]`, nil, nil},
		{"StringValue", `"a"`, nil, nil},
		{"NullValue", `null`, nil, nil},
		{"NumberValue", `7`, nil, nil},
		{"StringsUnescaped", `{"s":"caf\u00e9 \"q\""}`, nil, []string{`s s NULL café "q"`}},
		{"ExponentWrittenOut", `{"n":1.5e3,"m":2E-2}`, nil, []string{"m n 0.02 -", "n n 1500 -"}},
		{"LastOfDuplicateFieldsWins", `{"a":1,"a":"two"}`, nil, []string{"a s NULL two"}},
		{"ExpiryCopied", `{"a":1}`, &exp, []string{"a n 1 -"}},
		{"CapStringBytes", `{"ok":"` + long + `","long":"` + long + `y"}`, nil, []string{"ok s NULL " + long}},
		{"CapStringBytesUTF8", `{"e":"` + strings.Repeat("é", contract.MaxFieldStringBytes/2) + `","f":"` + strings.Repeat("é", contract.MaxFieldStringBytes/2) + `x"}`, nil,
			[]string{"e s NULL " + strings.Repeat("é", contract.MaxFieldStringBytes/2)}},
		{"CapFieldName", `{"` + longName + `":1,"` + longName + `n":2}`, nil, []string{longName + " n 1 -"}},
		{"CapNumberChars", `{"a":1e255,"b":1e256,"c":-1e254,"d":1e-254,"e":1e-255}`, nil,
			[]string{"a n 1" + strings.Repeat("0", 255) + " -", "c n -1" + strings.Repeat("0", 254) + " -", "d n 0." + strings.Repeat("0", 253) + "1 -"}},
	}
	var batch []contract.Event
	for i, tt := range tests {
		e := put(t, fmt.Sprintf("%s%02d", p, i), 1, tt.value)
		e.ExpiresAt = tt.exp
		batch = append(batch, e)
	}
	capKey := p + "many"
	batch = append(batch, put(t, capKey, 1, string(manyJSON)))
	declared := []string{"s", "n", "t", "f", "z", "o", "a", "k", "m", "e", "ok", "long", longName, longName + "n", "b", "c", "d"}
	for name := range many {
		declared = append(declared, name)
	}
	declareReady(t, pool, strings.TrimSuffix(p, "/"), declared...)
	mustApply(t, s, "kv.changes", batchOf(0, batch...))

	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("%s%02d", p, i)
			got := storedFields(t, pool, key)
			var want []string
			for _, w := range tt.want {
				f := strings.SplitN(w, " ", 4)
				r := fieldRow{Key: key, Field: f[0], Type: f[1], Expires: tt.exp}
				if f[2] != "NULL" {
					r.Num = &f[2]
				}
				if f[1] != "n" {
					r.Str = &f[3]
				}
				want = append(want, r.String())
			}
			if !slices.Equal(got, want) {
				t.Errorf("fields of %s:\n got %q\nwant %q", tt.value, got, want)
			}
		})
	}
	t.Run("CapFieldsFirstByName", func(t *testing.T) {
		rows := storedFields(t, pool, capKey)
		if len(rows) != projection.MaxFilterFields || !strings.Contains(rows[0], ".f000 ") ||
			!strings.Contains(rows[len(rows)-1], fmt.Sprintf(".f%03d ", projection.MaxFilterFields-1)) {
			t.Errorf("%d fields indexed (%v ... %v); want the first %d by name", len(rows), rows[0], rows[len(rows)-1], projection.MaxFilterFields)
		}
	})
	checkFieldsDerived(t, pool)
}

func TestApplyReplacesFields(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	const k = "tenant/t/project/p/job"
	declareReady(t, pool, "tenant/t/project/p", "state", "n", "a", "b", "client", "seq", "other")
	fields := func() []string {
		var out []string
		for _, r := range storedFields(t, pool, k) {
			out = append(out, strings.TrimPrefix(r, k+"."))
		}
		return out
	}
	steps := []struct {
		name  string
		batch []contract.Event
		want  []string
	}{
		{"PutIndexes", []contract.Event{put(t, k, 1, `{"state":"new","n":1}`)},
			[]string{`n n num="1" str=NULL exp=<nil>`, `state s num=NULL str="new" exp=<nil>`}},
		{"PutReplaces", []contract.Event{put(t, k, 2, `{"state":"running"}`)},
			[]string{`state s num=NULL str="running" exp=<nil>`}},
		{"OlderEventKeepsNewerFields", []contract.Event{put(t, k, 1, `{"state":"new","n":1}`)},
			[]string{`state s num=NULL str="running" exp=<nil>`}},
		{"ReplayKeepsFields", []contract.Event{put(t, k, 2, `{"state":"running"}`)},
			[]string{`state s num=NULL str="running" exp=<nil>`}},
		{"DeleteRemoves", []contract.Event{event(t, contract.KindDelete, k, 3, "")}, nil},
		{"RecreateIndexes", []contract.Event{put(t, k, 4, `{"state":"again"}`)},
			[]string{`state s num=NULL str="again" exp=<nil>`}},
		{"ExpireRemoves", []contract.Event{event(t, contract.KindExpire, k, 5, "")}, nil},
		{"PutAndDeleteInOneBatch", []contract.Event{put(t, k, 6, `{"a":1}`), event(t, contract.KindDelete, k, 7, "")}, nil},
		{"DeleteAndPutInOneBatch", []contract.Event{event(t, contract.KindDelete, k, 8, ""), put(t, k, 9, `{"b":true}`)},
			[]string{"b b num=NULL str=\"true\" exp=<nil>"}},
		{"NonObjectRemoves", []contract.Event{put(t, k, 10, `[1]`)}, nil},
		{"PutIndexesAgain", []contract.Event{put(t, k, 11, `{"client":1,"seq":1}`)},
			[]string{`client n num="1" str=NULL exp=<nil>`, `seq n num="1" str=NULL exp=<nil>`}},
		{"ChangedFieldOnlyRewritten", []contract.Event{put(t, k, 12, `{"client":1,"seq":2}`)},
			[]string{`client n num="1" str=NULL exp=<nil>`, `seq n num="2" str=NULL exp=<nil>`}},
		{"TypeChangeFollows", []contract.Event{put(t, k, 13, `{"client":"one","seq":2}`)},
			[]string{`client s num=NULL str="one" exp=<nil>`, `seq n num="2" str=NULL exp=<nil>`}},
		{"NumberAsWrittenFollows", []contract.Event{put(t, k, 14, `{"client":"one","seq":2.0}`)},
			[]string{`client s num=NULL str="one" exp=<nil>`, `seq n num="2.0" str=NULL exp=<nil>`}},
		{"ExpiryFollows", []contract.Event{expiring(t, k, 15, `{"client":"one","seq":2.0}`, t0.Add(time.Hour))},
			[]string{`client s num=NULL str="one" exp=` + t0.Add(time.Hour).String(), `seq n num="2.0" str=NULL exp=` + t0.Add(time.Hour).String()}},
		{"FieldsAddedAndDropped", []contract.Event{put(t, k, 16, `{"client":"one","other":3}`)},
			[]string{`client s num=NULL str="one" exp=<nil>`, `other n num="3" str=NULL exp=<nil>`}},
		{"ReplayWritesNothing", []contract.Event{put(t, k, 16, `{"client":"one","other":3}`)},
			[]string{`client s num=NULL str="one" exp=<nil>`, `other n num="3" str=NULL exp=<nil>`}},
	}
	// The fields of the steps whose rows must not be rewritten.
	keep := map[string][]string{
		"ChangedFieldOnlyRewritten": {"client"},
		"TypeChangeFollows":         {"seq"},
		"NumberAsWrittenFollows":    {"client"},
		"ReplayWritesNothing":       {"client", "other"},
	}
	var offset int64
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			kept := make([]string, len(keep[st.name]))
			for i, f := range keep[st.name] {
				kept[i] = fieldRowVersion(t, pool, k, f)
			}
			mustApply(t, s, "kv.changes", batchOf(offset, st.batch...))
			offset += int64(len(st.batch))
			if got := fields(); !slices.Equal(got, st.want) {
				t.Errorf("fields %q, want %q", got, st.want)
			}
			for i, f := range keep[st.name] {
				if v := fieldRowVersion(t, pool, k, f); v != kept[i] {
					t.Errorf("row of unchanged field %s rewritten: %s, was %s", f, v, kept[i])
				}
			}
		})
	}
	checkFieldsDerived(t, pool)
}

// fieldRowVersion returns where the row of key's field is stored and
// which transaction wrote it: both change when the row is rewritten.
func fieldRowVersion(tb testing.TB, pool *pgxpool.Pool, key, field string) string {
	tb.Helper()
	var v string
	if err := pool.QueryRow(context.Background(), `SELECT ctid::text || ' ' || xmin::text FROM kv_fields WHERE key = $1 AND field = $2`,
		key, field).Scan(&v); err != nil {
		tb.Fatalf("row of %s.%s: %v", key, field, err)
	}
	return v
}

func TestScan(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	now := t0.Add(24 * time.Hour)
	const p = "tenant/t/project/p/"
	mustApply(t, s, "kv.changes", batchOf(0,
		put(t, p+"a", 1, `{"state":"done","n":5,"ok":true,"z":null,"ts":"2026-03-05T10:00:00Z"}`),
		put(t, p+"b", 1, `{"state":"running","n":7.5,"ok":false,"ts":"2026-03-05T10:04:59Z"}`),
		put(t, p+"c", 1, `{"state":"failed","n":-2,"ts":"2026-03-05T10:06:00Z"}`),
		put(t, p+"d", 1, `{"state":"Running","n":"5","ok":"true"}`),
		put(t, p+"e", 1, `{"state":"é","n":1e1,"z":0}`),
		put(t, p+"f", 1, `{"n":9007199254740993,"big":-0}`),
		put(t, p+"g", 1, `["state","done"]`),
		put(t, p+"h", 1, `"done"`),
		put(t, p+"i", 1, `{"nested":{"state":"done"}}`),
		put(t, p+"j", 1, `{"state":"done"}`),
		event(t, contract.KindDelete, p+"j", 2, ""),
		expiring(t, p+"k", 1, `{"state":"done"}`, now),
		expiring(t, p+"l", 1, `{"state":"done"}`, now.Add(time.Second)),
		put(t, "tenant/t/project/p-x/a", 1, `{"state":"done"}`),
		put(t, "tenant/t/project/pp/a", 1, `{"state":"done"}`),
		put(t, "tenant/t/project/q/a", 1, `{"state":"done"}`),
	))
	tests := []struct {
		name   string
		prefix string
		f      projection.Filter
		want   string // keys without p, space separated
	}{
		{"StringEq", p, filter("state", contract.FilterEq, `"done"`), "a l"},
		{"StringEqIsCaseSensitive", p, filter("state", contract.FilterEq, `"running"`), "b"},
		{"StringNe", p, filter("state", contract.FilterNe, `"done"`), "b c d e"},
		{"StringLtIsBytewise", p, filter("state", contract.FilterLt, `"a"`), "d"},
		{"StringGtNonASCII", p, filter("state", contract.FilterGt, `"z"`), "e"},
		{"StringLte", p, filter("state", contract.FilterLte, `"failed"`), "a c d l"},
		{"StringGte", p, filter("state", contract.FilterGte, `"running"`), "b e"},
		{"TimestampLt", p, filter("ts", contract.FilterLt, `"2026-03-05T10:05:00Z"`), "a b"},
		{"TimestampGt", p, filter("ts", contract.FilterGt, `"2026-03-05T10:05:00Z"`), "c"},
		{"NumberLt", p, filter("n", contract.FilterLt, `5`), "c"},
		{"NumberLte", p, filter("n", contract.FilterLte, `5.0`), "a c"},
		{"NumberGtAcrossForms", p, filter("n", contract.FilterGt, `7.4999`), "b e f"},
		{"NumberGte", p, filter("n", contract.FilterGte, `1e1`), "e f"},
		{"NumberEqExponent", p, filter("n", contract.FilterEq, `10`), "e"},
		{"NumberEqIsExact", p, filter("n", contract.FilterEq, `9007199254740992`), ""},
		{"NumberEqBigInt", p, filter("n", contract.FilterEq, `9007199254740993`), "f"},
		{"NumberNe", p, filter("n", contract.FilterNe, `5`), "b c e f"},
		{"NegativeZeroIsZero", p, filter("big", contract.FilterEq, `0`), "f"},
		{"NumberDoesNotMatchString", p, filter("n", contract.FilterEq, `"5"`), "d"},
		{"BoolEq", p, filter("ok", contract.FilterEq, `true`), "a"},
		{"BoolFalse", p, filter("ok", contract.FilterEq, `false`), "b"},
		{"BoolDoesNotMatchString", p, filter("ok", contract.FilterEq, `"true"`), "d"},
		{"NullEq", p, filter("z", contract.FilterEq, `null`), "a"},
		{"MissingFieldNeverMatches", p, filter("absent", contract.FilterNe, `"x"`), ""},
		{"NestedFieldsAreNotFields", p, filter("nested", contract.FilterEq, `null`), ""},
		{"NarrowPrefix", p + "b", filter("state", contract.FilterNe, `"zzz"`), "b"},
		{"PrefixIsAByteRange", "tenant/t/project/p", filter("state", contract.FilterEq, `"done"`), "../p-x/a a l ../pp/a"},
		{"OtherScope", "tenant/t/project/q/", filter("state", contract.FilterEq, `"done"`), "../q/a"},
		{"NoMatch", p + "zz", filter("state", contract.FilterEq, `"done"`), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, truncated := mustScan(t, s, tt.prefix, tt.f, "", 100, now)
			got := []string{}
			for _, k := range keys {
				if r, ok := strings.CutPrefix(k, p); ok {
					got = append(got, r)
				} else {
					got = append(got, "../"+strings.TrimPrefix(k, "tenant/t/project/"))
				}
			}
			if strings.Join(got, " ") != tt.want || truncated {
				t.Errorf("got %q truncated=%v, want %q", got, truncated, tt.want)
			}
		})
	}

	t.Run("EntriesAreComplete", func(t *testing.T) {
		entries, _, err := s.Scan(context.Background(), p, filter("state", contract.FilterEq, `"failed"`), projection.Page{Limit: 10, MaxBytes: noBudget, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		e := put(t, p+"c", 1, `{"state":"failed","n":-2,"ts":"2026-03-05T10:06:00Z"}`)
		if len(entries) != 1 || entries[0].Key != e.Key || string(entries[0].Value) != string(e.After) || entries[0].Version != 1 ||
			entries[0].Semantics.Purpose != "checkpoint" || !entries[0].UpdatedAt.Equal(e.TS) {
			t.Errorf("got %+v, want %+v", entries, e.Entry())
		}
	})
	t.Run("ExpiredAtNowIsGone", func(t *testing.T) {
		keys, _ := mustScan(t, s, p, filter("state", contract.FilterEq, `"done"`), "", 10, now.Add(-time.Nanosecond))
		if !slices.Equal(keys, []string{p + "a", p + "k", p + "l"}) {
			t.Errorf("just before k expires: %v", keys)
		}
	})
	t.Run("PagesWithCursor", func(t *testing.T) {
		f := filter("state", contract.FilterNe, `"zzz"`)
		var all []string
		after := ""
		for range 10 {
			keys, truncated := mustScan(t, s, p, f, after, 2, now)
			all = append(all, keys...)
			if !truncated {
				break
			}
			if len(keys) != 2 {
				t.Fatalf("truncated page of %d", len(keys))
			}
			after = keys[len(keys)-1]
		}
		want := []string{p + "a", p + "b", p + "c", p + "d", p + "e", p + "l"}
		if !slices.Equal(all, want) {
			t.Errorf("pages %v, want %v", all, want)
		}
	})
	t.Run("ExactLimitNotTruncated", func(t *testing.T) {
		if keys, truncated := mustScan(t, s, p, filter("state", contract.FilterEq, `"done"`), "", 2, now); len(keys) != 2 || truncated {
			t.Errorf("got %v truncated=%v", keys, truncated)
		}
	})
	t.Run("NonASCIIPrefixMatchesNothing", func(t *testing.T) {
		if keys, _ := mustScan(t, s, p+"é", filter("state", contract.FilterNe, `"x"`), "", 10, now); len(keys) != 0 {
			t.Errorf("got %v", keys)
		}
	})
	for _, tt := range []struct {
		name, field string
		f           projection.Filter
		limit       int
	}{
		{"ErrNonPositiveLimit", "limit", filter("state", contract.FilterEq, `"x"`), 0},
		{"ErrEmptyField", "field", filter("", contract.FilterEq, `"x"`), 10},
		{"ErrFieldTooLong", "field", filter(strings.Repeat("f", contract.MaxFieldNameBytes+1), contract.FilterEq, `"x"`), 10},
		{"ErrFieldNUL", "field", filter("a\x00", contract.FilterEq, `"x"`), 10},
		{"ErrUnknownOp", "op", filter("state", "like", `"x"`), 10},
		{"ErrBoolLt", "op", filter("ok", contract.FilterLt, `true`), 10},
		{"ErrNullNe", "op", filter("z", contract.FilterNe, `null`), 10},
		{"ErrObject", "value", filter("state", contract.FilterEq, `{"a":1}`), 10},
		{"ErrArray", "value", filter("state", contract.FilterEq, `[1]`), 10},
		{"ErrNotJSON", "value", filter("state", contract.FilterEq, `done`), 10},
		{"ErrTwoLiterals", "value", filter("state", contract.FilterEq, `1 2`), 10},
		{"ErrEmpty", "value", filter("state", contract.FilterEq, ``), 10},
		{"ErrStringTooLong", "value", filter("state", contract.FilterLt, `"`+strings.Repeat("s", contract.MaxFieldStringBytes+1)+`"`), 10},
		{"ErrStringNUL", "value", filter("state", contract.FilterEq, `"a\u0000"`), 10},
		{"ErrNumberTooLong", "value", filter("n", contract.FilterEq, strings.Repeat("9", projection.MaxFieldNumberChars+1)), 10},
		{"ErrHugeExponent", "value", filter("n", contract.FilterLt, `1e200000`), 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := s.Scan(context.Background(), p, tt.f, projection.Page{Limit: tt.limit, MaxBytes: noBudget, Now: now})
			var e *contract.Error
			if !errors.As(err, &e) || e.Code != contract.EInvalid || e.Field != tt.field {
				t.Errorf("error %v, want invalid on field %q", err, tt.field)
			}
		})
	}
	t.Run("OKLargeExponent", func(t *testing.T) {
		if keys, _ := mustScan(t, s, p, filter("n", contract.FilterLt, `1e1000`), "", 100, now); len(keys) != 5 {
			t.Errorf("n lt 1e1000: %v, want every numeric n", keys)
		}
	})
}

// TestScanAgreesWithBruteForce checks both ways a scan goes (key first
// when matches are dense, by value when they are sparse) against the
// filter evaluated in Go, over enough entries that the key-first probe
// is not the whole prefix.
func TestScanAgreesWithBruteForce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("loads 4,000 entries")
	}
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	now := t0.Add(time.Hour)
	const p = "tenant/t/project/brute/"
	declareReady(t, pool, "tenant/t/project/brute", "rare", "state", "n", "ts", "late", "odd")
	rng := rand.New(rand.NewPCG(7, 7))
	values := map[string]map[string]any{}
	var batch []contract.Event
	var keys []string
	states := []string{"new", "running", "done", "failed"}
	for i := range 4000 {
		key := fmt.Sprintf("%sk%05d", p, i)
		v := map[string]any{}
		// rare: about 1 in 200; dense: 1 in 2; clustered: only the last 300 keys.
		if rng.IntN(200) == 0 {
			v["rare"] = json.Number(fmt.Sprint(rng.IntN(10)))
		}
		v["state"] = states[rng.IntN(len(states))]
		v["n"] = json.Number(fmt.Sprintf("%d.%d", rng.IntN(100)-50, rng.IntN(10)))
		v["ts"] = t0.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		if i >= 3700 {
			v["late"] = i%2 == 0
		}
		if rng.IntN(10) == 0 {
			v["n"] = "not a number"
		}
		b, _ := json.Marshal(v)
		e := put(t, key, 1, string(b))
		if rng.IntN(20) == 0 {
			at := now.Add(time.Duration(rng.IntN(3)-1) * time.Minute) // expired, expiring at now, or later
			e.ExpiresAt = &at
		}
		batch = append(batch, e)
		if e.ExpiresAt == nil || e.ExpiresAt.After(now) {
			values[key] = v
			keys = append(keys, key)
		}
		if len(batch) == 500 {
			mustApply(t, s, "kv.changes", batchOf(int64(i), batch...))
			batch = batch[:0]
		}
	}
	if _, err := pool.Exec(context.Background(), `ANALYZE kv_fields`); err != nil {
		t.Fatal(err)
	}

	matches := func(f projection.Filter, v map[string]any) bool {
		fv, ok := v[f.Field]
		if !ok {
			return false
		}
		var want any
		d := json.NewDecoder(bytes.NewReader(f.Value))
		d.UseNumber()
		if err := d.Decode(&want); err != nil {
			t.Fatal(err)
		}
		var c int
		switch w := want.(type) {
		case json.Number:
			n, ok := fv.(json.Number)
			if !ok {
				return false
			}
			a, _ := new(big.Rat).SetString(string(n))
			b, _ := new(big.Rat).SetString(string(w))
			c = a.Cmp(b)
		case string:
			s, ok := fv.(string)
			if !ok {
				return false
			}
			c = strings.Compare(s, w)
		case bool:
			return fv == w
		}
		switch f.Op {
		case contract.FilterEq:
			return c == 0
		case contract.FilterNe:
			return c != 0
		case contract.FilterLt:
			return c < 0
		case contract.FilterLte:
			return c <= 0
		case contract.FilterGt:
			return c > 0
		default:
			return c >= 0
		}
	}
	for _, f := range []projection.Filter{
		filter("state", contract.FilterEq, `"done"`),
		filter("state", contract.FilterNe, `"done"`),
		filter("state", contract.FilterLt, `"new"`),
		filter("n", contract.FilterLt, `0`),
		filter("n", contract.FilterGte, `49`),
		filter("n", contract.FilterEq, `-3.5`),
		filter("rare", contract.FilterGte, `0`),
		filter("rare", contract.FilterEq, `3`),
		filter("ts", contract.FilterGt, t0.Add(3950*time.Second).Format(`"2006-01-02T15:04:05Z07:00"`)),
		filter("ts", contract.FilterLt, t0.Add(40*time.Second).Format(`"2006-01-02T15:04:05Z07:00"`)),
		filter("late", contract.FilterEq, `true`),
		filter("missing", contract.FilterEq, `1`),
	} {
		for _, limit := range []int{1, 7, 100, 1000} {
			t.Run(fmt.Sprintf("%s_%s_%s_limit%d", f.Field, f.Op, f.Value, limit), func(t *testing.T) {
				var want []string
				for _, k := range keys {
					if matches(f, values[k]) {
						want = append(want, k)
					}
				}
				var got []string
				after := ""
				for page := 0; ; page++ {
					entries, next, err := s.Scan(context.Background(), p, f, projection.Page{After: after, Limit: limit, MaxBytes: noBudget, Now: now})
					if err != nil {
						t.Fatalf("scan page %d: %v", page, err)
					}
					for _, e := range entries {
						got = append(got, e.Key)
					}
					if next == "" {
						break
					}
					// A field not declared ("missing") reads a budget of
					// values per page: its pages may come short.
					if (len(entries) != limit && f.Field != "missing") || page > 5000 {
						t.Fatalf("page %d: %d keys, truncated", page, len(entries))
					}
					after = next
				}
				if !slices.Equal(got, want) {
					t.Errorf("scan found %d keys, Go %d; first of each: %v / %v", len(got), len(want), first(got, 3), first(want, 3))
				}
			})
		}
	}
	checkFieldsDerived(t, pool)
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// TestScanUsesIndexes reads the plans of dense and sparse scans on a
// table large enough that Postgres would rather read it whole if no index
// served the query: the probe reads kv_fields' primary key (field, key),
// and the value-first part (kv_fields_str_scoped or kv_fields_num_scoped)
// runs only when the probe did not find the page.
func TestScanUsesIndexes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("loads 20,000 entries")
	}
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	const p = "tenant/t/project/plan/"
	declareReady(t, pool, "tenant/t/project/plan", "state", "attempt", "seq", "updated_at")
	var batch []contract.Event
	for i := range 20000 {
		state := "done"
		if i%1000 == 0 {
			state = "failed"
		}
		batch = append(batch, put(t, fmt.Sprintf("%sjobs/%06d", p, i), 1, fmt.Sprintf(`{"state":%q,"attempt":%d,"seq":%d,"updated_at":%q}`,
			state, i%10, i, t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339))))
		if len(batch) == 1000 {
			mustApply(t, s, "kv.changes", batchOf(int64(i), batch...))
			batch = batch[:0]
		}
	}
	if _, err := pool.Exec(context.Background(), `VACUUM ANALYZE kv_fields, kv_entries`); err != nil {
		t.Fatal(err)
	}
	ts := func(sec int) string { return `"` + t0.Add(time.Duration(sec)*time.Second).Format(time.RFC3339) + `"` }
	for _, tt := range []struct {
		name  string
		f     projection.Filter
		index string // of the value-first part
		runs  bool   // whether the value-first part runs
	}{
		{"OKDenseFoundByProbe", filter("attempt", contract.FilterLt, `5`), "kv_fields_num_scoped", false},
		{"OKOneInTenFoundByProbe", filter("attempt", contract.FilterEq, `9`), "kv_fields_num_scoped", false},
		{"OKFirstKeysFoundByProbe", filter("updated_at", contract.FilterLt, ts(150)), "kv_fields_str_scoped", false},
		{"OKSparseStringEqByValue", filter("state", contract.FilterEq, `"failed"`), "kv_fields_str_scoped", true},
		{"OKLastKeysByValue", filter("updated_at", contract.FilterGt, ts(19900)), "kv_fields_str_scoped", true},
		{"OKSparseNumberByValue", filter("seq", contract.FilterGte, `19950`), "kv_fields_num_scoped", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan := projection.ExplainScan(t, pool, p, tt.f, "", 100, t0)
			if readsWhole(plan) {
				t.Errorf("plan reads a table whole:\n%s", plan)
			}
			if l := planLine(plan, "kv_fields_pkey"); !strings.Contains(l, "Index Only Scan") || strings.Contains(l, "never executed") {
				t.Errorf("plan does not probe kv_fields_pkey:\n%s", plan)
			}
			if !strings.Contains(plan, "kv_entries_pkey") && !strings.Contains(plan, "kv_entries_live_key") {
				t.Errorf("plan does not fetch the page's entries by key:\n%s", plan)
			}
			l := planLine(plan, tt.index)
			if l == "" || strings.Contains(l, "never executed") == tt.runs {
				t.Errorf("value-first part: want %s, run %v:\n%s", tt.index, tt.runs, plan)
			}
		})
	}
}

// TestScanReadsOnlyItsProject: with many projects holding matches of a
// field, a one-project scan that goes by value reads the scoped index
// with the project in its index condition (migration 00016), not every
// project's matches filtered by the prefix afterwards (figure 23c). Each
// project's last 25 of 2,500 keys match, so the probe finds none.
func TestScanReadsOnlyItsProject(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	const projects, perProject = 8, 2500
	ts := func(sec int) string { return t0.Add(time.Duration(sec) * time.Second).Format(time.RFC3339) }
	for p := range projects {
		declareReady(t, pool, fmt.Sprintf("tenant/t/project/p%d", p), "seq", "updated_at")
		var batch []contract.Event
		for i := range perProject {
			batch = append(batch, put(t, fmt.Sprintf("tenant/t/project/p%d/jobs/%06d", p, i), 1,
				fmt.Sprintf(`{"seq":%d,"updated_at":%q}`, i, ts(i))))
		}
		mustApply(t, s, "kv.changes", batchOf(int64(p*perProject), batch...))
	}
	if _, err := pool.Exec(context.Background(), `VACUUM ANALYZE kv_fields, kv_entries`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, index string
		f           projection.Filter
	}{
		{"OKString", "kv_fields_str_scoped", filter("updated_at", contract.FilterGt, `"`+ts(perProject-26)+`"`)},
		{"OKNumber", "kv_fields_num_scoped", filter("seq", contract.FilterGte, fmt.Sprint(perProject-25))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const prefix = "tenant/t/project/p3/"
			plan := projection.ExplainScan(t, pool, prefix, tt.f, "", 100, t0)
			l := planLine(plan, tt.index)
			if readsWhole(plan) || l == "" || strings.Contains(l, "never executed") {
				t.Fatalf("want the value-first part on %s, no table read whole:\n%s", tt.index, plan)
			}
			// The scope is a bound of the index range (before the value,
			// in the hash of scope, type and field: kv_field_group), not
			// a filter of every project's matches.
			if cond := planLine(plan[strings.Index(plan, l)+len(l):], "Index Cond"); !strings.Contains(l, "rows=25 ") ||
				!strings.Contains(cond, "hashtextextended(") || !strings.Contains(cond, "split_part(key") {
				t.Errorf("%s read %q, %q; want the project's 25 matches, the project in the index condition:\n%s", tt.index, l, cond, plan)
			}
			keys, _ := mustScan(t, s, prefix, tt.f, "", 100, t0)
			if len(keys) != 25 || !strings.HasPrefix(keys[0], prefix) {
				t.Errorf("scan: %d keys, first %v; want the project's 25", len(keys), first(keys, 1))
			}
		})
	}
}

// TestScanValueFirstAmongManyProjects: Postgres estimates a prefix's key
// range from the key's histogram, and with more projects than buckets
// most projects' ranges hold no bound and look like a row or two. At 10
// million keys over 100 projects (figure 23c) the planner then read a
// scan's by-value part in key order through the (field, key) index, every
// row of the project's field (100,000, for 1,000 matches), 20–30 times
// the baseline's time. The by-value part must read the scoped index,
// where the project's matches are all it reads. (It read
// the (field, key) index here before the part's key bounds were written in
// collation POSIX.)
func TestScanValueFirstAmongManyProjects(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("loads 120,000 entries")
	}
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	const projects, perProject = 60, 2000
	ts := func(sec int) string { return t0.Add(time.Duration(sec) * time.Second).Format(time.RFC3339) }
	for p := range projects {
		declareReady(t, pool, fmt.Sprintf("tenant/t/project/p%02d", p), "updated_at")
		var batch []contract.Event
		for i := range perProject {
			at := 100_000 + i // one key in 100 was updated long ago
			if i%100 == 0 {
				at = i / 100
			}
			batch = append(batch, put(t, fmt.Sprintf("tenant/t/project/p%02d/jobs/%06d", p, i), 1,
				fmt.Sprintf(`{"updated_at":%q}`, ts(at))))
		}
		mustApply(t, s, "kv.changes", batchOf(int64(p*perProject), batch...))
	}
	// A histogram of key with fewer buckets than projects, as at 10
	// million keys: most projects' key ranges then hold no bucket bound.
	for _, q := range []string{`ALTER TABLE kv_fields ALTER COLUMN key SET STATISTICS 10`, `VACUUM ANALYZE kv_fields, kv_entries`} {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	const prefix = "tenant/t/project/p37/jobs/"
	f := filter("updated_at", contract.FilterLt, `"`+ts(1000)+`"`)
	plan := projection.ExplainScan(t, pool, prefix, f, "", 100, t0)
	far := plan[strings.Index(plan, "Subquery Scan on far"):]
	if l := planLine(far, "Index Only Scan"); !strings.Contains(l, "kv_fields_str_scoped") || !strings.Contains(l, "rows=20 ") {
		t.Errorf("the far part read %q; want kv_fields_str_scoped, the project's 20 matches:\n%s", l, plan)
	}
	keys, _ := mustScan(t, s, prefix, f, "", 100, t0)
	if len(keys) != 20 || keys[0] != prefix+"000000" || keys[19] != prefix+"001900" {
		t.Errorf("scan: %d keys, first %v; want the project's 20", len(keys), first(keys, 1))
	}
}

// readsWhole reports whether plan reads kv_entries or kv_fields whole
// (kv_field_indexes, a few rows, may be).
func readsWhole(plan string) bool {
	return strings.Contains(plan, "Seq Scan on kv_entries") || strings.Contains(plan, "Seq Scan on kv_fields ")
}

// planLine is the first line of plan containing s.
func planLine(plan, s string) string {
	for line := range strings.Lines(plan) {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// TestScanSettingsStayInTheScan checks that the scan's planner settings
// (set_config is_local in the scan's batch) do not leak into the
// connection's later queries.
func TestScanSettingsStayInTheScan(t *testing.T) {
	t.Parallel()
	pool := poolOf(t, 1)
	var before string
	if err := pool.QueryRow(context.Background(), `SELECT current_setting('max_parallel_workers_per_gather')`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if _, _, err := projection.New(pool).Scan(context.Background(), "tenant/t/project/p/", filter("a", contract.FilterEq, `1`), projection.Page{Limit: 10, MaxBytes: noBudget, Now: t0}); err != nil {
		t.Fatal(err)
	}
	var after string
	if err := pool.QueryRow(context.Background(), `SELECT current_setting('max_parallel_workers_per_gather')`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before || before == "0" {
		t.Errorf("max_parallel_workers_per_gather %q before the scan, %q after; want the server's (non-zero) value both times", before, after)
	}
}

func TestScanInOtherSchema(t *testing.T) {
	t.Parallel()
	pg := testenv.MustPostgresDB(t)
	s := projection.New(pg.MustSchema(t, "rebuild_f"))
	const k = "tenant/t/project/p/k"
	mustApply(t, s, "kv.changes", batchOf(0, put(t, k, 1, `{"state":"done"}`)))
	if keys, _ := mustScan(t, s, "tenant/t/project/p/", filter("state", contract.FilterEq, `"done"`), "", 10, t0); !slices.Equal(keys, []string{k}) {
		t.Errorf("scan in rebuild_f: %v", keys)
	}
	if keys, _ := mustScan(t, projection.New(pg.Pool), "tenant/t/project/p/", filter("state", contract.FilterEq, `"done"`), "", 10, t0); len(keys) != 0 {
		t.Errorf("scan of public found %v", keys)
	}
}

// TestMigrationIndexesExistingEntries migrates a database holding entries
// from before kv_fields (version 3) and back.
func TestMigrationIndexesExistingEntries(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	ctx := context.Background()
	p := migrator(t, pool)
	if _, err := p.DownTo(ctx, 3); err != nil {
		t.Fatalf("down to 3: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_proc WHERE proname = 'kv_value_fields'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("after down: %d kv_value_fields functions, %v", n, err)
	}
	// Entries as version 3 knew them.
	exp := t0.Add(time.Hour)
	if _, err := pool.Exec(ctx, `INSERT INTO kv_entries (key, scope, partition, version, live, value, updated_at, expires_at, kafka_offset) VALUES
		('tenant/t/project/p/a', 'tenant/t/project/p', 0, 1, true, '{"state":"done","n":1}', now(), NULL, 0),
		('tenant/t/project/p/b', 'tenant/t/project/p', 0, 1, true, '{"state":"running"}', now(), $1, 1),
		('tenant/t/project/p/c', 'tenant/t/project/p', 0, 2, false, NULL, now(), NULL, 2)`, exp); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	checkFieldsDerived(t, pool)
	s := projection.New(pool)
	if keys, _ := mustScan(t, s, "tenant/t/project/p/", filter("state", contract.FilterNe, `"x"`), "", 10, t0); !slices.Equal(keys, []string{"tenant/t/project/p/a", "tenant/t/project/p/b"}) {
		t.Errorf("scan after the migration: %v", keys)
	}
	if keys, _ := mustScan(t, s, "tenant/t/project/p/", filter("state", contract.FilterNe, `"x"`), "", 10, exp); !slices.Equal(keys, []string{"tenant/t/project/p/a"}) {
		t.Errorf("scan after b's expiry: %v", keys)
	}
}

// migrator is a goose provider of the project's Postgres migrations over
// pool, to move a test's database down and up.
func migrator(t *testing.T, pool *pgxpool.Pool) *goose.Provider {
	t.Helper()
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	migrations, err := fs.Sub(schemas.Postgres, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
