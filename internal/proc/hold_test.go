package proc

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestHoldConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 64)
				n, _ := c.Read(buf)
				if strings.HasPrefix(string(buf[:n]), "CLOSE") {
					c.Write([]byte("HTTP/1.1 200 OK\r\n\r\n"))
					c.Close()
				}
				// HOLD: never closed by the server.
			}()
		}
	}()
	t.Run("OKClosedByTheServer", func(t *testing.T) {
		head, err := HoldConn(context.Background(), ln.Addr().String(), "CLOSE", 0, 5*time.Second)
		if err != nil || !strings.HasPrefix(head, "HTTP/1.1 200") {
			t.Errorf("got %q, %v", head, err)
		}
	})
	t.Run("ErrHeld", func(t *testing.T) {
		if _, err := HoldConn(context.Background(), ln.Addr().String(), "HOLD", 0, 200*time.Millisecond); err == nil {
			t.Error("no error for a connection the server holds")
		}
	})
}
