package linz

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Change is a write as the listing check sees it: a put (the CAS writes
// of the register history, and unconditional puts) or a delete of a key,
// with its outcome: OK with the version it wrote, Unknown (it may apply
// at any time from its call on), or Failed (no effect: left out).
type Change struct {
	Client int    `json:"client"`
	Writer int    `json:"writer"`
	Key    string `json:"key"`
	Delete bool   `json:"delete,omitempty"`
	// Outcome is OK, Unknown or Failed.
	Outcome   Outcome `json:"outcome"`
	Version   int64   `json:"version,omitempty"`
	Call      int64   `json:"call"`
	Return    int64   `json:"return"`
	Detail    string  `json:"detail,omitempty"`
	RequestID string  `json:"requestId,omitempty"`
	// Matches names the filters (Listing.Filter) a put's value
	// satisfies.
	Matches []string `json:"matches,omitempty"`
}

// Listing is one answered listing of a prefix (GET /v1/kv?prefix=): the
// keys and versions of its page. A listing that was not answered 200 has
// no effect and is not recorded.
type Listing struct {
	Client int              `json:"client"`
	Writer int              `json:"writer"`
	Prefix string           `json:"prefix"`
	Call   int64            `json:"call"`
	Return int64            `json:"return"`
	Items  map[string]int64 `json:"items"` // key → version listed
	// Filter names the listing's filter ("": none, every key): to it, a
	// put whose Matches lack it leaves the key out, as a delete does.
	Filter string `json:"filter,omitempty"`
}

// Changes returns the writes of the register history h as changes (every
// CAS write and touch is a put; a conflict had no effect).
func Changes(h []Op) []Change {
	var out []Change
	for _, o := range h {
		if !o.In.Kind.Writes() {
			continue
		}
		c := Change{Client: o.Client, Writer: o.Writer, Key: o.In.Key, Outcome: o.Out.Outcome, Call: o.Call, Return: o.Return,
			Detail: o.Detail, RequestID: o.RequestID}
		switch o.Out.Outcome {
		case OK:
			c.Version = o.Out.Version
		case Unknown:
		default:
			continue
		}
		out = append(out, c)
	}
	return out
}

// ListingResult is the verdict on the listings of a history.
type ListingResult struct {
	Listings   int      // listings checked
	KeysJudged int      // (listing, key) pairs the check decided on
	Violations []string // each listing that broke the rule, and how
	Elapsed    time.Duration
}

// CheckListings checks that every listing saw every write acknowledged
// before it began (a listing is linearizable as a read of every key under
// its prefix at once; this checks each key's part of that). For a listing
// L called at C and answered at R, and each key k under L's prefix, let W
// be the acknowledged change of k with the highest version among those
// that returned before C (the latest write of k acknowledged before L
// began; versions order a key's acknowledged writes), and "possibly
// concurrent" every change of k that was OK or Unknown, called before R,
// and not acknowledged before C (an unknown write may apply at any time
// after its call):
//
//   - W is a put and no possibly concurrent change deletes k: L lists k.
//   - W is a delete and no possibly concurrent change puts k: L does not
//     list k.
//   - L lists k at version v: v is not below W's version (no stale
//     entry), and v is one a put could have written by R: an acknowledged
//     put of version v called before R, or an unknown put called before R
//     (no entry from the future, none never written).
//
// A filtered listing (a scan) is a listing of the keys whose value
// matches: to it, a put whose value does not match is a delete (so a
// scan that lists a key at such a version, or whose index still answers
// for an older value, breaks the rule).
func CheckListings(changes []Change, lists []Listing) ListingResult {
	start := time.Now()
	byKey := map[string][]Change{}
	for _, c := range changes {
		if c.Outcome == OK || c.Outcome == Unknown {
			byKey[c.Key] = append(byKey[c.Key], c)
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var r ListingResult
	for _, l := range lists {
		r.Listings++
		var broken []string
		judged := map[string]bool{}
		judge := func(k string) {
			if judged[k] {
				return
			}
			judged[k] = true
			r.KeysJudged++
			if why := judgeKey(asSeenBy(byKey[k], l.Filter), l, k); why != "" {
				broken = append(broken, why)
			}
		}
		for _, k := range keys {
			if strings.HasPrefix(k, l.Prefix) {
				judge(k)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(l.Items)) {
			if !strings.HasPrefix(k, l.Prefix) {
				broken = append(broken, fmt.Sprintf("%s is not under the prefix", k))
				continue
			}
			judge(k)
		}
		if len(broken) > 0 {
			r.Violations = append(r.Violations, fmt.Sprintf("listing of %s by client %d via writer %d at %s-%s (%d items): %s",
				l.Prefix, l.Client, l.Writer, at(l.Call), at(l.Return), len(l.Items), strings.Join(broken, "; ")))
		}
	}
	r.Elapsed = time.Since(start)
	return r
}

// asSeenBy returns cs as a listing with filter sees them: a put whose
// value does not match it is a delete.
func asSeenBy(cs []Change, filter string) []Change {
	if filter == "" {
		return cs
	}
	out := make([]Change, len(cs))
	for i, c := range cs {
		if !c.Delete && !slices.Contains(c.Matches, filter) {
			c.Delete = true
		}
		out[i] = c
	}
	return out
}

// judgeKey says how listing l broke the rule for key k ("" when it did
// not), given k's changes that were OK or Unknown.
func judgeKey(cs []Change, l Listing, k string) string {
	var w *Change // latest acknowledged before l began
	var concPut, concDelete bool
	for i := range cs {
		c := &cs[i]
		if c.Outcome == OK && c.Return < l.Call {
			if w == nil || c.Version > w.Version {
				w = c
			}
			continue
		}
		if c.Call < l.Return {
			if c.Delete {
				concDelete = true
			} else {
				concPut = true
			}
		}
	}
	v, listed := l.Items[k]
	switch {
	case w != nil && !w.Delete && !listed && !concDelete:
		return fmt.Sprintf("%s missing: put v%d was acknowledged at %s (client %d via writer %d), and no delete was possibly concurrent",
			k, w.Version, at(w.Return), w.Client, w.Writer)
	case w != nil && w.Delete && listed && !concPut:
		return fmt.Sprintf("%s listed at v%d: its delete v%d was acknowledged at %s (client %d via writer %d), and no put was possibly concurrent",
			k, v, w.Version, at(w.Return), w.Client, w.Writer)
	case listed && w != nil && v < w.Version:
		return fmt.Sprintf("%s listed at v%d, older than v%d acknowledged at %s (client %d via writer %d)",
			k, v, w.Version, at(w.Return), w.Client, w.Writer)
	case listed && !slices.ContainsFunc(cs, func(c Change) bool {
		return !c.Delete && c.Call < l.Return && (c.Outcome == Unknown || c.Version == v)
	}):
		return fmt.Sprintf("%s listed at v%d, which no put called before the listing returned could have written", k, v)
	}
	return ""
}

func at(ns int64) string { return time.Duration(ns).Round(time.Millisecond).String() }
