package kvcli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// Defaults of lock run.
const (
	defaultRunTTL   = "30s"
	defaultRunGrace = 10 * time.Second
)

func (a *app) lockRunCommand() *cobra.Command {
	var (
		h     holderFlags
		grace time.Duration
	)
	cmd := &cobra.Command{
		Use:   "run KEY [flags] -- CMD [ARG...]",
		Short: "Run a command while holding a lock; stop it if the lock is lost",
		Long: `Take the lock at KEY (waiting up to --wait for it), run CMD while
renewing the lease every --ttl/3, release the lock when CMD ends, and exit
with CMD's exit status (128+N when a signal N ended it; 127 when CMD is
not found, 126 when it cannot be started).

CMD gets KVCTL_LOCK_KEY, KVCTL_LOCK_HOLDER and KVCTL_LOCK_TOKEN (the
fencing token) in its environment: hand the token to the resources the
lock protects, so they refuse a holder that lost the lock.

If the lock is lost while CMD runs (the server says this holder no
longer holds it, or no extend got through until --grace before the lease
would end), kvctl stops CMD: SIGTERM, then SIGKILL after --grace (at most
a third of --ttl) to everything left in CMD's process group. It then
exits 4 with an Error line: CMD must not go on as if it held the lock.

SIGINT and SIGTERM sent to kvctl are forwarded to CMD's process group;
the lock is kept until CMD exits. CMD runs in a process group of its own
(so all of it can be stopped): it cannot read from the terminal.

The holder is --holder, else USER@HOST/PID with kvctl's own process id
($KVCTL_HOLDER is not used): every lock run is a holder of its own. A lock this holder already holds
is refused (exit 4): lock run never shares a tenure.

Exit codes: CMD's status; 4 when the lock stays held past --wait or is
lost; 2, 3 and 130 as for every command (then CMD did not run).`,
		Example: `  kvctl lock run tenant/acme/project/demo/locks/nightly -- ./nightly.sh --full
  kvctl lock run tenant/acme/project/demo/locks/nightly --ttl 1m --wait 10m -- make deploy
  kvctl lock run tenant/acme/project/demo/locks/db-migrate --wait 30s -- sh -c 'migrate --fencing-token "$KVCTL_LOCK_TOKEN"'`,
		Args: keyThenCommand("kvctl lock run takes KEY, then -- and the command to run",
			"e.g. kvctl lock run tenant/acme/project/demo/locks/nightly --wait 30s -- ./nightly.sh"),
		Annotations:       perCallAnnotation,
		ValidArgsFunction: a.completeKeyThenCommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := a.key(args[0])
			if err != nil {
				return err
			}
			a.right = "write"
			a.holder, a.holderSource = h.holder, "--holder"
			if !cmd.Flags().Changed("holder") {
				a.holder, a.holderSource = fmt.Sprintf("%s/%d", userAtHost(a.getenv), os.Getpid()), "lock run's default USER@HOST/PID"
			}
			lease, err := parseTTL(h.ttl)
			if err != nil {
				return err
			}
			switch {
			case h.wait < 0:
				return &usageError{msg: fmt.Sprintf("--wait %v is negative", h.wait), solution: "give how long to wait for the lock, e.g. --wait 30s", cmd: a.cmdPath}
			case grace <= 0:
				return &usageError{msg: fmt.Sprintf("--grace %v is not positive", grace), solution: "give how long CMD may take to stop, e.g. --grace 10s", cmd: a.cmdPath}
			}
			r := &lockRun{a: a, key: key, holder: a.holder, lease: lease, grace: min(grace, lease/3)}
			return r.run(cmd.Context(), args[1:], h.wait)
		},
	}
	f := cmd.Flags()
	f.StringVar(&h.holder, "holder", "", "the holder's id (default USER@HOST/PID, unique to this run)")
	f.StringVar(&h.ttl, "ttl", defaultRunTTL, "the lease, renewed every third of it while CMD runs: a duration (30s, 5m) or seconds")
	h.addWait(cmd, "another holder has it", true)
	durationVar(f, &grace, "grace", defaultRunGrace, "when the lock is lost: time between SIGTERM and SIGKILL to CMD (at most --ttl/3)")
	return cmd
}

// cannotRun is the failure of a CMD that could not be started: 127 when
// it is not found, 126 otherwise; after says what kvctl did about it.
func cannotRun(name string, err error, after string) *failure {
	code, solution := 126, "check that "+name+" is an executable file kvctl may run"
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		code, solution = 127, "check the command's name and $PATH, or give the command's path"
	}
	return &failure{code: code, msg: fmt.Sprintf("cannot run %s: %v", name, err), solution: solution + "; " + after}
}

// lockRun is one run of a command under a lock.
type lockRun struct {
	a      *app
	key    string
	holder string
	lease  time.Duration
	grace  time.Duration
}

// lockLost ends a lock run whose lock was lost while CMD ran.
type lockLost struct {
	key   string
	cause error // the extend's or release's error
	// transient is true when no extend got through in time: the server
	// may still think this holder holds the lock.
	transient bool
	reason    string // when there is no cause
	status    int    // CMD's exit status
	stopped   bool   // CMD was still running and was stopped
}

func (e *lockLost) Error() string { return "lost the lock " + e.key }

func (r *lockRun) run(ctx context.Context, argv []string, wait time.Duration) error {
	// Signals go to CMD once it runs; register before the acquire so none
	// slips between it and the start.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	lease, err := r.take(ctx, wait)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		r.release(ctx, lease)
		return ctx.Err()
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = r.a.stdin, r.a.stdout, r.a.stderr
	c.Env = append(os.Environ(), "KVCTL_LOCK_KEY="+r.key, "KVCTL_LOCK_HOLDER="+r.holder, "KVCTL_LOCK_TOKEN="+strconv.FormatInt(lease.Token(), 10))
	ownGroup(c)
	if err := c.Start(); err != nil {
		r.release(ctx, lease)
		return cannotRun(argv[0], err, "the lock was released")
	}
	stopped := supervise(ctx, c, sigs, lease.Done(), r.grace)
	status := exitStatus(c.ProcessState)
	err = r.release(ctx, lease)
	if lost := r.lost(lease.Err(), status, stopped); lost != nil {
		// Nothing of CMD may go on without the lock.
		signalGroup(c.Process, syscall.SIGKILL)
		return lost
	}
	if err != nil {
		if code := contract.ErrorCode(err); code == contract.ENotLockHolder || code == contract.EWrongType {
			lost := &lockLost{key: r.key, cause: err, status: status}
			if status == 0 {
				return lost
			}
			r.a.fail(lost)
		} else {
			_, msg, _ := r.a.explain(err)
			fmt.Fprintf(r.a.stderr, "note: could not release %s (%s): it frees itself when its lease ends\n", printable(r.key), printable(msg))
		}
	}
	if status != 0 {
		return &exitError{code: status}
	}
	return nil
}

// take acquires the lock, waiting up to wait, and keeps its lease (every
// third of --ttl) until it is released, also after an interrupt: the
// lock is kept until CMD exits.
func (r *lockRun) take(ctx context.Context, wait time.Duration) (*client.Lease, error) {
	// The acquire waits in the server's queue of the lock (each request
	// up to contract.MaxWait; take asks again while --wait lasts).
	req := client.LockRequest{Key: r.key, Holder: r.holder, TTL: r.lease, RequestID: newRequestID(), Wait: min(wait, contract.MaxWait)}
	lease, err := r.a.client.KeepLock(context.WithoutCancel(ctx), req,
		client.WithTake(func(_ context.Context, try func(context.Context) (client.Lock, error)) (client.Lock, error) {
			actx, cancel := context.WithTimeout(ctx, r.a.timeout+wait)
			defer cancel()
			return r.a.take(actx, wait, contract.ELockHeld, wait > 0, func(ctx context.Context, _ time.Duration) (client.Lock, error) { return try(ctx) })
		}),
		client.WithMargin(r.grace), client.WithCallTimeout(r.a.timeout))
	var re *client.ReenteredError
	if errors.As(err, &re) {
		return nil, &failure{code: exitUnavailable,
			msg: fmt.Sprintf("%s already holds %s (token %d): lock run needs a tenure of its own", r.holder, r.key, re.Lock.Token),
			solution: fmt.Sprintf("another lock run or acquire with --holder %s holds it: give each run its own --holder (or leave --holder out: USER@HOST/PID), or wait until it is released or its lease ends%s",
				r.holder, expiresText(re.Lock.ExpiresAt))}
	}
	return lease, err
}

// supervise waits for CMD to exit: it forwards signals, and stops CMD
// (SIGTERM, then SIGKILL after grace) once lost closes. It reports
// whether CMD was stopped.
func supervise(ctx context.Context, c *exec.Cmd, sigs <-chan os.Signal, lost <-chan struct{}, grace time.Duration) bool {
	waitc := make(chan error, 1)
	go func() { waitc <- c.Wait() }()
	var (
		stopped bool
		kill    <-chan time.Time
		ctxDone = ctx.Done()
	)
	for {
		select {
		case <-waitc:
			return stopped
		case s := <-sigs:
			signalGroup(c.Process, s)
		case <-ctxDone:
			ctxDone = nil
			// A signal also cancels ctx: sigs forwards it as it came.
			if context.Cause(ctx) == ctx.Err() {
				signalGroup(c.Process, syscall.SIGTERM)
			}
		case <-lost:
			lost, stopped = nil, true
			signalGroup(c.Process, syscall.SIGTERM)
			kill = time.After(grace)
		case <-kill:
			kill = nil
			signalGroup(c.Process, syscall.SIGKILL)
		}
	}
}

// lost is the lock run's error when the lease was lost (err is the
// lease's Err), else nil.
func (r *lockRun) lost(err error, status int, stopped bool) *lockLost {
	var le *client.LostError
	if !errors.As(err, &le) {
		return nil
	}
	lost := &lockLost{key: r.key, cause: le.Err, transient: le.Unconfirmed, status: status, stopped: stopped}
	switch {
	case le.NewToken != 0:
		lost.reason = fmt.Sprintf("the lock's token is %d now, not %d: it was released and taken again", le.NewToken, le.Token)
	case le.Unconfirmed:
		lost.reason = fmt.Sprintf("no extend got through before the lease (--ttl %v) was about to end", r.lease)
	}
	return lost
}

// release stops keeping the lease and frees the lock, bounded by
// --timeout even after an interrupt.
func (r *lockRun) release(ctx context.Context, lease *client.Lease) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.a.timeout)
	defer cancel()
	return lease.Release(ctx)
}

func expiresText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return " (" + timeText(*t) + ")"
}

// explainLost says what happened to the lock of a lock run.
func (a *app) explainLost(e *lockLost) (int, string, string) {
	var why string
	switch {
	case e.cause != nil:
		_, why, _ = a.explain(e.cause)
		if e.reason != "" {
			why = e.reason + "; last error: " + why
		}
	default:
		why = e.reason
	}
	what := "CMD finished"
	if e.stopped {
		what = "CMD was stopped"
	}
	msg := fmt.Sprintf("lost the lock %s while CMD ran: %s; %s (exit status %d)", e.key, why, what, e.status)
	if e.transient {
		return exitUnavailable, msg, "extends could not reach eskv in time, so another holder may have the lock now: check the stack and the network (or use a longer --ttl), then run it again"
	}
	return exitUnavailable, msg, strings.Join([]string{
		"another holder or an operator took the lock, or its lease ended: see 'kvctl lock check " + e.key + "'",
		"run it again once the lock is free (with --wait to queue for it)",
	}, "; ")
}

// keyThenCommand accepts KEY, then -- and a command with its arguments
// (lock run, update); otherwise it answers msg and solution.
func keyThenCommand(msg, solution string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		if cmd.ArgsLenAtDash() == 1 && len(got) >= 2 {
			return nil
		}
		return &usageError{msg: msg, solution: solution, cmd: cmd.CommandPath()}
	}
}
