package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os/exec"
	"strings"
	"time"
)

// The network of -net-faults: every writer, projector and the broker run
// in a network namespace of their own, joined by veth pairs to one bridge
// in the harness's namespace (the host's), on a /24 of 10.200-249.x drawn
// at random. The host side holds three addresses: the clients' (.1, the
// harness's requests leave from it), Postgres' (.2, a forwarder to the
// machine's Postgres, which listens on loopback only) and ClickHouse's
// (.3, likewise).
// The broker is .4, the other nodes .10 and up.
//
// A cut is a blackhole route inside one namespace to one address: the
// namespace sends nothing there (no netem or netfilter needed), so a TCP
// connection between them stalls, and a new one is refused at once. A
// route in the writer's namespace to the broker cuts both directions of
// their connections; one in the broker's namespace to the writer only
// lets the writer's requests through, their answers lost (one way).

const (
	hostClients    = 1 // the harness's clients
	hostDB         = 2 // the Postgres forwarder
	hostClickHouse = 3 // the ClickHouse forwarder
	brokerHost     = 4
	firstNode      = 10
)

// netlab is the run's bridge, namespaces and Postgres forwarder.
type netlab struct {
	id     string // names the bridge, namespaces and veths: ekv<id>...
	prefix string // "10.A.B."
	bridge string
	nodes  map[string]*netnode // by name: broker, writer-1, projector-2, ...
	next   int                 // the next node's host byte
	fwds   []net.Listener      // the forwarders to Postgres and ClickHouse
}

// netnode is one namespace and its address.
type netnode struct {
	name, ns, ip string
}

// newNetlab makes the bridge; Close removes everything it made.
func newNetlab(rng *rand.Rand) (_ *netlab, err error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("-net-faults needs iproute2's ip (apt-get install iproute2) and root")
	}
	l := &netlab{id: fmt.Sprintf("%04x", rng.IntN(1<<16)), nodes: map[string]*netnode{}, next: firstNode}
	l.prefix = fmt.Sprintf("10.%d.%d.", 200+rng.IntN(50), rng.IntN(256))
	l.bridge = "ekv" + l.id
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if err := ipCmd("link", "add", l.bridge, "type", "bridge"); err != nil {
		return nil, fmt.Errorf("-net-faults needs root to make network namespaces: %w", err)
	}
	for _, h := range []int{hostClients, hostDB, hostClickHouse} { // the first is the source of the host's packets
		if err := ipCmd("addr", "add", l.addr(h)+"/24", "dev", l.bridge); err != nil {
			return nil, err
		}
	}
	if err := ipCmd("link", "set", l.bridge, "up"); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *netlab) addr(host int) string { return fmt.Sprintf("%s%d", l.prefix, host) }

// clientsIP is the address the harness's requests come from.
func (l *netlab) clientsIP() string { return l.addr(hostClients) }

// add makes the namespace of node name, with its address.
func (l *netlab) add(name string) (*netnode, error) {
	host := l.next
	if name == "broker" {
		host = brokerHost
	} else {
		l.next++
	}
	n := &netnode{name: name, ns: fmt.Sprintf("ekv%s-%d", l.id, host), ip: l.addr(host)}
	outer, inner := fmt.Sprintf("ekv%sh%d", l.id, host), fmt.Sprintf("ekv%sn%d", l.id, host)
	steps := [][]string{
		{"netns", "add", n.ns},
		{"link", "add", outer, "type", "veth", "peer", "name", inner},
		{"link", "set", inner, "netns", n.ns},
		{"link", "set", outer, "master", l.bridge},
		{"link", "set", outer, "up"},
		{"-n", n.ns, "addr", "add", n.ip + "/24", "dev", inner},
		{"-n", n.ns, "link", "set", inner, "up"},
		{"-n", n.ns, "link", "set", "lo", "up"},
	}
	l.nodes[name] = n // removed by Close even when a step fails
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// forward forwards port of l's host address host to target (a server
// on the machine's loopback) and returns the address.
func (l *netlab) forward(host int, target string) (string, error) {
	_, port, err := net.SplitHostPort(target)
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(l.addr(host), port))
	if err != nil {
		return "", err
	}
	l.fwds = append(l.fwds, ln)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go pipe(c, target)
		}
	}()
	return ln.Addr().String(), nil
}

// pipe copies between c and a new connection to target until either
// side closes.
func pipe(c net.Conn, target string) {
	defer c.Close()
	u, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
}

// cut adds a blackhole route in from's namespace to the address dst.
func (l *netlab) cut(from *netnode, dst string) error {
	return ipCmd("-n", from.ns, "route", "add", "blackhole", dst+"/32")
}

// heal removes the route cut added.
func (l *netlab) heal(from *netnode, dst string) error {
	return ipCmd("-n", from.ns, "route", "del", "blackhole", dst+"/32")
}

// Close removes the namespaces (their veths go with them), the bridge and
// the forwarder.
func (l *netlab) Close() {
	for _, ln := range l.fwds {
		ln.Close()
	}
	for _, n := range l.nodes {
		_ = ipCmd("netns", "del", n.ns)
	}
	_ = ipCmd("link", "del", l.bridge)
}

// ipCmd runs ip with args, its output in the error.
func ipCmd(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
