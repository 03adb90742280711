package projection

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// db is what a Store reads and writes through: a pgx pool, or one
// transaction (snapshotDB).
type db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Begin(ctx context.Context) (pgx.Tx, error)
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// snapshotDB is a Store's db inside Snapshot: every statement runs in the
// one REPEATABLE READ transaction, and a transaction a read begins in it
// (Range's, Peek's) is a savepoint of it, which sees the same snapshot.
type snapshotDB struct{ pgx.Tx }

// BeginTx begins a savepoint: the snapshot's isolation and access mode
// already hold for everything in it.
func (d snapshotDB) BeginTx(ctx context.Context, _ pgx.TxOptions) (pgx.Tx, error) {
	return d.Begin(ctx)
}

// positionSQL is the position a snapshot reflects: the offset before the
// projector's next one (-1 when it never applied the partition).
// Parameters: $1 topic, $2 partition.
const positionSQL = `SELECT coalesce((SELECT next_offset FROM projector_offsets WHERE topic = $1 AND partition = $2), 0) - 1`

// Snapshot runs read on a Store whose every statement reads one
// snapshot of the projection (a REPEATABLE READ, read-only transaction),
// and returns the position that snapshot reflects: the projector stores
// a partition's next offset in the transaction that applies the events
// before it (Apply), so a snapshot holds exactly the events of partition
// at offsets up to the one before projector_offsets.next_offset, and
// none after. The position is read by the transaction's first statement,
// which is what takes a REPEATABLE READ snapshot: read's statements see
// the same one. Read-only, it never conflicts with the projector; it
// holds back vacuum only as long as read runs.
//
// A snapshot holds one of the pool's connections while read runs, and
// the writer reads every page (listings, scans, histories, collections)
// in one: so at most half the pool's connections (snapshotConns) are
// held by snapshots at once, the others wait for one to end (or ctx),
// shared fairly among the readers ctx names (WithReader, snapshotGate).
// The rest are for what must not wait behind pages: the write path's
// batch reads, reads of single keys, the projector's offsets. (With
// pgxpool's default of 4 connections on a 2-CPU machine, one tenant's
// four listing slots could otherwise hold every connection of the
// writer: every partition's writes then waited behind its pages.)
func (s *Store) Snapshot(ctx context.Context, topic string, partition int32, read func(*Store) error) (contract.Cursor, error) {
	if s.snapshots != nil {
		reader := ReaderOf(ctx)
		if err := s.snapshots.acquire(ctx, reader); err != nil {
			return contract.Cursor{}, translate("snapshot", err)
		}
		defer s.snapshots.release(reader)
	}
	at := contract.Cursor{Partition: partition}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, positionSQL, topic, partition).Scan(&at.Offset); err != nil {
			return translate("snapshot", err)
		}
		view := &Store{pool: snapshotDB{tx}, arrays: s.arrays, history: s.history}
		return read(view)
	})
	if err != nil {
		var ce *contract.Error
		if errors.As(err, &ce) {
			return contract.Cursor{}, err
		}
		return contract.Cursor{}, translate("snapshot", err)
	}
	return at, nil
}

// snapshotConns is how many Snapshots a pool of maxConns connections
// serves at once: half of them, at least one.
func snapshotConns(maxConns int32) int { return max(1, int(maxConns)/2) }

// stateAtSQL reads a key's kv_entries row (a row of zeros when there is
// none) and the position of its partition, in one statement, so one
// snapshot. Parameters: $1 topic, $2 partition, $3 key.
const stateAtSQL = `WITH pos AS (` + positionSQL + `)
SELECT ` + stateColumns + `, (TABLE pos) FROM kv_entries WHERE key = $3
UNION ALL
SELECT $3, 0, false, NULL, NULL, 'epoch', NULL, '', '', '', '', '{}', (TABLE pos)
WHERE NOT EXISTS (SELECT FROM kv_entries WHERE key = $3)`

// StateAt is State together with the position of partition the
// projection had when it was read, in one statement: the state holds
// every event of key at an offset up to the position and none after.
func (s *Store) StateAt(ctx context.Context, topic string, partition int32, key string) (keystate.State, int64, error) {
	var pos int64
	st, err := scanStateCached(s.pool.QueryRow(ctx, stateAtSQL, topic, partition, key), nil, &pos)
	if err != nil {
		return keystate.State{}, 0, translate("state", err)
	}
	if st.Version == 0 {
		return keystate.State{}, pos, nil
	}
	return st, pos, nil
}

// Position is the position of partition the projection reflects (the
// projector's next offset less one; -1 before its first event). In a
// Store of Snapshot it is the snapshot's own.
func (s *Store) Position(ctx context.Context, topic string, partition int32) (int64, error) {
	var pos int64
	if err := s.pool.QueryRow(ctx, positionSQL, topic, partition).Scan(&pos); err != nil {
		return 0, translate("position", err)
	}
	return pos, nil
}

// LookupAt is Lookup of keys' states together with the position of
// partition the projection had when it read them, in one snapshot: each
// state holds every event of its key at an offset up to the position and
// none after (a batch get's keys of one partition).
func (s *Store) LookupAt(ctx context.Context, topic string, partition int32, keys []string) (Found, int64, error) {
	var found Found
	at, err := s.Snapshot(ctx, topic, partition, func(v *Store) (err error) {
		found, err = v.Lookup(ctx, keys, nil, nil)
		return err
	})
	return found, at.Offset, err
}
