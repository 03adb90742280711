package service

import (
	"encoding/json"
	"errors"
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
	// lingering bounds what each remote address's closing connections
	// are read for (linger).
	lingering lingerBudgets
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
		return &limitedConn{Conn: c, addr: h.Name, l: l, release: func() { l.gate.Release(h, 1) }}, nil
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
		_ = l.linger(c, remoteIP(c.RemoteAddr()))
	}()
}

// Lingering close bounds (linger): how long, and how much of what the
// client still sends, a closing connection reads and drops before it
// closes; what one remote address's closing connections may read in
// all (lingerRate a second, lingerBurst at once); and how many refused
// connections linger at once, beyond which they are closed at once.
const (
	lingerTime          = 5 * time.Second
	lingerBytes         = 1 << 20
	lingerRate          = 8 << 20
	lingerBurst         = 8 << 20
	maxRefusedLingering = 256
)

// linger closes c, from remote address addr, as RFC 9112 (section 9.6)
// asks of a server: it closes c's write side (the answer is sent), then
// reads and drops what the client still sends until the client closes
// too, for at most lingerTime and lingerBytes, and only then closes c. A
// connection closed with bytes of the client's unread makes the kernel
// answer them with a reset, which can destroy the answer before the
// client reads it: the API answers a refused request (429, 413, 401)
// without reading its body and closes the connection, and a client still
// sending that body got "broken pipe" in place of its answer. A client
// that closes after the answer, as clients do, ends the wait at once,
// having cost nothing.
//
// What it reads comes out of addr's share (lingerBudgets): a client
// that sends a large body again and again to be refused (40 MB logins,
// one after the other) had each connection read 1 MiB before it closed,
// and at about 0.4 ms of CPU per MiB that took the writer 0.7 of a core
// (eskvchaos -hostile, the login bomb alone). Beyond its share an
// address's connections close at once: its client may meet the reset.
func (l *limitedListener) linger(c net.Conn, addr string) error {
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		return c.Close()
	}
	_ = cw.CloseWrite() // (net/http may have closed it already)
	_ = c.SetReadDeadline(time.Now().Add(lingerTime))
	// The first read, often a wait for the client's close, holds little
	// of the share and of memory: a pooled buffer is taken only once the
	// client is seen still sending.
	var first [1 << 10]byte
	buf := first[:]
	for read := 0; read < lingerBytes; {
		want := min(len(buf), lingerBytes-read)
		g := l.lingering.grant(addr, want)
		if g < want { // the share is spent: no reads of a few bytes
			l.lingering.refund(addr, g)
			break
		}
		n, err := c.Read(buf[:g])
		l.lingering.refund(addr, g-n)
		read += n
		if err != nil {
			break
		}
		if n > 0 && len(buf) == len(first) {
			pooled := lingerBufs.Get().(*[]byte)
			defer lingerBufs.Put(pooled)
			buf = *pooled
		}
	}
	return c.Close()
}

// lingerBufs are linger's read buffers: 16 KiB, half the read system
// calls of io.Discard's 8 KiB, held by a lingering connection only while
// its client sends (at most ESKV_HTTP_MAX_CONNECTIONS of them and the
// refused ones lingering: 36 MiB at the defaults).
var lingerBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// lingerBudgets is each remote address's share of lingering reads: a
// bucket of bytes per address, filled at lingerRate a second up to
// lingerBurst, from which each read takes what it may read before it
// reads (so connections of one address reading at once share it too)
// and gives back what it did not read. It keeps at most maxLingerAddrs
// addresses: when it holds that many, those whose bucket is full again
// are forgotten, and a new address finding none to forget gets no share.
type lingerBudgets struct {
	mu sync.Mutex
	of map[string]*lingerBucket
}

// lingerBucket is an address's share: tokens bytes at at.
type lingerBucket struct {
	tokens float64
	at     time.Time
}

// fill brings k up to now.
func (k *lingerBucket) fill(now time.Time) {
	k.tokens = min(lingerBurst, k.tokens+now.Sub(k.at).Seconds()*lingerRate)
	k.at = now
}

// maxLingerAddrs bounds the addresses lingerBudgets keeps.
const maxLingerAddrs = 4096

// grant takes up to want bytes of addr's share and returns how many: 0
// when it has none left.
func (b *lingerBudgets) grant(addr string, want int) int {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.of[addr]
	if k == nil {
		if b.of == nil {
			b.of = make(map[string]*lingerBucket)
		}
		if len(b.of) >= maxLingerAddrs {
			for a, other := range b.of {
				if other.fill(now); other.tokens >= lingerBurst {
					delete(b.of, a)
				}
			}
			if len(b.of) >= maxLingerAddrs {
				return 0
			}
		}
		k = &lingerBucket{tokens: lingerBurst, at: now}
		b.of[addr] = k
	}
	k.fill(now)
	g := min(want, int(k.tokens))
	k.tokens -= float64(g)
	return g
}

// refund gives back n bytes of a grant to addr that were not read.
func (b *lingerBudgets) refund(addr string, n int) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if k := b.of[addr]; k != nil {
		k.tokens = min(lingerBurst, k.tokens+float64(n))
	}
}

// limitedConn lingers at its first Close (linger, in a goroutine of its
// own), then gives its slot back: a lingering connection still holds one.
type limitedConn struct {
	net.Conn
	addr    string
	l       *limitedListener
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		go func() {
			_ = c.l.linger(c.Conn, c.addr)
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
