package statecache

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// TestStateCachePut: the budget, states larger than it, and a disabled
// cache.
func TestStateCachePut(t *testing.T) {
	size := Size("k00", &keystate.State{})
	t.Run("OKEvictsToBudget", func(t *testing.T) {
		m := NewMetrics()
		c := New(4*size, m)
		for i := range 10 {
			c.Put(fmt.Sprintf("k%02d", i), keystate.State{})
			if c.bytes > c.budget {
				t.Fatalf("%d bytes over a budget of %d", c.bytes, c.budget)
			}
		}
		if len(c.entries) != 4 {
			t.Errorf("%d states kept; want 4", len(c.entries))
		}
		if _, ok := c.Get("k09"); !ok {
			t.Error("the state just put was evicted")
		}
		if n := testutil.ToFloat64(m.Evictions); n != 6 {
			t.Errorf("%v evictions; want 6", n)
		}
		if b := testutil.ToFloat64(m.Bytes); b != float64(c.bytes) {
			t.Errorf("bytes gauge %v; want %d", b, c.bytes)
		}
	})
	t.Run("OKTooLargeDropsTheOlder", func(t *testing.T) {
		c := New(2*size, NewMetrics())
		c.Put("k00", keystate.State{Version: 1})
		c.Put("k00", keystate.State{Version: 2, Entry: contract.Entry{Value: make(json.RawMessage, 2*size)}})
		if st, ok := c.Get("k00"); ok || c.bytes != 0 {
			t.Errorf("cached %+v, %d bytes; want nothing", st, c.bytes)
		}
	})
	t.Run("OKKeepsNewer", func(t *testing.T) {
		c := New(4*size, NewMetrics())
		c.Put("k00", keystate.State{Version: 2})
		c.Put("k00", keystate.State{Version: 1})
		if st, ok := c.Get("k00"); !ok || st.Version != 2 {
			t.Errorf("cached %+v (%v); want version 2", st, ok)
		}
	})
	t.Run("OKReset", func(t *testing.T) {
		m := NewMetrics()
		c := New(4*size, m)
		c.Put("k00", keystate.State{})
		c.Reset()
		if _, ok := c.Get("k00"); ok || testutil.ToFloat64(m.Bytes) != 0 {
			t.Errorf("a reset cache answered or holds %v bytes", testutil.ToFloat64(m.Bytes))
		}
	})
	t.Run("OKDisabled", func(t *testing.T) {
		m := NewMetrics()
		c := New(0, m)
		c.Put("k00", keystate.State{})
		if _, ok := c.Get("k00"); ok {
			t.Error("a disabled cache answered")
		}
		if n := testutil.ToFloat64(m.Misses); n != 0 {
			t.Errorf("a disabled cache counted %v misses", n)
		}
	})
}
