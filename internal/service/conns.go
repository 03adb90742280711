package service

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/admission"
)

// The settings of the connection bounds, as refusals name them.
const (
	SettingMaxConnections           = "ESKV_HTTP_MAX_CONNECTIONS"
	SettingMaxConnectionsPerAddress = "ESKV_HTTP_MAX_CONNECTIONS_PER_ADDRESS"
)

// refusedConnWrite bounds the write of a refused connection's answer: it
// fits in any socket buffer, so only a peer that is gone makes it wait.
const refusedConnWrite = 100 * time.Millisecond

// limitedListener bounds the connections a listener's server holds open:
// in all, and from one remote IP address. A connection beyond either is
// answered 429 too_many_requests (naming the setting), before anything of
// it is read, in the accepting goroutine, and closed (lingering: linger).
type limitedListener struct {
	net.Listener
	gate *admission.Gate
	// refusedLingering counts the refused connections lingering now
	// (refuse): they hold no slot of the gate, so they are bounded apart.
	refusedLingering atomic.Int64
}

// limitConns returns ln bounded by l's connection limits, its refusals
// counted in refusals (nil counts nothing).
func limitConns(ln net.Listener, l HTTPLimits, refusals *prometheus.CounterVec) net.Listener {
	l = l.orDefaults()
	return &limitedListener{Listener: ln, gate: admission.New(admission.Limit{
		Total: int64(l.MaxConnections), Each: int64(l.MaxConnectionsPerAddress),
		TotalSetting: SettingMaxConnections, EachSetting: SettingMaxConnectionsPerAddress,
	}, refusals)}
}

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		h := admission.Holder{Name: remoteIP(c.RemoteAddr()), Addr: true}
		if err := l.gate.Take(h, 1); err != nil {
			l.refuse(c, err)
			continue
		}
		return &limitedConn{Conn: c, release: func() { l.gate.Release(h, 1) }}, nil
	}
}

// remoteIP is the IP address of a peer (its whole address when it has no
// port).
func remoteIP(a net.Addr) string {
	s := a.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}

// refuse answers a connection the gate refused and closes it, lingering
// (linger) while fewer than maxRefusedLingering refused connections do.
func (l *limitedListener) refuse(c net.Conn, err error) {
	r, _ := errors.AsType[*admission.Refused](err)
	setting := SettingMaxConnections
	if r != nil {
		setting = r.Setting
	}
	whose := "this server's"
	if setting == SettingMaxConnectionsPerAddress {
		whose = "this address's"
	}
	body, _ := json.Marshal(contract.ErrorBody{Error: contract.ErrorDetail{Code: contract.ETooManyRequests, Field: setting, RetryAfterSeconds: 1,
		Message: whose + " open connections are at " + setting + "; retry"}})
	_ = c.SetWriteDeadline(time.Now().Add(refusedConnWrite))
	_, _ = c.Write([]byte("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)))
	if l.refusedLingering.Add(1) > maxRefusedLingering {
		l.refusedLingering.Add(-1)
		_ = c.Close()
		return
	}
	go func() {
		defer l.refusedLingering.Add(-1)
		_ = linger(c)
	}()
}

// Lingering close bounds (linger): how long, and how much of what the
// client still sends, a closing connection reads and drops before it
// closes; and how many refused connections linger at once, beyond which
// they are closed at once.
const (
	lingerTime          = 5 * time.Second
	lingerBytes         = 1 << 20
	maxRefusedLingering = 256
)

// linger closes c as RFC 9112 (section 9.6) asks of a server: it closes
// c's write side (the answer is sent), then reads and drops what the
// client still sends until the client closes too, for at most lingerTime
// and lingerBytes, and only then closes c. A connection closed with bytes
// of the client's unread makes the kernel answer them with a reset, which
// can destroy the answer before the client reads it: the API answers a
// refused request (429, 413, 401) without reading its body and closes
// the connection, and a client still sending that body got "broken pipe"
// in place of its answer. A client that closes after the answer, as
// clients do, ends the wait at once.
func linger(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite() // (net/http may have closed it already)
		_ = c.SetReadDeadline(time.Now().Add(lingerTime))
		_, _ = io.CopyN(io.Discard, c, lingerBytes)
	}
	return c.Close()
}

// limitedConn lingers at its first Close (linger, in a goroutine of its
// own), then gives its slot back: a lingering connection still holds one.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		go func() {
			_ = linger(c.Conn)
			c.release()
		}()
	})
	return nil
}

// CloseWrite half-closes the connection when it can: net/http does so
// before closing a connection whose request it did not read to its end,
// so that the client reads the answer before the close.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
