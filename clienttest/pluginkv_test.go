package clienttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
	"github.com/eskv/eskv/writer"
)

// pluginKV is a plugin's key-value data layer (kv_set, kv_get,
// kv_delete, kv_list, kv_cleanup_expired) as a user writes it over the
// Go client: a plugin is a project, tenant/<tenant>/project/<plugin>/,
// and each function is one client call (docs/go-client.md, "A plugin's
// key-value store").
type pluginKV struct {
	c      *client.Client
	tenant string
}

// prefix is the plugin's scope, and of a listing under prefix within it.
func (s pluginKV) prefix(plugin, prefix string) string {
	return "tenant/" + s.tenant + "/project/" + plugin + "/" + prefix
}

// set is kv_set: an unconditional Put (insert or update) with the value
// as JSON and ttl in whole seconds (0: none).
func (s pluginKV) set(ctx context.Context, plugin, key string, value any, ttl time.Duration) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("value is not JSON-serializable: %w", err)
	}
	_, err = s.c.Put(ctx, client.PutRequest{Key: s.prefix(plugin, key), Value: raw, TTL: ttl})
	return err
}

// get is kv_get: Get, an absent or expired key being not_found
// (exists false).
func (s pluginKV) get(ctx context.Context, plugin, key string) (value any, exists bool, err error) {
	e, err := s.c.Get(ctx, s.prefix(plugin, key))
	if contract.ErrorCode(err) == contract.ENotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(e.Value, &value); err != nil {
		return nil, false, err
	}
	return value, true, nil
}

// delete is kv_delete: Delete, not_found answering false.
func (s pluginKV) delete(ctx context.Context, plugin, key string) (bool, error) {
	d, err := s.c.Delete(ctx, s.prefix(plugin, key), client.DeleteOptions{})
	if contract.ErrorCode(err) == contract.ENotFound {
		return false, nil
	}
	return d.Deleted, err
}

// listing is kv_list's answer.
type listing struct {
	Keys      []string
	Count     int
	Truncated bool
}

// list is kv_list: one keys-only page (ListKeys) of at most limit live
// keys under the prefix, in key order, the plugin's scope cut off.
func (s pluginKV) list(ctx context.Context, plugin, prefix string, limit int) (listing, error) {
	p, err := s.c.ListKeys(ctx, client.ListOptions{Prefix: s.prefix(plugin, prefix), Limit: limit})
	if err != nil {
		return listing{}, err
	}
	l := listing{Keys: []string{}, Count: p.Count, Truncated: p.Truncated}
	for _, k := range p.Items {
		l.Keys = append(l.Keys, strings.TrimPrefix(k.Key, s.prefix(plugin, "")))
	}
	return l, nil
}

// cleanupExpired is kv_cleanup_expired over the given plugins: an
// ExpireDueAll of each one's scope (a prefix write stays inside one
// project), the counts summed.
func (s pluginKV) cleanupExpired(ctx context.Context, plugins ...string) (int, error) {
	total := 0
	for _, p := range plugins {
		n, err := s.c.ExpireDueAll(ctx, s.prefix(p, ""))
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// mustSet is set, failing the test on an error.
func (s pluginKV) mustSet(tb testing.TB, plugin, key string, value any, ttl time.Duration) {
	tb.Helper()
	if err := s.set(tb.Context(), plugin, key, value, ttl); err != nil {
		tb.Fatalf("kv_set(%q, %q): %v", plugin, key, err)
	}
}

// mustGet is get, failing the test on an error.
func (s pluginKV) mustGet(tb testing.TB, plugin, key string) (any, bool) {
	tb.Helper()
	v, ok, err := s.get(tb.Context(), plugin, key)
	if err != nil {
		tb.Fatalf("kv_get(%q, %q): %v", plugin, key, err)
	}
	return v, ok
}

// mustList is list, failing the test on an error.
func (s pluginKV) mustList(tb testing.TB, plugin, prefix string, limit int) listing {
	tb.Helper()
	l, err := s.list(tb.Context(), plugin, prefix, limit)
	if err != nil {
		tb.Fatalf("kv_list(%q, %q, %d): %v", plugin, prefix, limit, err)
	}
	return l
}

// mustSetMany writes n keys of plugin, key(i) = value(i), with a TTL,
// in transactions of contract.MaxTxnOps puts: the setup of the bulk
// scenarios, which put rows in place without timing them.
func (s pluginKV) mustSetMany(tb testing.TB, plugin string, n int, key func(int) string, ttl time.Duration) {
	tb.Helper()
	for from := 0; from < n; from += contract.MaxTxnOps {
		var ops []contract.TxnOp
		for i := from; i < min(n, from+contract.MaxTxnOps); i++ {
			op := contract.TxnOp{Op: contract.OpPut, Key: s.prefix(plugin, key(i)), Value: json.RawMessage(fmt.Sprint(i))}
			if ttl > 0 {
				op.TTLSeconds = new(int64(ttl / time.Second))
			}
			ops = append(ops, op)
		}
		if _, err := s.c.Txn(tb.Context(), contract.TxnBody{Ops: ops}); err != nil {
			tb.Fatalf("setting keys %d..%d: %v", from, from+len(ops)-1, err)
		}
	}
}

// timed runs f, logs how long it took against the target and fails the
// test past bound: the targets are a dedicated machine's, the bound
// tolerates a loaded one.
func timed(tb testing.TB, what string, target, bound time.Duration, f func()) {
	tb.Helper()
	start := time.Now()
	f()
	took := time.Since(start)
	tb.Logf("%s took %v (target %v)", what, took.Round(time.Millisecond), target)
	if took > bound {
		tb.Errorf("%s took %v, over %v", what, took, bound)
	}
}

// TestPluginKV runs a plugin key-value data layer's test list, its
// scenario names, keys and values as written, through the Go client
// against a stack whose sweeper is idle (so kv_cleanup_expired's counts
// are expireDue's alone). Each scenario had a database of its own: here
// a tenant of its own, its plugins that tenant's projects.
func TestPluginKV(t *testing.T) {
	t.Parallel()
	st := stack.MustRun(t, stack.WriterConfig(func(c *writer.Config) { c.SweepInterval = time.Hour }))
	c := client.New(st.URL, stack.DevToken)
	db := func(t *testing.T) pluginKV {
		return pluginKV{c: c, tenant: strings.ReplaceAll(strings.TrimPrefix(t.Name()[strings.LastIndexByte(t.Name(), '/')+1:], "test_"), "_", "-")}
	}

	t.Run("test_kv_set_and_get_basic", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		db.mustSet(t, "test-plugin", "config", map[string]any{"theme": "dark"}, 0)
		v, ok := db.mustGet(t, "test-plugin", "config")
		if !ok || !jsonEqual(v, map[string]any{"theme": "dark"}) {
			t.Fatalf("kv_get: %v %v", v, ok)
		}
	})

	t.Run("test_kv_set_all_json_types", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		for _, tc := range []struct {
			key   string
			value any
		}{
			{"dict", map[string]any{"key": "value"}},
			{"list", []any{1, 2, 3}},
			{"string", "hello world"},
			{"int", 42},
			{"float", 3.14},
			{"bool_true", true},
			{"bool_false", false},
			{"null", nil},
			{"nested", map[string]any{"users": []any{map[string]any{"name": "Alice", "score": 95}}}},
		} {
			db.mustSet(t, "test", tc.key, tc.value, 0)
			if v, ok := db.mustGet(t, "test", tc.key); !ok || !jsonEqual(v, tc.value) {
				t.Errorf("%s: kv_get answered %#v %v, want %#v", tc.key, v, ok, tc.value)
			}
		}
	})

	t.Run("test_kv_get_nonexistent_key", func(t *testing.T) {
		t.Parallel()
		if v, ok := db(t).mustGet(t, "test", "nonexistent"); ok {
			t.Fatalf("kv_get of a key never set: %v", v)
		}
	})

	t.Run("test_kv_set_with_ttl", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		db.mustSet(t, "test", "expires", "data", time.Second)
		if _, ok := db.mustGet(t, "test", "expires"); !ok {
			t.Fatal("absent at once")
		}
		time.Sleep(2 * time.Second)
		if v, ok := db.mustGet(t, "test", "expires"); ok {
			t.Fatalf("present after its TTL: %v", v)
		}
	})

	t.Run("test_kv_set_upsert", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		for _, n := range []int{1, 2} {
			db.mustSet(t, "test", "counter", n, 0)
			if v, _ := db.mustGet(t, "test", "counter"); !jsonEqual(v, n) {
				t.Fatalf("kv_get after kv_set %d: %v", n, v)
			}
		}
	})

	t.Run("test_kv_set_value_size_limit", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		db.mustSet(t, "test", "small", strings.Repeat("x", 65000), 0)
		err := db.set(t.Context(), "test", "large", strings.Repeat("x", 70000), 0)
		var e *contract.Error
		if !errors.As(err, &e) || e.Code != contract.ETooLarge || e.Field != "value" {
			t.Fatalf("a value of 70000 characters: want value_too_large on value, got %v", err)
		}
		if _, ok := db.mustGet(t, "test", "large"); ok {
			t.Fatal("the refused value was written")
		}
	})

	t.Run("test_kv_set_non_serializable", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		var unsupported *json.UnsupportedTypeError
		if err := db.set(t.Context(), "test", "bad", make(chan int), 0); !errors.As(err, &unsupported) ||
			!strings.Contains(err.Error(), "not JSON-serializable") {
			t.Fatalf("a channel: want not JSON-serializable, got %v", err)
		}
		if _, ok := db.mustGet(t, "test", "bad"); ok {
			t.Fatal("the refused value was written")
		}
	})

	t.Run("test_kv_delete", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		db.mustSet(t, "test", "temp", "data", 0)
		for i, want := range []bool{true, false} {
			if deleted, err := db.delete(t.Context(), "test", "temp"); err != nil || deleted != want {
				t.Fatalf("kv_delete %d: %v %v, want %v", i+1, deleted, err, want)
			}
			if _, ok := db.mustGet(t, "test", "temp"); ok {
				t.Fatalf("present after kv_delete %d", i+1)
			}
		}
	})

	t.Run("test_kv_list_basic", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		for i, k := range []string{"key1", "key2", "key3"} {
			db.mustSet(t, "test", k, i+1, 0)
		}
		if l := db.mustList(t, "test", "", 0); l.Count != 3 || !slices.Equal(l.Keys, []string{"key1", "key2", "key3"}) || l.Truncated {
			t.Fatalf("kv_list: %+v", l)
		}
	})

	t.Run("test_kv_list_with_prefix", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		db.mustSet(t, "test", "user:alice", map[string]any{"name": "Alice"}, 0)
		db.mustSet(t, "test", "user:bob", map[string]any{"name": "Bob"}, 0)
		db.mustSet(t, "test", "config:theme", "dark", 0)
		l := db.mustList(t, "test", "user:", 0)
		if l.Count != 2 || !slices.Contains(l.Keys, "user:alice") || !slices.Contains(l.Keys, "user:bob") || slices.Contains(l.Keys, "config:theme") {
			t.Fatalf("kv_list(prefix=user:): %+v", l)
		}
	})

	t.Run("test_kv_list_excludes_expired", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		db.mustSet(t, "test", "expires1", 1, time.Second)
		db.mustSet(t, "test", "expires2", 2, time.Second)
		db.mustSet(t, "test", "permanent", 3, 0)
		time.Sleep(2 * time.Second)
		if l := db.mustList(t, "test", "", 0); l.Count != 1 || !slices.Equal(l.Keys, []string{"permanent"}) {
			t.Fatalf("kv_list after the TTLs (expired keys not yet swept): %+v", l)
		}
	})

	t.Run("test_kv_list_truncation", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		for i := range 15 {
			db.mustSet(t, "test", fmt.Sprintf("key%02d", i), i, 0)
		}
		if l := db.mustList(t, "test", "", 10); l.Count != 10 || !l.Truncated {
			t.Fatalf("kv_list(limit=10): %+v", l)
		}
		if l := db.mustList(t, "test", "", 20); l.Count != 15 || l.Truncated {
			t.Fatalf("kv_list(limit=20): %+v", l)
		}
	})

	t.Run("test_kv_list_sorted", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		for _, k := range []string{"zebra", "apple", "mango", "banana"} {
			db.mustSet(t, "test", k, 1, 0)
		}
		if l := db.mustList(t, "test", "", 0); !slices.Equal(l.Keys, []string{"apple", "banana", "mango", "zebra"}) {
			t.Fatalf("kv_list: %v", l.Keys)
		}
	})

	t.Run("test_kv_cleanup_expired", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		for i := range 5 {
			db.mustSet(t, "test", fmt.Sprintf("expires%d", i), i, time.Second)
		}
		for i := range 3 {
			db.mustSet(t, "test", fmt.Sprintf("keep%d", i), i, 0)
		}
		time.Sleep(2 * time.Second)
		for i, want := range []int{5, 0} {
			if n, err := db.cleanupExpired(t.Context(), "test"); err != nil || n != want {
				t.Fatalf("kv_cleanup_expired %d: %d %v, want %d", i+1, n, err, want)
			}
		}
		l := db.mustList(t, "test", "", 0)
		if l.Count != 3 || !slices.ContainsFunc(l.Keys, func(k string) bool { return strings.Contains(k, "keep") }) ||
			slices.ContainsFunc(l.Keys, func(k string) bool { return !strings.Contains(k, "keep") }) {
			t.Fatalf("kv_list after the cleanup: %+v", l)
		}
	})

	t.Run("test_plugin_isolation", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		db.mustSet(t, "plugin-a", "secret", "data-a", 0)
		db.mustSet(t, "plugin-b", "secret", "data-b", 0)
		for plugin, want := range map[string]string{"plugin-a": "data-a", "plugin-b": "data-b"} {
			if v, _ := db.mustGet(t, plugin, "secret"); v != want {
				t.Errorf("kv_get(%s, secret): %v, want %s", plugin, v, want)
			}
		}
		db.mustSet(t, "plugin-a", "key1", 1, 0)
		db.mustSet(t, "plugin-b", "key2", 2, 0)
		if l := db.mustList(t, "plugin-a", "", 0); !slices.Contains(l.Keys, "key1") || slices.Contains(l.Keys, "key2") {
			t.Fatalf("kv_list(plugin-a): %v", l.Keys)
		}
	})

	t.Run("test_kv_performance_bulk_set", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		timed(t, "100 kv_set", time.Second, time.Minute, func() {
			for i := range 100 {
				db.mustSet(t, "test", fmt.Sprintf("key%d", i), map[string]any{"index": i}, 0)
			}
		})
	})

	t.Run("test_kv_performance_bulk_get", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		for i := range 100 {
			db.mustSet(t, "test", fmt.Sprintf("key%d", i), map[string]any{"index": i}, 0)
		}
		timed(t, "100 kv_get", time.Second, time.Minute, func() {
			for i := range 100 {
				if v, ok := db.mustGet(t, "test", fmt.Sprintf("key%d", i)); !ok || !jsonEqual(v, map[string]any{"index": i}) {
					t.Fatalf("kv_get key%d: %v %v", i, v, ok)
				}
			}
		})
	})

	t.Run("test_kv_performance_list_1000", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		db.mustSetMany(t, "test", 1000, func(i int) string { return fmt.Sprintf("key%04d", i) }, 0)
		var l listing
		timed(t, "kv_list of 1000 keys", 50*time.Millisecond, 30*time.Second, func() { l = db.mustList(t, "test", "", 1000) })
		if l.Count != 1000 || l.Truncated {
			t.Fatalf("kv_list(limit=1000): count %d, truncated %v", l.Count, l.Truncated)
		}
	})

	t.Run("test_kv_performance_cleanup_10k", func(t *testing.T) {
		t.Parallel()
		db := db(t)
		// Rows cannot be written already expired: they are written with
		// the shortest TTL, 1 s, and the cleanup waits until it passed.
		db.mustSetMany(t, "test", 10000, func(i int) string { return fmt.Sprintf("key%d", i) }, time.Second)
		time.Sleep(2 * time.Second)
		var n int
		var err error
		timed(t, "kv_cleanup_expired of 10000 keys", time.Second, 2*time.Minute, func() { n, err = db.cleanupExpired(t.Context(), "test") })
		if err != nil || n != 10000 {
			t.Fatalf("kv_cleanup_expired: %d %v, want 10000", n, err)
		}
	})
}

// jsonEqual says whether got, a value decoded from JSON, is want once
// want goes through JSON too.
func jsonEqual(got, want any) bool {
	a, errA := json.Marshal(got)
	b, errB := json.Marshal(want)
	return errA == nil && errB == nil && string(a) == string(b)
}
