package audit_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/eskv/eskv/audit"
)

// TestUnreachable: what a service waits out at start (a dial refused, a
// connection lost, a server that does not answer in time) against what
// it must not (a refused password, a bad statement).
func TestUnreachable(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("clickhouse 127.0.0.1:1: create database x: %w", dial), true},
		{fmt.Errorf("read: %w", io.EOF), true},
		{fmt.Errorf("ping: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{&clickhouse.Exception{Code: 516, Message: "default: Authentication failed"}, false},
		{fmt.Errorf("migrate clickhouse: %w", &clickhouse.Exception{Code: 62, Message: "Syntax error"}), false},
		{context.Canceled, false},
	} {
		if got := audit.Unreachable(c.err); got != c.want {
			t.Errorf("Unreachable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
