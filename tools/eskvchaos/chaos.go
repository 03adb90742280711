package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/tools/linz"
)

// runChaos runs the clients while the nemesis injects faults, lets the
// stack heal, and checks what happened.
func runChaos(ctx context.Context, c config, s *stack, stdout, stderr io.Writer) error {
	r, err := faultPhase(ctx, c, s)
	if err != nil {
		return err
	}
	defer r.watchWorkload.stop() // drained and stopped by the check, unless it failed before
	defer r.informerWorkload.stop()
	if err := r.check(ctx, s); err != nil {
		return err
	}
	if err := r.save(); err != nil {
		fmt.Fprintf(stderr, "eskvchaos: save findings: %v\n", err)
	}
	r.print(stdout)
	if !r.ok() {
		return errChecksFailed
	}
	return nil
}

// faultPhase runs the clients and the owner timeline while the nemesis
// injects faults, waits for the stack to heal, and returns what it
// recorded.
func faultPhase(ctx context.Context, c config, s *stack) (*report, error) {
	var urls []string
	for _, w := range s.writers {
		urls = append(urls, w.URL)
	}
	keys := registerKeys(c.keys, s.topics.Partitions)
	cl := newClients(urls, s.token, keys, c.opTimeout, s.t0)
	if err := cl.declareScans(ctx, "start"); err != nil {
		return nil, err
	}
	cl.hist = newHistoryReads(urls, s.token, c.historyEvery, c.opTimeout)
	watches := newWatchWorkload(urls, s.token, keys, s.topics.Partitions, c.watchClients)
	watches.start(ctx, c.seed)
	informers := newInformerWorkload(urls, s.token, keys, s.topics.Partitions, c.informers)
	informers.start(ctx, c.seed)
	owners := newOwnerTimeline(s.t0)
	bg, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stopClients := make(chan struct{})
	wg.Go(func() { cl.run(c.clients, c.seed, stopClients) })
	tx := newTransfers(cl)
	wg.Go(func() { tx.run(c.txnClients, c.seed, stopClients) })
	sets := newSetWorkload(cl)
	wg.Go(func() { sets.run(c.setClients, c.seed, stopClients) })
	lists := newListWorkload(cl)
	wg.Go(func() { lists.run(c.listClients, c.seed, stopClients) })
	queues := newQueueWorkload(cl)
	wg.Go(func() { queues.run(c.queueClients, c.seed, stopClients) })
	locks := newLockWorkload(cl)
	wg.Go(func() { locks.run(c.lockClients, c.seed, stopClients) })
	sessions := newSessionWorkload(cl)
	wg.Go(func() { sessions.run(c.sessionClients, c.seed, stopClients) })
	wg.Go(func() { cl.redeclare(rand.New(rand.NewPCG(c.seed, 1<<40)), stopClients) })
	wg.Go(func() { owners.poll(bg, s.store, 100*time.Millisecond) })
	ready := newReadiness(s.writers)
	wg.Go(func() { ready.poll(bg, 100*time.Millisecond) })

	s.logf("fault phase: %s, seed %d, %d clients on %d keys, faults %s", c.duration, c.seed, c.clients, len(keys), strings.Join(c.faults, ","))
	nem := newNemesis(s, c)
	fctx, cancel := context.WithTimeout(ctx, c.duration)
	nem.run(fctx) // returns once every faulted process was restarted or resumed
	cancel()
	s.logf("fault phase over; waiting for every partition to have a ready owner")
	healErr := s.waitReady(ctx, 120*time.Second, false)
	if healErr == nil {
		// A few seconds of fault-free operation: the healed stack serves.
		pause(ctx.Done(), 2*time.Second)
	}
	close(stopClients)
	stop()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		watches.stop()
		informers.stop()
		return nil, fmt.Errorf("interrupted: %w", err)
	}
	r := &report{cfg: c, keys: keys, history: cl.history(), dir: s.Dir, owners: owners}
	r.changes, r.lists, r.failedLists = cl.listings()
	s.logf("clients stopped after %d operations; checking", len(r.history))
	r.faults, r.pauses = nem.report()
	r.avail = measureAvailability(nem.records, r.history, s.t0, s.topics.Partitions, owners, ready, s.writers)
	r.transfers = tx
	r.setWorkload = sets
	r.listWorkload = lists
	r.queueWorkload = queues
	r.lockWorkload = locks
	r.sessionWorkload = sessions
	r.watchWorkload = watches
	r.informerWorkload = informers
	r.historyReads = cl.hist
	r.exits = s.unexpectedExits()
	if healErr != nil {
		r.problems = append(r.problems, "the stack did not heal after the fault phase: "+healErr.Error())
	} else if err := locks.settle(ctx, s.DB, 30*time.Second); err != nil {
		r.problems = append(r.problems, err.Error())
	} else if err := sessions.settle(ctx, s.DB, 30*time.Second); err != nil {
		r.problems = append(r.problems, err.Error())
	} else if err := cl.declareScans(ctx, "end"); err != nil {
		r.problems = append(r.problems, err.Error())
	} else if n, err := cl.indexStatusSettled(ctx, 30*time.Second); err != nil {
		r.problems = append(r.problems, err.Error())
	} else {
		s.logf("index status: %d answers from %d writers, each at its declaration's version, the field ready", n, len(urls))
	}
	return r, nil
}

// committedIn returns the lookup linz.Resolve settles with: the version
// at which a CAS client's value (unique per write) committed to a key,
// and the version and kept value of a touch, by its requestId (unique per
// touch). A touch's event holds the value of an earlier write: it is not
// where that write committed.
func committedIn(evs []logcheck.Event) func(o linz.Op) (int64, string, bool) {
	type at struct {
		version int64
		value   string
	}
	written, touched := map[[2]string]int64{}, map[[2]string]at{}
	for _, e := range evs {
		var v string
		switch {
		case e.Event.Kind != contract.KindPut || json.Unmarshal(e.Event.After, &v) != nil:
		case e.Event.Op == contract.OpTouch:
			touched[[2]string{e.Event.Key, e.Event.RequestID}] = at{e.Event.Version, v}
		default:
			written[[2]string{e.Event.Key, v}] = e.Event.Version
		}
	}
	return func(o linz.Op) (int64, string, bool) {
		if o.In.Kind == linz.Touch {
			t, ok := touched[[2]string{o.In.Key, o.RequestID}]
			return t.version, t.value, ok
		}
		v, ok := written[[2]string{o.In.Key, o.In.Value}]
		return v, o.In.Value, ok
	}
}

// check checks the recorded history, the log and the projection.
func (r *report) check(ctx context.Context, s *stack) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	l, err := logcheck.Read(ctx, []string{s.Brokers}, s.topics)
	if err != nil {
		return fmt.Errorf("read kv.changes: %w", err)
	}
	r.log = l
	// The writes whose answer was lost are settled by the log, or the
	// search explodes with the cuts' unknown outcomes. The clients
	// stopped, and a writer never decides a call whose caller went (its
	// request's context ended), but a call cut from its client may be
	// decided until the writer's request deadline and its round commit
	// after that: such a late write takes effect after every recorded
	// operation, so leaving it out keeps the history linearizable, and
	// the projection's checks compare only what the log held when read
	// (logcheck.ProjectionFindings.NotCompared).
	settled := slices.Clone(r.history)
	r.settled, r.neverCommitted = linz.Resolve(settled, committedIn(l.Events))
	r.lin = linz.Check(settled, r.cfg.checkTimeout)
	r.stale = staleAnswers(r.history, s.topics.Partitions, r.owners, s.Dir)
	r.listing = linz.CheckListings(append(linz.Changes(r.history), r.changes...), r.lists)
	if r.lin.Result != porcupine.Ok {
		r.linPath = filepath.Join(s.Dir, "linearizability.html")
		if err := r.lin.Visualize(r.linPath); err != nil {
			r.problems = append(r.problems, "write the linearizability visualization: "+err.Error())
			r.linPath = ""
		}
	}
	r.logFindings = logcheck.Check(l.Events)
	r.acks = acknowledged(r.history)
	r.lost = logcheck.LostWrites(r.acks, l.Events)
	r.zombies = logcheck.Zombies(r.pauses, l.Events)
	r.checkReadPaths(ctx, l)
	if s.auditor != nil {
		var err error
		if r.audit, err = verifyAudit(ctx, s); err != nil {
			r.problems = append(r.problems, err.Error())
		}
	}
	if err := waitProjected(ctx, s, l, 2*time.Minute); err != nil {
		r.problems = append(r.problems, err.Error())
	} else if r.proj, err = checkProjection(ctx, s, l, r.acks); err != nil {
		return fmt.Errorf("check the projection: %w", err)
	} else if r.informers, err = checkInformers(ctx, s.store, r.informerWorkload.informers); err != nil {
		return fmt.Errorf("check the informers: %w", err)
	}
	// The projection's sums are read once it held the whole log
	// (r.proj.Rebuild is set then).
	if r.txn, err = r.transfers.check(ctx, l.Events, s.DB, r.proj.Rebuild != nil); err != nil {
		return fmt.Errorf("check the transactions: %w", err)
	}
	if r.sets, err = r.setWorkload.check(ctx, l.Events, s.DB, r.proj.Rebuild != nil); err != nil {
		return fmt.Errorf("check the sets: %w", err)
	}
	if r.listsFound, err = r.listWorkload.check(ctx, l.Events, s.DB, r.proj.Rebuild != nil); err != nil {
		return fmt.Errorf("check the lists: %w", err)
	}
	r.locks = r.lockWorkload.check(l.Events)
	r.sessions = r.sessionWorkload.check(l.Events)
	if r.queues, err = r.queueWorkload.check(ctx, l.Events, s.DB, r.proj.Rebuild != nil); err != nil {
		return fmt.Errorf("check the queues: %w", err)
	}
	r.checked = true
	return nil
}

// report is what a chaos run did and found.
type report struct {
	cfg     config
	keys    []string
	dir     string
	history []linz.Op
	faults  map[string]int
	avail   []availability
	audit   string // auditor verify's report, with -auditor
	pauses  []logcheck.Pause
	exits   []string
	owners  *ownerTimeline
	stale   []string

	// The listing workload and its check.
	changes     []linz.Change
	lists       []linz.Listing
	failedLists int
	listing     linz.ListingResult

	lin     linz.Result
	linPath string
	// settled and neverCommitted count the unknown writes the log
	// settled (linz.Resolve).
	settled, neverCommitted int
	log                     *logcheck.Log
	logFindings             logcheck.Findings
	acks                    []logcheck.Acked
	lost                    []string
	zombies                 logcheck.ZombieFindings
	proj                    projFindings
	checked                 bool
	problems                []string

	transfers *transfers // the transaction workload (txn.go)
	txn       txnFindings

	setWorkload *setWorkload // the set workload (sets.go)
	sets        setFindings

	listWorkload *listWorkload // the list workload (lists.go)
	listsFound   listFindings

	queueWorkload *queueWorkload // the queue workload (queues.go)
	queues        queueFindings
	lockWorkload  *lockWorkload // the lock workload (locks.go)
	locks         lockFindings
	// sessionWorkload is the session workload (sessions.go).
	sessionWorkload *sessionWorkload
	sessions        sessionFindings

	watchWorkload *watchWorkload // the watchers (watch.go)
	watch         watchFindings
	historyReads  *historyReads // the history reads (history.go)
	historyFound  historyFindings

	// The informers (informer.go), checked once the projection holds
	// the whole log.
	informerWorkload *informerWorkload
	informers        informerFindings
}

func (r *report) ok() bool {
	return r.checked && len(r.problems) == 0 && r.lin.Result == porcupine.Ok && len(r.lost) == 0 &&
		len(r.listing.Violations) == 0 &&
		len(r.proj.LostInProjection) == 0 && r.logFindings.VersionViolations() == 0 &&
		len(r.logFindings.ChainBreaks) == 0 && len(r.logFindings.EpochMismatches) == 0 &&
		len(r.logFindings.EpochRegressions) == 0 && len(r.zombies.Events) == 0 &&
		r.proj.diffCount() == 0 && len(r.exits) == 0 &&
		len(r.txn.violations()) == 0 && len(r.sets.violations()) == 0 &&
		len(r.listsFound.violations()) == 0 && len(r.queues.violations()) == 0 && len(r.locks.violations) == 0 && len(r.sessions.violations) == 0 &&
		len(r.watch.violations) == 0 && len(r.historyFound.violations) == 0 && len(r.informers.violations) == 0
}

// checkReadPaths lets the watchers reach the end of the log l (at most
// 20 s), stops them and checks what they received, and checks the
// history reads.
func (r *report) checkReadPaths(ctx context.Context, l *logcheck.Log) {
	drained := r.watchWorkload.drain(ctx, l.Events, 20*time.Second)
	acks := make([]keyVersion, 0, len(r.acks)+len(r.changes))
	for _, a := range r.acks {
		acks = append(acks, keyVersion{a.Key, a.Version})
	}
	for _, c := range r.changes {
		if c.Outcome == linz.OK {
			acks = append(acks, keyVersion{c.Key, c.Version})
		}
	}
	acks = append(acks, ackedVersions(&r.setWorkload.collectionWorkload, func(c setChange) keyVersion { return keyVersion{c.key, c.version} })...)
	acks = append(acks, ackedVersions(&r.listWorkload.collectionWorkload, func(c listChange) keyVersion { return keyVersion{c.key, c.version} })...)
	acks = append(acks, ackedVersions(&r.queueWorkload.collectionWorkload, func(c queueChange) keyVersion { return keyVersion{c.key, c.version} })...)
	r.watch = checkWatch(r.watchWorkload.watchers, l.Events, l.End, acks)
	r.watch.drained = drained
	r.informerWorkload.drain(ctx, l.Events, 20*time.Second)
	reads, failed, example := r.historyReads.snapshot()
	r.historyFound = checkHistory(reads, r.history, l.Events)
	r.historyFound.failed, r.historyFound.example = failed, example
}

// save writes the history and the findings to the run directory (kept when
// a check fails).
func (r *report) save() error {
	b, err := json.Marshal(r.history)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "history.json"), b, 0o644); err != nil {
		return err
	}
	if err := saveReadPaths(r.dir, r.watchWorkload, r.historyReads); err != nil {
		return err
	}
	b, err = json.Marshal(struct {
		Changes  []linz.Change  `json:"changes"`
		Listings []linz.Listing `json:"listings"`
	}{r.changes, r.lists})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "listings.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "owners.txt"), []byte(strings.Join(r.owners.lines(), "\n")+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "projector-rebuild-diff.txt"), []byte(r.proj.Tool.output), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.dir, "stale-answers.txt"), []byte(strings.Join(r.stale, "\n")+"\n"), 0o644)
}

func (r *report) print(w io.Writer) {
	r.printRun(w)
	if r.log == nil {
		return
	}
	r.printLog(w)
	r.watch.print(w)
	r.informers.print(w)
	r.historyFound.print(w)
	r.printProjection(w)
	if r.audit != "" {
		fmt.Fprintf(w, "audit trail: %s\n", r.audit)
	}
	r.txn.print(w)
	r.sets.print(w)
	r.listsFound.print(w)
	r.queues.print(w)
	r.locks.print(w)
	r.sessions.print(w)
	for _, p := range r.problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	if r.ok() {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintf(w, "FAIL (history, logs and findings in %s)\n", r.dir)
	}
}

// printRun prints what the run did and the linearizability verdict.
func (r *report) printRun(w io.Writer) {
	ops := map[string]int{}
	for _, o := range r.history {
		kind := map[linz.Kind]string{linz.Read: "read", linz.Write: "write", linz.Touch: "touch"}[o.In.Kind]
		ops[kind+" "+o.Out.Outcome.String()]++
	}
	fmt.Fprintf(w, "eskvchaos: %s of faults, seed %d, %d clients, %d keys, %d writers, %d projectors, %d partitions\n",
		r.cfg.duration, r.cfg.seed, r.cfg.clients, len(r.keys), r.cfg.writers, r.cfg.projectors, r.cfg.partitions)
	n, by := countBy(ops)
	fmt.Fprintf(w, "operations: %d (%s)\n", n, by)
	n, by = countBy(r.faults)
	fmt.Fprintf(w, "faults injected: %d (%s)\n", n, by)
	for _, e := range r.exits {
		fmt.Fprintf(w, "  unexpected exit: %s\n", e)
	}
	printAvailability(w, r.avail)

	verdict := "linearizable"
	switch r.lin.Result {
	case porcupine.Illegal:
		verdict = "NOT linearizable"
	case porcupine.Unknown:
		verdict = fmt.Sprintf("UNKNOWN (the checker gave up after %s)", r.cfg.checkTimeout)
	}
	fmt.Fprintf(w, "linearizability: %s (%d operations on %d keys checked; %d writes with unknown outcome settled by the log: %d committed, %d never; %s)\n",
		verdict, r.lin.Ops, r.lin.Keys, r.settled+r.neverCommitted, r.settled, r.neverCommitted, r.lin.Elapsed.Round(time.Millisecond))
	if r.linPath != "" {
		fmt.Fprintf(w, "  visualization: %s\n", r.linPath)
	}
	if len(r.stale) > 0 {
		fmt.Fprintf(w, "  stale answers (a version older than one acknowledged before the call): %d\n", len(r.stale))
		printFirst(w, r.stale)
	}
	changes := map[string]int{}
	for _, c := range r.changes {
		kind := "put"
		if c.Delete {
			kind = "delete"
		}
		changes[kind+" "+c.Outcome.String()]++
	}
	n, by = countBy(changes)
	l := r.listing
	fmt.Fprintf(w, "listings: %d violations (%d listings checked, %d (listing, key) judgements, %d listings not answered 200; against %d puts and deletes (%s) and the CAS writes; %s)\n",
		len(l.Violations), l.Listings, l.KeysJudged, r.failedLists, n, by, l.Elapsed.Round(time.Millisecond))
	printFirst(w, l.Violations)
}

// printLog prints the findings in the log.
func (r *report) printLog(w io.Writer) {
	lost := append(append([]string{}, r.lost...), r.proj.LostInProjection...)
	fmt.Fprintf(w, "lost writes = %d (%d acknowledged, each looked up in kv.changes and kv_history)\n", len(lost), len(r.acks))
	printFirst(w, lost)
	lf := r.logFindings
	fmt.Fprintf(w, "duplicate/gapped versions = %d (%d duplicates, %d gaps in %d events of %d keys)\n",
		lf.VersionViolations(), len(lf.Duplicates), len(lf.Gaps), lf.Events, lf.Keys)
	printFirst(w, append(append([]string{}, lf.Duplicates...), lf.Gaps...))
	if len(lf.ChainBreaks) > 0 {
		fmt.Fprintf(w, "broken chains (prevVersion/before not the previous event) = %d\n", len(lf.ChainBreaks))
		printFirst(w, lf.ChainBreaks)
	}
	z := r.zombies
	zn := len(z.Events) + len(lf.EpochMismatches) + len(lf.EpochRegressions)
	fmt.Fprintf(w, "zombie writes = %d (%d writer pauses past the session timeout, %d partitions fenced by another writer meanwhile; %d epoch mismatches, %d epoch regressions in the log)\n",
		zn, z.Pauses, z.Moved, len(lf.EpochMismatches), len(lf.EpochRegressions))
	printFirst(w, append(append(append([]string{}, z.Events...), lf.EpochMismatches...), lf.EpochRegressions...))
	if z.Skipped > 0 {
		fmt.Fprintf(w, "  %d pauses not checked: the partition owners could not be read\n", z.Skipped)
	}
	if len(r.log.Open) > 0 {
		fmt.Fprintf(w, "  note: partitions %v had a transaction open when the log was read\n", r.log.Open)
	}
}

// printProjection prints the comparison of the projection with the log.
func (r *report) printProjection(w io.Writer) {
	if d := r.proj.Rebuild; d != nil {
		fmt.Fprintf(w, "projection diff = %d (projector rebuild --into %s, then projector diff: exit %d; %d differing keys, %d not compared, %d history mismatches, history rows %d rebuilt vs %d live (live by format: jsonb %d, text %d); fold of the log vs kv_entries: %d differences, %d rows of events after the log was read not compared)\n",
			r.proj.diffCount(), rebuildSchema, r.proj.Tool.diffExit, d.Differing, d.NotCompared, d.HistoryMismatch, d.History, d.AgainstHistory,
			r.proj.Formats["jsonb"], r.proj.Formats["text"], len(r.proj.FoldDiffs), r.proj.NotCompared)
		for _, k := range d.Keys {
			fmt.Fprintf(w, "  %s: in rebuild %v, live %v, versions %d vs %d, columns %v\n", k.Key, k.InSchema, k.InAgainst, k.Version, k.AgainstVersion, k.Columns)
		}
		printFirst(w, r.proj.FoldDiffs)
	}
}

// countBy returns the sum of m and its entries as "k n, k n", sorted.
func countBy(m map[string]int) (int, string) {
	total := 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		total += m[k]
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return total, strings.Join(parts, ", ")
}

func printFirst(w io.Writer, ss []string) {
	for _, s := range first(ss, 10) {
		fmt.Fprintf(w, "  %s\n", s)
	}
	if len(ss) > 10 {
		fmt.Fprintf(w, "  ... and %d more\n", len(ss)-10)
	}
}

// first returns at most n of ss, for printing.
func first(ss []string, n int) []string {
	if len(ss) <= n {
		return ss
	}
	return ss[:n]
}
