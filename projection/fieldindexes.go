package projection

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eskv/eskv/contract"
)

// Declared field indexes (migration 00017). kv_fields holds the rows of
// the fields each project declares in its reserved key
// (contract.FieldIndexesKey) and no others. Apply keeps kv_field_indexes,
// the declarations as the projector read them, in step with those keys'
// events, and writes the kv_fields rows of declared fields only; a scope
// that declares nothing costs Apply no kv_fields statement at all.
//
// A ready field's rows are a pure function of kv_entries and the
// declaration: the declared field's kv_value_fields row of every live
// entry of the scope. So the order of a batch's events does not matter:
// Apply writes each key's rows for the union of the fields declared
// before the batch and in it, and a field the batch declares starts
// building, which Backfill completes from kv_entries whatever Apply wrote.
//
// Rows of a field no longer declared are cleared by Backfill, a step at
// a time (kv_field_drops, migration 00020; writeFields reads and writes
// a key's rows of the fields its scope declares only). Until then they
// are never read, since a scan reads kv_fields only for a field declared and
// ready, and a field declared again is ready only after Backfill has
// replaced every row of it in the scope, key range by key range,
// leftovers included.

// fieldIndexCache is what Apply remembers of kv_field_indexes: the fields
// declared per scope (sorted, possibly none). It may be stale after
// another projector applied a declaration (a rebalance): every Apply
// checks what it used in its own transaction (kv_field_indexes_check),
// and a mismatch makes it forget and read again.
type fieldIndexCache struct {
	mu sync.Mutex
	m  map[string][]string
}

// maxCachedScopes bounds the cache: past it, it starts over.
const maxCachedScopes = 100_000

// errDeclarationsChanged is the SQLSTATE kv_field_indexes_check raises.
const errDeclarationsChanged = "EK001"

// declarations are the fields declared in a batch's scopes before it,
// and how Apply checks them.
type declarations struct {
	// fields per scope; absent: the projection has no kv_field_indexes
	// (not migrated past 00016): nothing is declared, nothing checked.
	fields map[string][]string
	absent bool
	// scopes, wantScopes and wantFields are kv_field_indexes_check's
	// arguments.
	scopes, wantScopes, wantFields []string
}

// declared returns the fields declared in scopes (sorted, distinct),
// reading those it does not remember from kv_field_indexes.
func (s *Store) declared(ctx context.Context, scopes []string) (declarations, error) {
	d := declarations{fields: make(map[string][]string, len(scopes)), scopes: scopes}
	var missing []string
	s.indexes.mu.Lock()
	for _, sc := range scopes {
		if f, ok := s.indexes.m[sc]; ok {
			d.fields[sc] = f
		} else {
			missing = append(missing, sc)
		}
	}
	s.indexes.mu.Unlock()
	if len(missing) > 0 {
		read, err := s.readDeclarations(ctx, missing)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
			return declarations{absent: true}, nil
		}
		if err != nil {
			return declarations{}, translate("apply: read field indexes", err)
		}
		s.indexes.mu.Lock()
		if s.indexes.m == nil || len(s.indexes.m) > maxCachedScopes {
			s.indexes.m = make(map[string][]string)
		}
		for _, sc := range missing {
			s.indexes.m[sc] = read[sc]
			d.fields[sc] = read[sc]
		}
		s.indexes.mu.Unlock()
	}
	for _, sc := range scopes {
		for _, f := range d.fields[sc] {
			d.wantScopes, d.wantFields = append(d.wantScopes, sc), append(d.wantFields, f)
		}
	}
	if d.wantScopes == nil {
		d.wantScopes, d.wantFields = []string{}, []string{}
	}
	return d, nil
}

// readDeclarations reads the fields declared in scopes.
func (s *Store) readDeclarations(ctx context.Context, scopes []string) (map[string][]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT scope, field FROM kv_field_indexes WHERE scope = ANY($1) ORDER BY scope, field`, scopes)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string)
	var scope, field string
	_, err = pgx.ForEachRow(rows, []any{&scope, &field}, func() error {
		out[scope] = append(out[scope], field)
		return nil
	})
	return out, err
}

// forget drops what the cache remembers of scopes (nil: of all).
func (s *Store) forget(scopes []string) {
	s.indexes.mu.Lock()
	defer s.indexes.mu.Unlock()
	if scopes == nil {
		s.indexes.m = nil
		return
	}
	for _, sc := range scopes {
		delete(s.indexes.m, sc)
	}
}

// declarationsChanged reports whether err is kv_field_indexes_check's.
func declarationsChanged(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == errDeclarationsChanged
}

// batchScopes returns the distinct scopes of batch's events, sorted.
func batchScopes(batch []Applied, dst []string) []string {
	dst = dst[:0]
	for i := range batch {
		if !batch[i].Marker {
			dst = append(dst, batch[i].Event.Scope)
		}
	}
	slices.Sort(dst)
	return slices.Compact(dst)
}

// declaredIn returns the fields a declaration event e leaves declared:
// those of its value for a put, none for a delete or an expiry. A value
// that is no declaration (written before the writer refused such values)
// declares nothing.
func declaredIn(e *contract.Event) []string {
	if !e.Live() {
		return []string{}
	}
	fi, err := contract.ParseFieldIndexes(e.After)
	if err != nil {
		return []string{}
	}
	f := slices.Clone(fi.Fields)
	slices.Sort(f)
	return f
}

// writeDeclaration brings kv_field_indexes to the declaration of a
// scope's reserved key when the event that declared it is the version
// kv_entries now holds ($1 key, $2 version; a replay of an older one
// changes nothing): $3 scope, $4 the fields, $5 the partition. Fields no
// longer declared go, and their kv_fields rows are to be cleared
// (kv_field_drops, Backfill); new ones start building (backfill_after
// ”), and are no longer to be cleared; those declared already keep
// their state.
const writeDeclaration = `
WITH cur AS (
    SELECT FROM kv_entries WHERE key = $1 AND version = $2
), gone AS (
    DELETE FROM kv_field_indexes WHERE scope = $3 AND field <> ALL ($4::text[]) AND EXISTS (SELECT FROM cur)
    RETURNING field
), dropped AS (
    INSERT INTO kv_field_drops (scope, field, partition, cleared_to)
    SELECT $3, field, $5, '' FROM gone
    ON CONFLICT (scope, field) DO UPDATE SET partition = excluded.partition, cleared_to = ''
), back AS (
    DELETE FROM kv_field_drops WHERE scope = $3 AND field = ANY ($4::text[]) AND EXISTS (SELECT FROM cur)
)
INSERT INTO kv_field_indexes (scope, field, partition, backfill_after)
SELECT $3, f, $5, '' FROM unnest($4::text[]) AS f WHERE EXISTS (SELECT FROM cur)
ON CONFLICT (scope, field) DO NOTHING`

// declaredSet is a scope's fields for one Apply: those declared before
// the batch and in it.
func (sc *applyScratch) declaredSet(scope string) []string {
	return sc.effective[scope]
}

// effectiveDeclarations fills sc.effective from d and the batch's
// declaration events, and sc.decl with the statements' arguments.
func (sc *applyScratch) effectiveDeclarations(batch []Applied, d *declarations) {
	clear(sc.effective)
	if sc.effective == nil {
		sc.effective = make(map[string][]string)
	}
	for scope, f := range d.fields {
		if len(f) > 0 {
			sc.effective[scope] = f
		}
	}
	sc.decl = sc.decl[:0]
	for _, i := range sc.hist {
		a := &batch[i]
		e := &a.Event
		if !contract.IsFieldIndexesKey(e.Key) {
			continue
		}
		f := declaredIn(e)
		if len(f) > 0 {
			u := append(slices.Clone(sc.effective[e.Scope]), f...)
			slices.Sort(u)
			sc.effective[e.Scope] = slices.Compact(u)
		}
		if n := len(sc.decl); n > 0 && sc.decl[n-1].key == e.Key {
			sc.decl[n-1] = declArgs{e.Key, e.Version, e.Scope, f, a.Partition} // hist is in (key, version) order
		} else {
			sc.decl = append(sc.decl, declArgs{e.Key, e.Version, e.Scope, f, a.Partition})
		}
	}
}

// declArgs are writeDeclaration's arguments for a key's latest event.
type declArgs struct {
	key       string
	version   int64
	scope     string
	fields    []string
	partition int32
}

// has reports whether the sorted fields hold name.
func has(fields []string, name string) bool {
	_, ok := slices.BinarySearch(fields, name)
	return ok
}

// BackfillStep is how many keys of a building field one Backfill step
// covers.
const BackfillStep = 2000

// Backfill takes one step of building a declared field of one of the
// partitions parts (kv_field_indexes.backfill_after set): the next up to
// step keys of the field's scope after backfill_after, in key order, in
// one transaction that replaces the field's kv_fields rows in that key
// range (leftovers included) with those kv_entries gives, and moves
// backfill_after past them, to NULL (ready) once the scope's keys are
// done. It reports whether it found a field to build (or to clear,
// below). A projector calls it beside its applies, one step at a time,
// so that a project of millions of keys never holds the batches back
// for long.
//
// Apply may write the same keys meanwhile, so the step and the Applies
// of the field's scope exclude each other: the step first takes the
// declaration's row (FOR NO KEY UPDATE), and moves on only when it still
// names the point the step started from (a declaration dropped or
// changed meanwhile, or another projector's step, makes this one roll
// back); every Apply of a scope with declarations takes their rows FOR
// SHARE (kv_field_indexes_check, migration 00018) before it writes any
// kv_fields row. A step therefore waits for the Applies of its scope
// that hold them, then sees what they committed; an Apply that comes
// later waits for the step and then writes its keys' rows over the
// step's. The step takes no lock on kv_entries, so the two cannot wait
// for each other in a cycle. (Before, the step locked the keys it read
// FOR SHARE instead, and a key an Apply was creating as it read them
// went unlocked: a patch of it could land between the step's
// statements, and the step wrote the key's row from the older value
// over the Apply's.)
//
// With no field to build, it takes a step of clearing the rows of a
// field no longer declared instead (clearStep).
func (s *Store) Backfill(ctx context.Context, parts []int32, step int) (bool, error) {
	found, err := s.stepOn(ctx, "backfill", `SELECT scope, field, backfill_after FROM kv_field_indexes
WHERE backfill_after IS NOT NULL AND partition = ANY ($1) ORDER BY scope, field LIMIT 1`, parts,
		func(tx pgx.Tx, scope, field, at string) error { return backfillStep(ctx, tx, scope, field, at, step) })
	if found || err != nil {
		return found, err
	}
	return s.stepOn(ctx, "clear field index", `SELECT scope, field, cleared_to FROM kv_field_drops
WHERE partition = ANY ($1) ORDER BY scope, field LIMIT 1`, parts,
		func(tx pgx.Tx, scope, field, at string) error { return clearStep(ctx, tx, scope, field, at, step) })
}

// stepOn runs step in a transaction of its own on the first scope,
// field and point that pick selects among the partitions parts ($1),
// and reports whether it found one. A step whose row moved meanwhile
// (errBackfillMoved) rolls back, and counts as found.
func (s *Store) stepOn(ctx context.Context, what, pick string, parts []int32, step func(tx pgx.Tx, scope, field, at string) error) (bool, error) {
	var scope, field, at string
	err := s.pool.QueryRow(ctx, pick, parts).Scan(&scope, &field, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, translate(what, err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return step(tx, scope, field, at) })
	if errors.Is(err, errBackfillMoved) {
		return true, nil
	}
	return true, translate(what, err)
}

// errBackfillMoved rolls a Backfill step back whose declaration changed.
var errBackfillMoved = errors.New("the field's declaration changed meanwhile")

// backfillStep is Backfill's transaction for field of scope, from the key
// after.
func backfillStep(ctx context.Context, tx pgx.Tx, scope, field, after string, step int) error {
	var at *string
	err := tx.QueryRow(ctx, `SELECT backfill_after FROM kv_field_indexes WHERE scope = $1 AND field = $2 FOR NO KEY UPDATE`,
		scope, field).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (at == nil || *at != after)) {
		return errBackfillMoved
	}
	if err != nil {
		return err
	}
	lo, end := max(after, scope+"/"), scope+"0" // '0' follows '/'
	rows, err := tx.Query(ctx, `SELECT key FROM kv_entries WHERE key > $1 AND key < $2 ORDER BY key LIMIT $3`, lo, end, step)
	if err != nil {
		return err
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	hi, next := end, (*string)(nil) // the range (lo, hi]; NULL: ready
	if len(keys) == step {
		hi = keys[len(keys)-1]
		next = &hi
	}
	const in = `key > $1 AND key <= $2 AND key < $3`
	if _, err := tx.Exec(ctx, `DELETE FROM kv_fields WHERE field = $4 AND `+in, lo, hi, end, field); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `
INSERT INTO kv_fields (key, field, type, num, str, expires_at)
SELECT e.key, f.field, f.type, f.num, f.str, e.expires_at
FROM kv_entries e CROSS JOIN LATERAL kv_value_fields(e.value::jsonb) AS f
WHERE e.live AND e.`+in+` AND f.field = $4`,
		lo, hi, end, field); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE kv_field_indexes SET backfill_after = $3 WHERE scope = $1 AND field = $2`, scope, field, next)
	return err
}

// clearStep is Backfill's transaction when no field is left to build:
// for a field a scope of its partitions no longer declares
// (kv_field_drops), it deletes the next up to step kv_fields rows of
// field in scope after the key to, in key order, and moves cleared_to
// past them, or removes the field's kv_field_drops row once none is
// left. It first takes that row (FOR UPDATE) and goes on only if it
// still names the point the step started from: a declaration of the
// field meanwhile removed it (the field's build then replaces its rows),
// or another projector's step moved it. No Apply writes rows of a field
// its scope does not declare, so the step and the applies need not
// exclude each other otherwise.
func clearStep(ctx context.Context, tx pgx.Tx, scope, field, to string, step int) error {
	var at string
	err := tx.QueryRow(ctx, `SELECT cleared_to FROM kv_field_drops WHERE scope = $1 AND field = $2 FOR UPDATE`,
		scope, field).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && at != to) {
		return errBackfillMoved
	}
	if err != nil {
		return err
	}
	lo, end := max(to, scope+"/"), scope+"0" // '0' follows '/'
	var hi *string
	if err := tx.QueryRow(ctx, `SELECT max(key) FROM (
    SELECT key FROM kv_fields WHERE field = $1 AND key > $2 AND key < $3 ORDER BY key LIMIT $4) k`,
		field, lo, end, step).Scan(&hi); err != nil {
		return err
	}
	if hi == nil {
		_, err := tx.Exec(ctx, `DELETE FROM kv_field_drops WHERE scope = $1 AND field = $2`, scope, field)
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM kv_fields WHERE field = $1 AND key > $2 AND key <= $3`, field, lo, *hi); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE kv_field_drops SET cleared_to = $3 WHERE scope = $1 AND field = $2`, scope, field, *hi)
	return err
}

// FieldIndex is a declared field of a scope and its state.
type FieldIndex struct {
	Field string
	// Ready: every key's rows are written; scans read them. Otherwise
	// the field is building, BackfilledTo the last key done ("" before
	// the first).
	Ready        bool
	BackfilledTo string
}

// FieldIndexes returns the fields scope declares as the projection has
// applied them, in field order.
func (s *Store) FieldIndexes(ctx context.Context, scope string) ([]FieldIndex, error) {
	rows, err := s.pool.Query(ctx, `SELECT field, backfill_after FROM kv_field_indexes WHERE scope = $1 ORDER BY field`, scope)
	if err != nil {
		return nil, translate("field indexes", err)
	}
	out := []FieldIndex{}
	var fi FieldIndex
	var after *string
	_, err = pgx.ForEachRow(rows, []any{&fi.Field, &after}, func() error {
		fi.Ready, fi.BackfilledTo = after == nil, ""
		if after != nil {
			fi.BackfilledTo = *after
		}
		out = append(out, fi)
		return nil
	})
	return out, translate("field indexes", err)
}
