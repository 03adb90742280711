package projection

import (
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Apply passes its rows to Postgres as arrays, one per column (unnest),
// in pgx's binary format. pgx encodes a []string, []int64 or []time.Time
// through pgtype.FlatArray, whose Index boxes every element into an
// interface: an allocation per string, large integer and time, and for
// []*string and []*time.Time a reflective dereference and an allocation
// each. Under figure 18a that was most of the projector's allocations
// (29 of the 41 per event of BenchmarkApplyBatchBuild) and a third of its
// time building a batch, 2026-11-24. The array types below are the same
// parameters as pgx's ArrayCodec reads them (pgtype.ArrayGetter): their
// Index returns a pointer to the element, which fits in an interface
// without an allocation, and the pointer type is one of pgtype's valuer
// interfaces, which the element's codec encodes as it encodes the plain
// value (the same bytes: pgtype's own plans for string, int64 and
// time.Time go through the same Text, Int8 and Timestamptz values). A nil
// slice is still a NULL array, a nil pointer a NULL element.

// describes reports whether pool's statements are described by Postgres
// before pgx encodes their parameters (the default exec mode caches
// them), which the arrays below need: they encode for the parameter's
// type only, and in the modes that do not describe (exec, simple
// protocol, which a connection pooler may ask for) pgx encodes a
// parameter for the type of its Go value, which it only knows of plain
// slices.
func describes(pool *pgxpool.Pool) bool {
	if pool == nil {
		return false
	}
	switch pool.Config().ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeDescribeExec:
		return true
	}
	return false
}

// arrayArgs replaces, in args, the slices pgx would encode with an
// allocation per element by their arrays below; other arguments are left
// as they are.
func arrayArgs(args []any) {
	for i, a := range args {
		if arr := asArray(a, nil); arr != nil {
			args[i] = arr
		}
	}
}

// asArray returns a as one of the arrays below, taken from slab when it
// is not nil, or nil when a is none of the slices they stand for.
func asArray(a any, slab *arraySlab) any {
	if slab == nil {
		slab = new(arraySlab)
	}
	switch v := a.(type) {
	case []string:
		return slabbed(&slab.text, textArray{s: v})
	case []*string:
		return slabbed(&slab.nullText, nullTextArray{s: v})
	case []int64:
		return slabbed(&slab.int8, int8Array{s: v})
	case []time.Time:
		return slabbed(&slab.time, timeArray{s: v})
	case []*time.Time:
		return slabbed(&slab.nullTime, nullTimeArray{s: v})
	}
	return nil
}

// arraySlab holds the arrays of an Apply's parameters (applyScratch), so
// that passing one costs no allocation: a pointer fits in an interface,
// where a slice header or a dimension slice each took one. A pointer
// into a slab that append has since moved from still points at its
// array.
type arraySlab struct {
	text     []textArray
	nullText []nullTextArray
	int8     []int8Array
	time     []timeArray
	nullTime []nullTimeArray
}

func slabbed[T any](slab *[]T, a T) *T {
	*slab = append(*slab, a)
	return &(*slab)[len(*slab)-1]
}

// reset empties the slab for the next Apply, keeping its room.
func (s *arraySlab) reset() {
	s.text = reuse(s.text, 0)
	s.nullText = reuse(s.nullText, 0)
	s.int8 = reuse(s.int8, 0)
	s.time = reuse(s.time, 0)
	s.nullTime = reuse(s.nullTime, 0)
}

// batchArrays applies arrayArgs to every statement queued in b, its
// arrays from slab.
func batchArrays(b *pgx.Batch, slab *arraySlab) {
	for _, q := range b.QueuedQueries {
		for i, a := range q.Arguments {
			if arr := asArray(a, slab); arr != nil {
				q.Arguments[i] = arr
			}
		}
	}
}

// dims are the dimensions of a one-dimensional array of n elements, nil
// (a NULL array) when the slice is nil, as pgtype.FlatArray says them,
// in d's room.
func (d *arrayDims) of(isNil bool, n int) []pgtype.ArrayDimension {
	if isNil {
		return nil
	}
	d.d[0] = pgtype.ArrayDimension{Length: int32(n), LowerBound: 1}
	return d.d[:]
}

// arrayDims is the room of an array's Dimensions.
type arrayDims struct{ d [1]pgtype.ArrayDimension }

type (
	textArray struct {
		s []string
		arrayDims
	}
	nullTextArray struct {
		s []*string
		arrayDims
	}
	int8Array struct {
		s []int64
		arrayDims
	}
	timeArray struct {
		s []time.Time
		arrayDims
	}
	nullTimeArray struct {
		s []*time.Time
		arrayDims
	}

	textElem string
	int8Elem int64
	timeElem time.Time
)

func (e *textElem) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: string(*e), Valid: true}, nil
}

func (e *int8Elem) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*e), Valid: true}, nil
}

func (e *timeElem) TimestamptzValue() (pgtype.Timestamptz, error) {
	return pgtype.Timestamptz{Time: time.Time(*e), Valid: true}, nil
}

func (a *textArray) Dimensions() []pgtype.ArrayDimension { return a.of(a.s == nil, len(a.s)) }
func (a *textArray) Index(i int) any                     { return (*textElem)(&a.s[i]) }
func (a *textArray) IndexType() any                      { return (*textElem)(nil) }

func (a *nullTextArray) Dimensions() []pgtype.ArrayDimension { return a.of(a.s == nil, len(a.s)) }
func (a *nullTextArray) Index(i int) any                     { return (*textElem)(a.s[i]) }
func (a *nullTextArray) IndexType() any                      { return (*textElem)(nil) }

func (a *int8Array) Dimensions() []pgtype.ArrayDimension { return a.of(a.s == nil, len(a.s)) }
func (a *int8Array) Index(i int) any                     { return (*int8Elem)(&a.s[i]) }
func (a *int8Array) IndexType() any                      { return (*int8Elem)(nil) }

func (a *timeArray) Dimensions() []pgtype.ArrayDimension { return a.of(a.s == nil, len(a.s)) }
func (a *timeArray) Index(i int) any                     { return (*timeElem)(&a.s[i]) }
func (a *timeArray) IndexType() any                      { return (*timeElem)(nil) }

func (a *nullTimeArray) Dimensions() []pgtype.ArrayDimension { return a.of(a.s == nil, len(a.s)) }
func (a *nullTimeArray) Index(i int) any                     { return (*timeElem)(a.s[i]) }
func (a *nullTimeArray) IndexType() any                      { return (*timeElem)(nil) }
