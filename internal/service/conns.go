package service

import (
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"
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
// answered 429 too_many_requests (naming the setting) and closed at once,
// before anything of it is read, in the accepting goroutine.
type limitedListener struct {
	net.Listener
	gate *admission.Gate
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
			refuseConn(c, err)
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

// refuseConn answers a connection the gate refused and closes it.
func refuseConn(c net.Conn, err error) {
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
	_ = c.Close()
}

// limitedConn gives its slot back once, at its first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
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
