package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/tools/linz"
)

// staleAnswers lists the reads and conflicts that reported a version older
// than one acknowledged before they were invoked. Each one alone makes a
// history non-linearizable; they are the usual explanation of a failed
// check and easier to read than porcupine's partial linearizations. owners
// (may be nil) says which writer the ownership table named for the key's
// partition at the time; a conflict's correlation id, which of the logs in
// logDir (the writers') has the line that decided it.
func staleAnswers(h []linz.Op, partitions int32, owners *ownerTimeline, logDir string) []string {
	type ack struct {
		ret     int64
		version int64
		o       linz.Op
	}
	byKey := map[string][]ack{}
	for _, o := range h {
		if o.In.Kind.Writes() && o.Out.Outcome == linz.OK {
			byKey[o.In.Key] = append(byKey[o.In.Key], ack{o.Return, o.Out.Version, o})
		}
	}
	// Per key, acks by return time, with the highest version acknowledged
	// up to each.
	for k, as := range byKey {
		sort.Slice(as, func(i, j int) bool { return as[i].ret < as[j].ret })
		for i := 1; i < len(as); i++ {
			if as[i].version < as[i-1].version {
				as[i].version, as[i].o = as[i-1].version, as[i-1].o
			}
		}
		byKey[k] = as
	}
	var out []string
	for _, o := range h {
		switch {
		case o.In.Kind == linz.Read && (o.Out.Outcome == linz.OK || o.Out.Outcome == linz.NotFound):
		case o.In.Kind.Writes() && o.Out.Outcome == linz.Conflict:
		default:
			continue
		}
		as := byKey[o.In.Key]
		i := sort.Search(len(as), func(i int) bool { return as[i].ret >= o.Call }) - 1
		if i < 0 || as[i].version <= o.Out.Version {
			continue
		}
		what := "read"
		switch o.In.Kind {
		case linz.Write:
			what = fmt.Sprintf("cas from v%d", o.In.Expected)
		case linz.Touch:
			what = fmt.Sprintf("touch from v%d", o.In.Expected)
		}
		got := "not found"
		if o.Out.Outcome != linz.NotFound {
			got = fmt.Sprintf("v%d %q", o.Out.Version, o.Out.Value)
		}
		if o.Out.Outcome == linz.Conflict {
			got = "conflict with " + got
		}
		line := fmt.Sprintf("%s of %s via writer-%d at %.3fs-%.3fs answered %s, but v%d was acknowledged at %.3fs (client %d via writer-%d)",
			what, o.In.Key, o.Writer+1, secs(o.Call), secs(o.Return), got, as[i].version, secs(as[i].ret), as[i].o.Client, as[i].o.Writer+1)
		if owners != nil {
			p := changelog.Partition(contract.ScopeOf(o.In.Key), partitions)
			line += fmt.Sprintf("; partition %d: %s", p, owners.at(p, o.Call))
		}
		if id, ok := strings.CutPrefix(o.Detail, "correlationId "); ok && id != "" {
			line += "; correlationId " + id
			if who := whoLogged(logDir, id); who != "" {
				line += " in " + who
			}
		}
		out = append(out, line)
	}
	return out
}

func secs(ns int64) float64 { return float64(ns) / 1e9 }

// ownerTimeline records the changes of the ownership table (writer_owners)
// as the harness saw them, polling.
type ownerTimeline struct {
	t0      time.Time
	mu      sync.Mutex
	changes []ownerChange
	last    map[int32]projection.Owner
}

type ownerChange struct {
	At    int64 // ns since t0
	Owner projection.Owner
}

func newOwnerTimeline(t0 time.Time) *ownerTimeline {
	return &ownerTimeline{t0: t0, last: map[int32]projection.Owner{}}
}

// poll records changes every interval until ctx ends.
func (t *ownerTimeline) poll(ctx context.Context, store *projection.Store, interval time.Duration) {
	for {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		owners, err := store.Owners(qctx)
		cancel()
		if err == nil {
			now := int64(time.Since(t.t0))
			t.mu.Lock()
			for p, o := range owners {
				if l, ok := t.last[p]; !ok || l.ID != o.ID || l.Epoch != o.Epoch {
					t.changes = append(t.changes, ownerChange{At: now, Owner: o})
					t.last[p] = o
				}
			}
			t.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// at describes the owner of partition p recorded last before time at.
func (t *ownerTimeline) at(p int32, at int64) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var cur, next *ownerChange
	for i := range t.changes {
		c := &t.changes[i]
		if c.Owner.Partition != p {
			continue
		}
		if c.At <= at {
			cur = c
		} else if next == nil {
			next = c
		}
	}
	s := "no owner recorded yet"
	if cur != nil {
		s = fmt.Sprintf("owner %s epoch %d (seen at %.3fs)", cur.Owner.ID, cur.Owner.Epoch, secs(cur.At))
	}
	if next != nil {
		s += fmt.Sprintf(", then %s epoch %d (seen at %.3fs)", next.Owner.ID, next.Owner.Epoch, secs(next.At))
	}
	return s
}

// ownerAt returns the instance id of partition p's owner recorded last
// before at (since t0), or "".
func (t *ownerTimeline) ownerAt(p int32, at time.Duration) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := ""
	for _, c := range t.changes {
		if c.Owner.Partition == p && c.At <= int64(at) {
			id = c.Owner.ID
		}
	}
	return id
}

// lines returns the timeline, one change a line.
func (t *ownerTimeline) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, c := range t.changes {
		out = append(out, fmt.Sprintf("%8.3fs partition %2d: %s epoch %d (%s)", secs(c.At), c.Owner.Partition, c.Owner.ID, c.Owner.Epoch, c.Owner.Addr))
	}
	return out
}

// whoLogged names the log files in dir (writer-N.log…) holding the
// correlation id id: which writer decided a conflict, with the lines
// around it. "" when none does or dir is "".
func whoLogged(dir, id string) string {
	if dir == "" {
		return ""
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var who []string
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err == nil && bytes.Contains(b, []byte(id)) {
			who = append(who, filepath.Base(l))
		}
	}
	return strings.Join(who, ", ")
}
