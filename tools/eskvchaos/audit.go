package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/eskv/eskv/internal/proc"
)

// verifyAudit runs auditor verify on the run's trail (ClickHouse reached
// directly, not through the namespaces) once the auditor committed up to
// the end of the topics: every row's hash, every chain, every row matched
// to its event in kv.changes and every event to its row. It returns
// verify's report line, and an error when verify failed.
func verifyAudit(ctx context.Context, s *stack) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.Bin, "auditor"), "verify", "-wait", "2m")
	cmd.Env = append(proc.BaseEnv(), s.auditEnv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	line := strings.TrimSpace(out.String())
	if err != nil {
		return line, fmt.Errorf("auditor verify: %w: %s", err, line)
	}
	return line, nil
}

// dropClickHouse drops the run's ClickHouse database.
func dropClickHouse(addr, db string) error {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Auth: clickhouse.Auth{Username: "default"},
		DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db)
}
