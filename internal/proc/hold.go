package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// HoldConn plays a client that holds a server's connection: it sends
// request (raw HTTP/1.1, possibly incomplete) on a new connection to
// addr (host:port), reads nothing for stall, then reads until the server
// closes the connection, and returns the first bytes it read (the status
// line, when there is an answer). It is an error when the server still
// holds the connection after within, counted from the request, or ctx
// ends first.
func HoldConn(ctx context.Context, addr, request string, stall, within time.Duration) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	start := time.Now()
	if _, err := io.WriteString(conn, request); err != nil {
		return "", err
	}
	select { // the client stalls: this is the behaviour played
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(stall):
	}
	conn.SetReadDeadline(start.Add(within))
	head := make([]byte, 64)
	n, _ := io.ReadFull(conn, head)
	_, err = io.Copy(io.Discard, conn)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		if ctx.Err() != nil {
			return string(head[:n]), ctx.Err()
		}
		return string(head[:n]), fmt.Errorf("the server still holds the connection %s after the request", time.Since(start).Round(time.Millisecond))
	}
	return string(head[:n]), nil
}
