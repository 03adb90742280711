package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// RequestRef names a requestId used on a key.
type RequestRef struct {
	Key       string
	RequestID string
}

// AppliedRequest is the newest event of a key that carried a requestId:
// its version and the digest of the request that produced it
// (decide: a write's digest), so a retry can be told from a reuse.
type AppliedRequest struct {
	Version int64
	Digest  string
	// Popped is the element the event popped when it is a pop (lpop,
	// rpop, qpop): a retried pop is answered as a replay with the value
	// (a queue item: data, receipt and deadline) the lost answer carried.
	Popped *contract.Element
	// After is a pop's event's metadata after it (the collection's
	// length or size then), so that the replay of an older pop answers
	// what the lost answer carried; nil for every other event.
	After json.RawMessage
	// At is when the event was written (its ts): a requestId is
	// remembered for a time as well as for a number of versions
	// (writer.RequestWindow).
	At time.Time
}

// requestsSQL finds, for each (key $1, requestId $2), the newest
// kv_history row that carried it: one probe of kv_history_request
// (migration 00012) for the rows written as HistoryText, which keep the
// requestId in request_id and the event as text, and one of
// kv_history_request_id (00005) for the rows written as HistoryJSONB
// (every row written before migration 00011), which keep the event as
// jsonb (event) and no request_id; each read
// backwards, the newer of the two answers. Each branch's predicate
// repeats its partial index's, so the planner may use it; a row of one
// format is never in the other's index. Only the answering row's event
// is parsed (event_text::jsonb), and a pop's element and metadata are
// read out of it (AppliedRequest.Popped and After), whether or not the
// pop is the key's latest write.
//
// The second branch goes when no jsonb row is left and none is written
// any more (00011 says how): with kv_history_request_id dropped it would
// scan the key's whole history.
const requestsSQL = `SELECT t.k, t.rid, h.version, coalesce(h.ev->>'requestDigest', ''),
    CASE WHEN h.op IN ('lpop', 'rpop', 'qpop') THEN h.ev->'element' END,
    CASE WHEN h.op IN ('lpop', 'rpop', 'qpop') THEN h.ev->'after' END,
    h.ts
FROM unnest($1::text[], $2::text[]) AS t(k, rid)
CROSS JOIN LATERAL (
    SELECT version, op, ev, ts FROM (
        (SELECT version, op, event_text::jsonb AS ev, ts FROM kv_history
        WHERE key = t.k AND request_id IS NOT NULL AND request_id = t.rid
        ORDER BY version DESC
        LIMIT 1)
        UNION ALL
        (SELECT version, op, event, ts FROM kv_history
        WHERE key = t.k AND event ? 'requestId' AND event->>'requestId' = t.rid
        ORDER BY version DESC
        LIMIT 1)
    ) u
    ORDER BY version DESC
    LIMIT 1
) h`

// StatesAndRequests returns, in one round trip, the states of keys (as
// States does: every key is in the map, never written ones with the zero
// State) and, for each of refs that the projected history holds, the
// newest event of the key that carried the requestId (AppliedRequest).
// Refs the history does not hold are absent from the second map. The
// writer decides a batch of writes on both (writer.decideRequestID):
// the history is how a requestId older than the key's latest write is
// remembered once its event is projected.
func (s *Store) StatesAndRequests(ctx context.Context, keys []string, refs []RequestRef) (map[string]keystate.State, map[RequestRef]AppliedRequest, error) {
	f, err := s.Lookup(ctx, keys, refs, nil)
	return f.States, f.Requests, err
}

// Found is what Lookup found.
type Found struct {
	States   map[string]keystate.State
	Requests map[RequestRef]AppliedRequest
	// Elements holds the version of each asked kv_elements row that
	// exists (absent: no row).
	Elements map[ElementRef]int64
	// Values holds the value of each asked list element that exists.
	Values map[ElementRef]json.RawMessage
	// Heads holds, per asked queue, its first ready items in serving
	// order (HeadRef); Dedups the newest item pushed with each asked
	// dedupId (absent: none); Items the asked queue items that exist.
	Heads  map[string][]contract.Element
	Dedups map[DedupRef]contract.Element
	Items  map[ElementRef]contract.Element
}

// Query is what a batch of writes asks the projection in one round
// trip (Find).
type Query struct {
	Keys     []string
	Requests []RequestRef
	// Elements are set members and list positions to probe.
	Elements []ElementRef
	// Heads, Dedups and Items are queue reads (queues.go).
	Heads  []HeadRef
	Dedups []DedupRef
	Items  []ElementRef
}

// Lookup is StatesAndRequests and, in the same round trip, the
// kv_elements rows of elems (the members a batch of sadd and srem
// decides on): everything a batch of writes is decided on that the
// writer's overlay does not hold.
func (s *Store) Lookup(ctx context.Context, keys []string, refs []RequestRef, elems []ElementRef) (Found, error) {
	return s.Find(ctx, Query{Keys: keys, Requests: refs, Elements: elems})
}

// Find answers q in one round trip: the statements are sent together.
func (s *Store) Find(ctx context.Context, q Query) (Found, error) {
	keys, refs, elems := q.Keys, q.Requests, q.Elements
	f := Found{
		States:   make(map[string]keystate.State, len(keys)),
		Requests: make(map[RequestRef]AppliedRequest),
		Elements: make(map[ElementRef]int64),
		Values:   make(map[ElementRef]json.RawMessage),
		Heads:    make(map[string][]contract.Element),
		Dedups:   make(map[DedupRef]contract.Element),
		Items:    make(map[ElementRef]contract.Element),
	}
	b := &pgx.Batch{}
	if len(keys) > 0 {
		b.Queue(statesSQL, keys)
	}
	if len(refs) > 0 {
		ks, ids := make([]string, len(refs)), make([]string, len(refs))
		for i, r := range refs {
			ks[i], ids[i] = r.Key, r.RequestID
		}
		b.Queue(requestsSQL, ks, ids)
	}
	if len(elems) > 0 {
		cs, ms := make([]string, len(elems)), make([]string, len(elems))
		for i, e := range elems {
			cs[i], ms[i] = e.Collection, e.Member
		}
		b.Queue(membersSQL, cs, ms)
	}
	queueQueries(b, q)
	if b.Len() > 0 {
		br := s.pool.SendBatch(ctx, b)
		err := readBatch(br, len(keys) > 0, len(refs) > 0, f.States, f.Requests)
		if err == nil && len(elems) > 0 {
			var rows pgx.Rows
			if rows, err = br.Query(); err == nil {
				err = readMembers(rows, f.Elements, f.Values)
			}
		}
		if err == nil {
			err = readQueueQueries(br, q, &f)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return Found{}, translate("states", err)
		}
	}
	for _, k := range keys {
		if _, ok := f.States[k]; !ok {
			f.States[k] = keystate.State{}
		}
	}
	return f, nil
}

// readBatch reads the answers of StatesAndRequests' batch.
func readBatch(br pgx.BatchResults, withStates, withRefs bool, states map[string]keystate.State, applied map[RequestRef]AppliedRequest) error {
	if withStates {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if err := readStates(rows, states); err != nil {
			return err
		}
	}
	if !withRefs {
		return nil
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r RequestRef
		var a AppliedRequest
		var popped, after []byte
		if err := rows.Scan(&r.Key, &r.RequestID, &a.Version, &a.Digest, &popped, &after, &a.At); err != nil {
			return err
		}
		if popped != nil {
			a.Popped = new(contract.Element)
			if err := json.Unmarshal(popped, a.Popped); err != nil {
				return fmt.Errorf("popped element of %s version %d: %w", r.Key, a.Version, err)
			}
		}
		if after != nil {
			a.After = json.RawMessage(after)
		}
		applied[r] = a
	}
	return rows.Err()
}
