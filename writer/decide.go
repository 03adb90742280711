// Package writer decides and appends writes: it owns partitions of
// kv.changes through a consumer group, fences older owners with a
// transactional producer per partition, catches up, validates
// compare-and-swap against an in-memory overlay and the Postgres
// projection, and commits groups of requests as one Kafka transaction.
package writer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/eskv/eskv/events"
)

// Request is one validated write.
type Request struct {
	Key  events.Key
	Kind events.Kind // put or delete
	// Value is the compact JSON of a put.
	Value json.RawMessage
	// ExpectedVersion is nil for an unconditional write; 0 means the key
	// must not exist.
	ExpectedVersion *int64
	TTLSeconds      int64
	Semantics       events.Semantics
	SpecRef         string
	RequestID       string
	Principal       string
}

// Digest identifies the request body, so that a retried requestId can be
// told from a reused one. The principal is part of it: another principal
// reusing a requestId is a different request.
func (r *Request) Digest() string {
	var ev string
	if r.ExpectedVersion != nil {
		ev = strconv.FormatInt(*r.ExpectedVersion, 10)
	}
	b, _ := json.Marshal([]any{string(r.Kind), r.Key.String(), r.Value, ev, r.TTLSeconds, r.Semantics, r.SpecRef, r.Principal})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Result is the outcome of an accepted write.
type Result struct {
	// Entry is the entry after a put; after a delete only Key and Version
	// are set.
	Entry events.Entry
	// Replayed is true when the request repeated the last write with the
	// same requestId and body, so nothing new was written.
	Replayed bool
}

// decision is what Decide concluded.
type decision struct {
	event    *events.Event    // to append, when accepted
	conflict *events.Conflict // to record in kv.conflicts, when rejected by CAS
	err      error            // the answer when not accepted
	result   Result           // the answer when accepted or replayed
}

// Decide applies the write rules to a request given the key's current
// state. It is pure: now is the decision time and epoch the writer's
// fencing epoch.
func Decide(cur events.State, r *Request, now time.Time, epoch int64) decision {
	key := r.Key.String()
	visible := cur.Visible(now)
	digest := r.Digest()

	if r.RequestID != "" && cur.Version > 0 && cur.Entry.RequestID == r.RequestID {
		if cur.RequestDigest == digest {
			res := Result{Entry: cur.Entry, Replayed: true}
			if !cur.Live {
				res.Entry = events.Entry{Key: key, Version: cur.Version}
			}
			return decision{result: res}
		}
		return conflictDecision(cur, visible, r, now, "request_id_reused",
			"requestId %q was already used for a different write of this key", r.RequestID)
	}

	var current int64
	if visible != nil {
		current = cur.Version
	}
	if r.ExpectedVersion != nil && *r.ExpectedVersion != current {
		return conflictDecision(cur, visible, r, now, "version_mismatch",
			"expected version %d, current version is %d", *r.ExpectedVersion, current)
	}

	ev := &events.Event{
		SchemaVersion: events.SchemaVersion,
		Key:           key,
		Scope:         r.Key.Scope(),
		Version:       cur.Version + 1,
		PrevVersion:   cur.Version,
		Before:        json.RawMessage("null"),
		After:         json.RawMessage("null"),
		RequestID:     r.RequestID,
		RequestDigest: digest,
		Principal:     r.Principal,
		SpecRef:       r.SpecRef,
		TS:            now,
		WriterEpoch:   epoch,
	}
	if cur.Live {
		ev.Before = cur.Entry.Value
	}
	switch r.Kind {
	case events.KindDelete:
		if visible == nil {
			return decision{err: events.FieldErrorf(events.ENotFound, "key", "key %s does not exist", key)}
		}
		ev.Kind, ev.Op = events.KindDelete, events.OpDelete
		ev.CreatedAt = visible.CreatedAt
		ev.Semantics = visible.Semantics
		if ev.SpecRef == "" {
			ev.SpecRef = visible.SpecRef
		}
		return decision{event: ev, result: Result{Entry: events.Entry{Key: key, Version: ev.Version}}}
	default:
		ev.Kind, ev.After = events.KindPut, r.Value
		switch {
		case r.ExpectedVersion == nil:
			ev.Op = events.OpSet
		case *r.ExpectedVersion == 0:
			ev.Op = events.OpCreate
		default:
			ev.Op = events.OpCAS
		}
		ev.CreatedAt = now
		if visible != nil {
			ev.CreatedAt = visible.CreatedAt
		}
		ev.Semantics = r.Semantics
		ev.Semantics.TTLSeconds = r.TTLSeconds
		if r.TTLSeconds > 0 {
			exp := now.Add(time.Duration(r.TTLSeconds) * time.Second)
			ev.ExpiresAt = &exp
		}
		return decision{event: ev, result: Result{Entry: ev.Entry()}}
	}
}

func conflictDecision(cur events.State, visible *events.Entry, r *Request, now time.Time, reason, format string, args ...any) decision {
	var current int64
	currentValue := json.RawMessage("null")
	if visible != nil {
		current = cur.Version
		currentValue = visible.Value
	}
	var expected int64 = -1
	if r.ExpectedVersion != nil {
		expected = *r.ExpectedVersion
	}
	op := events.OpSet
	if r.Kind == events.KindDelete {
		op = events.OpDelete
	}
	id := uuid.Must(uuid.NewV7()).String()
	err := events.FieldErrorf(events.EConflict, "expectedVersion", format, args...)
	if reason == "request_id_reused" {
		err.Field = "requestId"
	}
	err.Current = visible
	err.CorrelationID = id
	attempted := r.Value
	if attempted == nil {
		attempted = json.RawMessage("null")
	}
	sem := r.Semantics
	if sem.Purpose == "" && visible != nil {
		sem = visible.Semantics
	}
	if sem.Purpose == "" {
		sem.Purpose = "other"
	}
	return decision{
		err: err,
		conflict: &events.Conflict{
			SchemaVersion:   events.SchemaVersion,
			ID:              id,
			Key:             r.Key.String(),
			Scope:           r.Key.Scope(),
			Op:              op,
			ExpectedVersion: expected,
			CurrentVersion:  current,
			Attempted:       attempted,
			Current:         currentValue,
			Semantics:       sem,
			SpecRef:         r.SpecRef,
			RequestID:       r.RequestID,
			Principal:       r.Principal,
			TS:              now,
			Reason:          reason,
		},
	}
}
