package schemas

import (
	"io/fs"
	"regexp"
	"testing"
)

// TestClickHouseDDLKeepsToOldAndNewReleases: the audit DDL avoids what
// ClickHouse 18.16 lacks (the tests run it there, and
// audit.TestMigrateOldTrail migrates an old trail) and what current
// releases refuse.
func TestClickHouseDDLKeepsToOldAndNewReleases(t *testing.T) {
	forbidden := regexp.MustCompile(`(?i)\b(ADD COLUMN IF NOT EXISTS|LowCardinality|DateTime64|Bool\b|Map\(|TTL\b|CODEC\(|Object\(|JSON\b)`)
	files, err := fs.Glob(ClickHouse, "clickhouse/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no DDL files: %v", err)
	}
	comment := regexp.MustCompile(`--[^\n]*`)
	for _, f := range files {
		b, err := ClickHouse.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := forbidden.Find(comment.ReplaceAll(b, nil)); m != nil {
			t.Errorf("%s uses %q, which ClickHouse 18.16 or a current release does not accept", f, m)
		}
	}
}
