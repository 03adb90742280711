package main

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/internal/proc"
)

// The faults of dependencies and of the network (netns.go): a broker
// paused, Postgres stalled, and cuts between the services.

// pauseBroker stops the broker for a draw of -dependency-stall: every
// writer's produce, fence and read, and every projector's fetch, hang.
func (n *nemesis) pauseBroker() {
	d := n.draw(n.c.depStall)
	b := n.s.Broker
	b.Pause()
	i := n.record(faultPauseBroker, "SIGSTOP", true)
	n.s.logf("SIGSTOP devbroker (pid %d) for %s", b.PID(), d.Round(time.Millisecond))
	go n.recover(b, d, func() {
		b.Resume()
		n.healed(i)
		n.s.logf("SIGCONT devbroker")
	})
}

// stallTables are the sets of projection tables a Postgres stall locks:
// the entries alone (reads that miss the overlay, the projector's
// upserts), or every table the services use.
var stallTables = [][]string{
	{"kv_entries"},
	{"kv_entries", "kv_history", "kv_elements", "kv_fields", "projector_offsets", "writer_owners"},
}

// stallPostgres holds an ACCESS EXCLUSIVE lock on projection tables of
// the run's database for a draw of -dependency-stall: every statement on
// them waits. Only the run's database stops answering, never the
// machine's server (stopping backends could hold a lock the server's
// other databases need).
func (n *nemesis) stallPostgres(ctx context.Context) {
	d := n.draw(n.c.depStall)
	tables := stallTables[n.intn(len(stallTables))]
	conn, tx, err := lockTables(ctx, n.s.DBURL, tables)
	if err != nil {
		n.s.logf("stall postgres: %v", err)
		go n.recover(n.db, 0, func() {})
		return
	}
	i := n.record(faultStallPostgres, "lock "+strings.Join(tables, ", "), true)
	n.s.logf("LOCK %s IN ACCESS EXCLUSIVE MODE for %s", strings.Join(tables, ", "), d.Round(time.Millisecond))
	// Not recover: the lock is let go even when the stack is closing,
	// or dropping the database would wait for it.
	go func() {
		defer n.pending.Done()
		select {
		case <-time.After(d):
		case <-n.s.closing:
		}
		_ = tx.Rollback(context.Background())
		conn.Close(context.Background())
		n.healed(i)
		n.s.logf("unlocked %s", strings.Join(tables, ", "))
		n.mu.Lock()
		delete(n.busy, n.db)
		n.mu.Unlock()
	}()
}

// lockTables opens a connection to url and locks tables in a transaction
// it leaves open.
func lockTables(ctx context.Context, url string, tables []string) (*pgx.Conn, pgx.Tx, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, "LOCK TABLE "+strings.Join(tables, ", ")+" IN ACCESS EXCLUSIVE MODE")
	}
	if err != nil {
		conn.Close(context.Background())
		return nil, nil, err
	}
	return conn, tx, nil
}

// route is a cut: a blackhole route in from's namespace to the address
// to.
type route struct {
	from *netnode
	to   string
}

// cut cuts target (a writer, or a projector for cut-projector-broker)
// off as kind says for a draw of -net-cut, then heals. A writer cut off
// from the broker is recorded for the zombie check like a paused one:
// after the heal it must commit nothing under an epoch its partitions
// moved past meanwhile.
func (n *nemesis) cut(ctx context.Context, kind string, target *proc.Proc) {
	l, node, broker := n.s.net, n.s.nodes[target], n.s.net.nodes["broker"]
	d := n.draw(n.c.netCut)
	writers := []*proc.Proc{target}
	var (
		routes []route
		detail string
		other  *proc.Proc
		zombie *logcheck.Pause
	)
	switch kind {
	case faultCutWriterBroker:
		switch n.intn(3) {
		case 0:
			routes, detail = []route{{node, broker.ip}, {broker, node.ip}}, "both ways"
		case 1:
			routes, detail = []route{{node, broker.ip}}, "the writer's packets to the broker"
		default:
			routes, detail = []route{{broker, node.ip}}, "the broker's packets to the writer (its requests arrive, the answers do not)"
		}
		before, _ := n.owners(ctx)
		zombie = &logcheck.Pause{Writer: instanceID(target), Proc: target.Name + " (cut from the broker)", Before: before, Stopped: time.Now()}
	case faultCutWriterPostgres:
		routes, detail = []route{{node, l.addr(hostDB)}}, "the writer's packets to Postgres"
	case faultCutClientWriter:
		routes, detail = []route{{node, l.clientsIP()}}, "the writer's answers to the clients"
	case faultCutWriterWriter:
		n.mu.Lock()
		for _, w := range n.healthy(n.s.writers) {
			if w != target {
				other = w
				n.busy[w] = true
				break
			}
		}
		n.mu.Unlock()
		if other == nil {
			go n.recover(target, 0, func() {})
			return
		}
		on := n.s.nodes[other]
		routes, detail, writers = []route{{node, on.ip}, {on, node.ip}}, "from "+other.Name, []*proc.Proc{target, other}
	case faultCutProjectorBroker:
		routes, detail, writers = []route{{node, broker.ip}}, "the projector's packets to the broker", nil
	case faultCutAuditorClickHouse:
		routes, detail, writers = []route{{node, l.addr(hostClickHouse)}}, "the auditor's packets to ClickHouse", nil
	}
	heal := func() {
		for _, r := range routes {
			if err := l.heal(r.from, r.to); err != nil {
				n.s.logf("heal: %v", err)
			}
		}
		if other != nil {
			n.mu.Lock()
			delete(n.busy, other)
			n.mu.Unlock()
		}
	}
	for i, r := range routes {
		if err := l.cut(r.from, r.to); err != nil {
			n.s.logf("%s of %s: %v", kind, target.Name, err)
			routes = routes[:i]
			go n.recover(target, 0, heal)
			return
		}
	}
	i := n.record(kind, detail, false, writers...)
	n.s.logf("%s %s (%s): %s, for %s", kind, target.Name, node.ip, detail, d.Round(time.Millisecond))
	go n.recover(target, d, func() {
		heal()
		n.healed(i)
		n.s.logf("healed %s of %s", kind, target.Name)
		if zombie != nil {
			after, err := n.owners(context.Background())
			zombie.After, zombie.Resumed = after, time.Now()
			zombie.Complete = err == nil && zombie.Before != nil
			n.mu.Lock()
			n.pauses = append(n.pauses, *zombie)
			n.mu.Unlock()
			n.s.logf("%s: partitions moved meanwhile: %v", zombie.Proc, sortedKeys(zombie.Moved()))
		}
	})
}
