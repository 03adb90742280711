// Package keystate holds the state of a key as the server keeps it: what
// the projection stores of each key (its kv_entries row) and what the
// write rules (package decide) decide on. It is not part of the API: a
// client sees a key only as the contract.Entry a read answers. The
// package imports the standard library and contract only, so that
// decide, which must not depend on Postgres, can use it.
package keystate

import (
	"time"

	"github.com/eskv/eskv/contract"
)

// State is what is known of a key: the version of its last event and, when
// the key exists, its entry. A key that never existed has Version 0; a
// deleted or expired key keeps its last version, so a re-create continues
// from it and versions never go back.
type State struct {
	Version       int64
	Live          bool
	Entry         contract.Entry
	RequestDigest string
}

// FromEvent returns the key's state after the event e.
func FromEvent(e *contract.Event) State {
	s := State{Version: e.Version, Live: e.Live(), RequestDigest: e.RequestDigest}
	if s.Live {
		s.Entry = e.Entry()
	} else {
		s.Entry = contract.Entry{Key: e.Key, Version: e.Version, UpdatedAt: e.TS, LastWriter: e.Principal, RequestID: e.RequestID}
	}
	return s
}

// Visible returns the entry a read sees at now, or nil when the key is
// absent (never written, deleted, or past its expiry).
func (s *State) Visible(now time.Time) *contract.Entry {
	if !s.Live || s.Entry.Expired(now) {
		return nil
	}
	e := s.Entry
	return &e
}
