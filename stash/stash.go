// Package stash implements the Stash interface (PRD "Stash
// Interface", docs/product-requirements/prd-stash-interface.md) on top of
// eskv's HTTP API, so code written against the PRD's Table and Stash can
// use eskv as its backend. It is a client of the API (module
// github.com/eskv/eskv/client): every rule the PRD makes about concurrent
// writers is enforced by the server through compare-and-swap writes and
// transactions, never by a read followed by a write in this package.
//
// Keys, inside the project given to Open (tenant/<t>/project/<p>):
//
//	<project>/stash/<StashID>                    the stash: a JSON document
//	<project>/stash-name/<scope>/n-<name>        the name index (one per name and scope)
//	<project>/stash-name/h.<hash>                the name index of a name too long to spell
//	<project>/stash-scope/<StashID>              the stash's scoped_to link (R13)
//
// A stash's document is {"name", "stashType", "value", "createdAt", "op",
// "historyId", "changedBy"?}: op and historyId describe the change that
// made the current version, so the key's eskv history is the stash's
// history (Table.History). Stash.Version is the key's eskv version: 1 at
// create and +1 per persisted Table.Set. The entity methods (SetValue,
// Increment, Acquire, Release) add 1 to Version in memory as the PRD asks;
// several of them before one Set persist as one new version, whose op is
// the last method's.
package stash

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Stash types (R2.1).
const (
	TypeResource = "resource"
	TypeArtifact = "artifact"
	TypeContext  = "context"
	TypeCounter  = "counter"
	TypeLock     = "lock"
)

// History operations (R7.3): the op of the change that made a version.
const (
	StashOpCreate    = "create"
	StashOpSet       = "set"
	StashOpIncrement = "increment"
	StashOpAcquire   = "acquire"
	StashOpRelease   = "release"
)

// Sentinel errors (R12), each checkable with errors.Is. An error of this
// package wraps one of them with context; errors of the HTTP API and the
// network that match none are wrapped as they come (an *events.Error or a
// *client.NetworkError).
var (
	ErrNotFound         = errors.New("stash: not found")
	ErrInvalidID        = errors.New("stash: invalid id")
	ErrInvalidName      = errors.New("stash: invalid name")
	ErrInvalidStashType = errors.New("stash: invalid stash type")
	ErrLockHeld         = errors.New("stash: lock held")
	ErrNotLockHolder    = errors.New("stash: not the lock holder")
	ErrInvalidHolder    = errors.New("stash: invalid holder")
	ErrDuplicateName    = errors.New("stash: duplicate name")
	// ErrConflict: the stash changed since it was read (another writer's
	// Set, Delete or ScopeTo won); read it again and retry.
	ErrConflict = errors.New("stash: version conflict")
	// ErrInvalidValue: the value does not fit the stash type's schema
	// (R2.1), or a counter would overflow int64.
	ErrInvalidValue = errors.New("stash: invalid value")
	// ErrInvalidFilter: a known Fetch filter key holds a value of the
	// wrong type (unknown keys are ignored, R9.5).
	ErrInvalidFilter = errors.New("stash: invalid filter")
	// ErrAlreadyScoped: the stash has its scoped_to link already (R13.2).
	ErrAlreadyScoped = errors.New("stash: already scoped to a trail")
)

// Stash is one piece of shared state (R1.1). The exported fields are the
// PRD's; the unexported ones remember the version the stash was read at,
// which Table.Set compares and swaps.
type Stash struct {
	StashID   string
	Name      string
	StashType string
	Value     any
	Version   int64
	CreatedAt time.Time

	// read is the stored state this struct was read (or last saved) at;
	// nil for a struct the caller built.
	read *readState
	// op is the last entity method applied since then ("" for none).
	op string
}

// readState is what Table.Set needs to know about the stored stash.
type readState struct {
	id        string
	version   int64
	name      string
	stashType string
	createdAt time.Time
}

// StashHistoryEntry is one version of a stash (R7.2).
type StashHistoryEntry struct {
	HistoryID string
	Version   int64
	Value     any
	Operation string
	ChangedBy *string
	CreatedAt time.Time
}

// SetValue replaces the value in memory (R4.2); Table.Set persists it. A
// lock's value changes only through Acquire and Release.
func (s *Stash) SetValue(v any) error {
	if s.StashType == TypeLock {
		return fmt.Errorf("SetValue on lock %q (use Acquire/Release): %w", s.Name, ErrInvalidStashType)
	}
	s.Value = v
	s.mutated(StashOpSet)
	return nil
}

// GetValue returns the value (R4.3), nil when none is set. Numbers read
// from eskv are json.Number, so int64 counters stay exact.
func (s *Stash) GetValue() any { return s.Value }

// Increment adds delta (negative decrements) to a counter in memory and
// returns the new count (R5.2); Table.Set persists it, as a
// compare-and-swap, so concurrent increments retry on ErrConflict instead
// of losing each other's updates.
func (s *Stash) Increment(delta int64) (int64, error) {
	if s.StashType != TypeCounter {
		return 0, fmt.Errorf("Increment on %s stash %q: %w", s.StashType, s.Name, ErrInvalidStashType)
	}
	cur, err := counterValue(s.Value)
	if err != nil {
		return 0, err
	}
	if (delta > 0 && cur > math.MaxInt64-delta) || (delta < 0 && cur < math.MinInt64-delta) {
		return 0, fmt.Errorf("counter %q at %d plus %d overflows int64: %w", s.Name, cur, delta, ErrInvalidValue)
	}
	next := cur + delta
	// Keep any other members of the counter's object as they are.
	v := map[string]any{}
	if m, ok := asObject(s.Value).(map[string]any); ok {
		for k, x := range m {
			v[k] = x
		}
	}
	v["value"] = next
	s.Value = v
	s.mutated(StashOpIncrement)
	return next, nil
}

// Acquire takes the lock for holder in memory (R6.2): it is reentrant for
// the current holder, ErrLockHeld for anyone else. Table.Set persists it
// as a compare-and-swap, so of two workers acquiring from one version only
// one is saved; the other gets ErrConflict and must read again.
func (s *Stash) Acquire(holder string) error {
	cur, err := s.lockCheck("Acquire", holder)
	if err != nil {
		return err
	}
	switch cur {
	case "":
		s.Value = map[string]any{"holder": holder, "acquired_at": time.Now().UTC().Format(time.RFC3339Nano)}
	case holder: // reentrant: the lock and its acquired_at stay as they are
	default:
		return fmt.Errorf("lock %q is held by %q: %w", s.Name, cur, ErrLockHeld)
	}
	s.mutated(StashOpAcquire)
	return nil
}

// Release frees the lock in memory (R6.3) when holder holds it.
func (s *Stash) Release(holder string) error {
	cur, err := s.lockCheck("Release", holder)
	if err != nil {
		return err
	}
	if cur != holder {
		return fmt.Errorf("lock %q is held by %q, not %q: %w", s.Name, cur, holder, ErrNotLockHolder)
	}
	s.Value = nil
	s.mutated(StashOpRelease)
	return nil
}

// lockCheck validates a lock method's call (R2.4, R6) and returns the
// current holder ("" when free).
func (s *Stash) lockCheck(method, holder string) (string, error) {
	if s.StashType != TypeLock {
		return "", fmt.Errorf("%s on %s stash %q: %w", method, s.StashType, s.Name, ErrInvalidStashType)
	}
	if holder == "" {
		return "", fmt.Errorf("%s of lock %q: holder is empty: %w", method, s.Name, ErrInvalidHolder)
	}
	return lockHolder(s.Value)
}

// mutated records an entity method: the PRD's in-memory version bump and
// the op the next Set records.
func (s *Stash) mutated(op string) {
	s.Version++
	s.op = op
}
