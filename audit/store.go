package audit

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/schemas"
)

// Default connection settings: the ClickHouse that scripts/ensure-clickhouse.sh
// starts for `make run`.
const (
	DefaultClickHouseAddr = "127.0.0.1:19000"
	DefaultDatabase       = "eskv"
)

// Options says how to reach ClickHouse, over the native protocol (the
// HTTP protocol does not work with ClickHouse 18.16).
type Options struct {
	Addr     string // host:port of the native protocol; default DefaultClickHouseAddr
	Database string // default DefaultDatabase; created when missing
	Username string // default "default"
	Password string
	// TLS, when set, connects over TLS (the server's secure native port,
	// 9440 by default).
	TLS *tls.Config
	// Log receives the driver's warnings (nil: none).
	Log *slog.Logger
}

// Store is the audit trail in one ClickHouse database.
type Store struct {
	conn driver.Conn
	own  bool
}

// queryTimeout bounds every statement but batch inserts and verification
// reads, which get longer deadlines of their own.
const queryTimeout = 30 * time.Second

var databaseName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Open connects to ClickHouse, creating the database when missing. It does
// not apply the DDL: call Migrate.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Addr == "" {
		o.Addr = DefaultClickHouseAddr
	}
	if o.Database == "" {
		o.Database = DefaultDatabase
	}
	if o.Username == "" {
		o.Username = "default"
	}
	if !databaseName.MatchString(o.Database) {
		return nil, fmt.Errorf("clickhouse database name %q must match %s", o.Database, databaseName)
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	bootOpts := o
	bootOpts.Log = nil // one warning about the server's version is enough
	boot, err := open(bootOpts, "default")
	if err != nil {
		return nil, err
	}
	defer boot.Close()
	if err := boot.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+o.Database); err != nil {
		return nil, fmt.Errorf("clickhouse %s: create database %s: %w", o.Addr, o.Database, err)
	}
	conn, err := open(o, o.Database)
	if err != nil {
		return nil, err
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("clickhouse %s: %w", o.Addr, err)
	}
	return &Store{conn: conn, own: true}, nil
}

func open(o Options, database string) (driver.Conn, error) {
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:         []string{o.Addr},
		Auth:         clickhouse.Auth{Database: database, Username: o.Username, Password: o.Password},
		TLS:          o.TLS,
		DialTimeout:  5 * time.Second,
		ReadTimeout:  5 * time.Minute, // contexts carry the real deadlines
		MaxOpenConns: 8,
		Compression:  &clickhouse.Compression{Method: clickhouse.CompressionLZ4},
		Logger:       o.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: %w", o.Addr, err)
	}
	return conn, nil
}

// NewStore returns a store on an open connection whose default database
// holds (or will hold, after Migrate) the audit tables. Close does not
// close conn.
func NewStore(conn driver.Conn) *Store { return &Store{conn: conn} }

// Close closes the connection Open made.
func (s *Store) Close() error {
	if s.own {
		return s.conn.Close()
	}
	return nil
}

// Ping checks that ClickHouse answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	return s.conn.Ping(ctx)
}

// Migrate applies the DDL files of schemas.ClickHouse that the database
// has not recorded in audit_schema_migrations yet, in name order. Every
// step is idempotent (CREATE … IF NOT EXISTS, an ADD COLUMN of a column
// that exists counts as done), so a migration cut by a lost connection is
// run again, for up to 30 s: the client has been seen to hand out a pooled
// connection that was already closed.
func (s *Store) Migrate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	r := changelog.Retry{Base: 100 * time.Millisecond, Cap: time.Second, Max: 30 * time.Second, Retriable: connectionLost}
	return r.Do(ctx, s.migrate)
}

// connectionLost reports errors of a connection that closed under a call.
func connectionLost(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// Unreachable reports errors of a ClickHouse that cannot be reached: a
// dial refused or timed out, a connection lost under a call, or a call
// cut by its own deadline (a server that does not answer).
func Unreachable(err error) bool {
	_, dial := errors.AsType[*net.OpError](err)
	return dial || connectionLost(err) || errors.Is(err, context.DeadlineExceeded)
}

func (s *Store) migrate(ctx context.Context) error {
	if err := s.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS audit_schema_migrations (
		version UInt32, name String, applied_at DateTime
	) ENGINE = ReplacingMergeTree() ORDER BY version`); err != nil {
		return fmt.Errorf("migrate clickhouse: %w", err)
	}
	applied := map[uint32]bool{}
	rows, err := s.conn.Query(ctx, "SELECT DISTINCT version FROM audit_schema_migrations")
	if err != nil {
		return fmt.Errorf("migrate clickhouse: %w", err)
	}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("migrate clickhouse: %w", err)
		}
		applied[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrate clickhouse: %w", err)
	}
	files, err := fs.Glob(schemas.ClickHouse, "clickhouse/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(files)
	for _, f := range files {
		name := strings.TrimPrefix(f, "clickhouse/")
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.ParseUint(num, 10, 32)
		if err != nil {
			return fmt.Errorf("migrate clickhouse: file %s is not named NNNN_what.sql", name)
		}
		if applied[uint32(v)] {
			continue
		}
		b, err := schemas.ClickHouse.ReadFile(f)
		if err != nil {
			return err
		}
		for _, stmt := range Statements(string(b)) {
			if err := s.exec(ctx, stmt); err != nil {
				return fmt.Errorf("migrate clickhouse: %s: %w\n%s", name, err, stmt)
			}
		}
		batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO audit_schema_migrations (version, name, applied_at)")
		if err != nil {
			return fmt.Errorf("migrate clickhouse: %w", err)
		}
		if err := batch.Append(uint32(v), name, time.Now().UTC()); err != nil {
			return fmt.Errorf("migrate clickhouse: %w", err)
		}
		if err := batch.Send(); err != nil {
			return fmt.Errorf("migrate clickhouse: record %s: %w", name, err)
		}
	}
	return nil
}

// addColumn matches the ADD COLUMN statements of the DDL files.
var addColumn = regexp.MustCompile(`^ALTER TABLE (\w+) ADD COLUMN (\w+) `)

// exec runs one DDL statement. ClickHouse 18.16 has no ADD COLUMN IF NOT
// EXISTS: an ADD COLUMN whose column exists already (a migration
// interrupted after it, or run by two auditors at once) is done.
func (s *Store) exec(ctx context.Context, stmt string) error {
	err := s.conn.Exec(ctx, stmt)
	m := addColumn.FindStringSubmatch(stmt)
	if err == nil || m == nil {
		return err
	}
	var n uint64
	if qerr := s.conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = currentDatabase() AND table = ? AND name = ?",
		m[1], m[2]).Scan(&n); qerr != nil || n == 0 {
		return err
	}
	return nil
}

// Statements splits a DDL file into statements: each ends with a
// semicolon at the end of a line; "--" comments are dropped.
func Statements(sql string) []string {
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(sql))
	for sc.Scan() {
		line := strings.TrimRight(stripComment(sc.Text()), " \t")
		if strings.TrimSpace(line) == "" {
			continue
		}
		end := strings.HasSuffix(line, ";")
		cur.WriteString(strings.TrimSuffix(line, ";"))
		cur.WriteByte('\n')
		if end {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// stripComment drops a "--" comment that starts outside a quoted string.
func stripComment(line string) string {
	inQuote := false
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && inQuote:
			i++
		case line[i] == '\'':
			inQuote = !inQuote
		case !inQuote && strings.HasPrefix(line[i:], "--"):
			return line[:i]
		}
	}
	return line
}

const eventColumns = "ts, ts_us, tenant, project, key, version, prev_version, kind, op, purpose, producer, consumer_hints, " +
	"principal, directive, request_id, spec_ref, ttl_seconds, expires_at_us, before_hash, after_hash, hash_key_id, hash_scheme, " +
	"prev_chain_hash, chain_hash, kafka_partition, kafka_offset, txn_id, txn_size, element_op, element_hash, ingested_at"

const conflictColumns = "ts, ts_us, conflict_id, tenant, project, key, op, reason, purpose, producer, consumer_hints, " +
	"principal, directive, request_id, spec_ref, expected_version, current_version, attempted_hash, current_hash, hash_key_id, hash_scheme, " +
	"kafka_partition, kafka_offset, txn_id, txn_op, txn_size, ingested_at"

// insertTimeout bounds one batch insert.
const insertTimeout = 2 * time.Minute

// InsertEvents inserts rows into audit_events in one batch. Once it
// returns nil, ClickHouse has accepted every row.
func (s *Store) InsertEvents(ctx context.Context, rows []Row, now time.Time) error {
	if len(rows) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, insertTimeout)
	defer cancel()
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO audit_events ("+eventColumns+")")
	if err != nil {
		return unavailable("prepare insert into audit_events", err)
	}
	defer b.Abort()
	n := len(rows)
	var (
		ts        = make([]time.Time, n)
		tsUS      = make([]int64, n)
		tenant    = make([]string, n)
		project   = make([]string, n)
		key       = make([]string, n)
		version   = make([]int64, n)
		prev      = make([]int64, n)
		kind      = make([]string, n)
		op        = make([]string, n)
		purpose   = make([]string, n)
		producer  = make([]string, n)
		hints     = make([][]string, n)
		principal = make([]string, n)
		directive = make([]string, n)
		reqID     = make([]string, n)
		specRef   = make([]string, n)
		ttl       = make([]int64, n)
		expires   = make([]int64, n)
		before    = make([]string, n)
		after     = make([]string, n)
		keyID     = make([]string, n)
		scheme    = make([]uint8, n)
		prevChain = make([]string, n)
		chain     = make([]string, n)
		partition = make([]int32, n)
		offset    = make([]int64, n)
		txnID     = make([]string, n)
		txnSize   = make([]int32, n)
		elemOp    = make([]string, n)
		elemHash  = make([]string, n)
		ingested  = make([]time.Time, n)
	)
	now = now.UTC().Truncate(time.Second)
	for i := range rows {
		r := &rows[i]
		ts[i], tsUS[i] = r.TS.Truncate(time.Second), r.TS.UnixMicro()
		tenant[i], project[i], key[i] = r.Tenant, r.Project, r.Key
		version[i], prev[i] = r.Version, r.PrevVersion
		kind[i], op[i], purpose[i], producer[i] = r.Kind, r.Op, r.Purpose, r.Producer
		hints[i] = r.ConsumerHints
		if hints[i] == nil {
			hints[i] = []string{}
		}
		principal[i], directive[i], reqID[i], specRef[i] = r.Principal, r.Directive, r.RequestID, r.SpecRef
		ttl[i], expires[i] = r.TTLSeconds, r.ExpiresAtUS
		before[i], after[i], keyID[i], scheme[i] = r.BeforeHash, r.AfterHash, r.HashKeyID, uint8(r.HashScheme)
		prevChain[i], chain[i] = r.PrevChainHash, r.ChainHash
		partition[i], offset[i] = r.Partition, r.Offset
		txnID[i], txnSize[i] = r.TxnID, r.TxnSize
		elemOp[i], elemHash[i] = r.ElementOp, r.ElementHash
		ingested[i] = now
	}
	cols := []any{ts, tsUS, tenant, project, key, version, prev, kind, op, purpose, producer, hints,
		principal, directive, reqID, specRef, ttl, expires, before, after, keyID, scheme, prevChain, chain, partition, offset, txnID, txnSize, elemOp, elemHash, ingested}
	for i, c := range cols {
		if err := b.Column(i).Append(c); err != nil {
			return fmt.Errorf("insert into audit_events: column %d: %w", i, err)
		}
	}
	if err := b.Send(); err != nil {
		return unavailable("insert into audit_events", err)
	}
	return nil
}

// InsertConflicts inserts rows into audit_conflicts in one batch.
func (s *Store) InsertConflicts(ctx context.Context, rows []ConflictRow, now time.Time) error {
	if len(rows) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, insertTimeout)
	defer cancel()
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO audit_conflicts ("+conflictColumns+")")
	if err != nil {
		return unavailable("prepare insert into audit_conflicts", err)
	}
	defer b.Abort()
	now = now.UTC().Truncate(time.Second)
	for i := range rows {
		r := &rows[i]
		hints := r.ConsumerHints
		if hints == nil {
			hints = []string{}
		}
		if err := b.Append(r.TS.Truncate(time.Second), r.TS.UnixMicro(), r.ConflictID, r.Tenant, r.Project, r.Key,
			r.Op, r.Reason, r.Purpose, r.Producer, hints, r.Principal, r.Directive, r.RequestID, r.SpecRef,
			r.ExpectedVersion, r.CurrentVersion, r.AttemptedHash, r.CurrentHash, r.HashKeyID, uint8(r.HashScheme),
			r.Partition, r.Offset, r.TxnID, r.TxnOp, r.TxnSize, now); err != nil {
			return fmt.Errorf("insert into audit_conflicts: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return unavailable("insert into audit_conflicts", err)
	}
	return nil
}

// ErrUnavailable marks ClickHouse errors worth retrying: the server is
// down, overloaded or the connection broke.
var ErrUnavailable = errors.New("clickhouse unavailable")

// unavailable wraps err as ErrUnavailable unless ClickHouse answered it
// with an exception, which a retry would not change.
func unavailable(what string, err error) error {
	if _, ok := errors.AsType[*clickhouse.Exception](err); ok {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
}

// tipChunk bounds the (key, version) pairs of one lookup query, so the
// query stays below ClickHouse's max_query_size (256 KiB).
const tipChunk = 1000

// KeyVersion is the identity of an event and of its row.
type KeyVersion struct {
	Key     string
	Version int64
}

// ChainHashes returns the chain hash of each wanted (key, version) that has
// a row; pairs without one are missing from the result.
func (s *Store) ChainHashes(ctx context.Context, want []KeyVersion) (map[KeyVersion]string, error) {
	out := make(map[KeyVersion]string, len(want))
	for chunk := range slices.Chunk(want, tipChunk) {
		sets := make([]clickhouse.GroupSet, len(chunk))
		for i, kv := range chunk {
			sets[i] = clickhouse.GroupSet{Value: []any{kv.Key, kv.Version}}
		}
		if err := s.chainHashes(ctx, sets, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Store) chainHashes(ctx context.Context, sets []clickhouse.GroupSet, out map[KeyVersion]string) error {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	rows, err := s.conn.Query(ctx, "SELECT key, version, any(chain_hash) FROM audit_events WHERE (key, version) IN (?) GROUP BY key, version", sets)
	if err != nil {
		return unavailable("look up chain hashes", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kv KeyVersion
		var h string
		if err := rows.Scan(&kv.Key, &kv.Version, &h); err != nil {
			return err
		}
		out[kv] = h
	}
	return rows.Err()
}
