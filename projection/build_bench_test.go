package projection

import (
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/internal/benchdata"
)

// cas18aBatch returns what the projector applies of one poll under
// figure 18a of eskvbench once it paces itself (projector's
// cas18aRecords): 64 CAS events of 64 keys with {"client":i,"seq":n}
// values over 4 partitions, two Kafka transactions of 8 events per
// partition closed by their markers, decoded from their records as the
// projector decodes them (Raw set).
func cas18aBatch(tb testing.TB) []Applied {
	tb.Helper()
	const keys, parts, perTxn = 64, 4, 8
	ts := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	var batch []Applied
	for part := range int32(parts) {
		var offset int64
		for txn := range keys / parts / perTxn {
			for i := range perTxn {
				k := int(part)*keys/parts + txn*perTxn + i
				e := benchdata.CAS18aEvent(k, 8, ts)
				raw, err := codec.MarshalEvent(&e)
				if err != nil {
					tb.Fatal(err)
				}
				d, verbatim, err := codec.UnmarshalRecord(raw)
				if err != nil || !verbatim {
					tb.Fatalf("decode: verbatim %v, %v", verbatim, err)
				}
				batch = append(batch, Applied{Partition: part, Offset: offset, Event: d, Raw: raw})
				offset++
			}
			batch = append(batch, Applied{Partition: part, Offset: offset, Marker: true})
			offset++
		}
	}
	return batch
}

// paramTypes matches the parameters' casts in a statement ($1::text[]).
var paramTypes = regexp.MustCompile(`\$(\d+)::(\w+(\[\])?)`)

// statementDescription describes sql's parameters as Postgres would
// (their OIDs, from the casts every parameter of Apply's statements
// has), for pgx's encoding without a server.
func statementDescription(tb testing.TB, m *pgtype.Map, sql string) *pgconn.StatementDescription {
	tb.Helper()
	var oids []uint32
	for _, match := range paramTypes.FindAllStringSubmatch(sql, -1) {
		n, _ := strconv.Atoi(match[1])
		name := map[string]string{"int": "int4", "bigint": "int8", "bool": "bool", "text": "text", "timestamptz": "timestamptz"}[match[2][:len(match[2])-len(match[3])]]
		if match[3] != "" {
			name = "_" + name // pgx's name of the array type
		}
		t, ok := m.TypeForName(name)
		if !ok {
			tb.Fatalf("no type %s%s", name, match[3])
		}
		for len(oids) < n {
			oids = append(oids, 0)
		}
		oids[n-1] = t.OID
	}
	for i, oid := range oids {
		if oid == 0 {
			tb.Fatalf("parameter $%d has no cast", i+1)
		}
	}
	return &pgconn.StatementDescription{SQL: sql, ParamOIDs: oids}
}

// BenchmarkApplyBatchBuild is Apply's work in the projector's process
// before the round trip, on one poll of figure 18a (cas18aBatch):
// building the statements (applyBatch) and pgx's encoding of their
// parameters (ExtendedQueryBuilder.Build, as the pool's cached
// statements run it). PgxArrays passes pgx the plain slices, as Apply
// did before pgarrays.go.
func BenchmarkApplyBatchBuild(b *testing.B) {
	b.Run("Arrays", func(b *testing.B) { benchApplyBatchBuild(b, true) })
	b.Run("PgxArrays", func(b *testing.B) { benchApplyBatchBuild(b, false) })
}

func benchApplyBatchBuild(b *testing.B, arrays bool) {
	batch := cas18aBatch(b)
	m := pgtype.NewMap()
	sds := map[string]*pgconn.StatementDescription{}
	var eqb pgx.ExtendedQueryBuilder
	var sc applyScratch // as Apply's, from one Apply to the next
	b.ReportAllocs()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		sc.arrays = arrays
		pb, err := sc.build("kv.changes", batch, HistoryJSONB, &declarations{absent: true})
		if err != nil {
			b.Fatal(err)
		}
		for _, q := range pb.QueuedQueries {
			sd := sds[q.SQL]
			if sd == nil {
				sd = statementDescription(b, m, q.SQL)
				sds[q.SQL] = sd
			}
			if err := eqb.Build(m, sd, q.Arguments); err != nil {
				b.Fatal(err)
			}
		}
		sc.release()
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	n := float64(b.N * 64)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/event")
}
