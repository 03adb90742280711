package schemas

import "embed"

// ClickHouse holds the DDL of the audit trail under clickhouse/, named
// NNNN_what.sql and applied in order by audit.Migrate. Each file keeps to
// what ClickHouse 18.16 and current releases both accept.
//
//go:embed clickhouse/*.sql
var ClickHouse embed.FS
