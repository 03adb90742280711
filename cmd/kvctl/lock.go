package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/user"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/eskv/eskv/api/client"
	"github.com/eskv/eskv/events"
)

func (a *app) lockCommand() *cobra.Command {
	cmd := a.groupCommand(&cobra.Command{
		Use:   "lock",
		Short: "Take, keep, release and inspect locks; run a command under a lock",
		Long: `A lock is a key that one holder at a time owns for a lease (--ttl, 60s
by default on the server). Acquiring answers a fencing token that grows
from one holder's tenure to the next: pass it to what the lock protects
(KVCTL_LOCK_TOKEN under lock run) and have it refuse lower tokens.

The holder is --holder, else $KVCTL_HOLDER, else USER@HOST: the same in
every kvctl run by one user on one host, so 'lock acquire' and a later
'lock release' in a script match, but two scripts of one user on one host
are the same holder too (the second acquire re-enters; stderr says so).
For exclusion between those, set KVCTL_HOLDER per run
(export KVCTL_HOLDER="$(hostname)/$$") or use 'lock run', whose default
holder is unique to its process.

Exit codes: 0 done; 1 lock check on a free lock; 4 held by another holder
(lock acquire) or not held by this holder (extend, release).`,
		Example: `  kvctl lock acquire tenant/acme/project/demo/locks/deploy --ttl 5m --format value   # prints the token
  kvctl lock check tenant/acme/project/demo/locks/deploy
  kvctl lock release tenant/acme/project/demo/locks/deploy
  kvctl lock run tenant/acme/project/demo/locks/nightly --wait 10m -- ./nightly.sh`,
	})
	cmd.AddCommand(a.lockAcquireCommand(), a.lockExtendCommand(), a.lockReleaseCommand(), a.lockCheckCommand(), a.lockRunCommand())
	return cmd
}

// holderFlags are the options of the commands that act as a holder.
type holderFlags struct {
	holder string
	ttl    string
	wait   time.Duration
}

// addHolder adds --holder (for locks) or --id (for leaders, with
// --holder as its synonym).
func (h *holderFlags) addHolder(cmd *cobra.Command, name string) {
	usage := "the holder's id (default $KVCTL_HOLDER, else USER@HOST)"
	if name == "id" {
		usage = "the candidate's id (default $KVCTL_HOLDER, else USER@HOST; --holder is the same)"
		cmd.Flags().SetNormalizeFunc(func(_ *pflag.FlagSet, n string) pflag.NormalizedName {
			if n == "holder" {
				n = "id"
			}
			return pflag.NormalizedName(n)
		})
	}
	cmd.Flags().StringVar(&h.holder, name, "", usage)
}

func (h *holderFlags) addTTL(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&h.ttl, "ttl", "", "the "+what+"'s lease: a duration (30s, 5m) or seconds (server default 60s)")
}

func (h *holderFlags) addWait(cmd *cobra.Command, what string) {
	cmd.Flags().DurationVar(&h.wait, "wait", 0, "if "+what+", retry (exponential backoff with jitter) for up to this long (e.g. 30s, 10m)")
}

// request resolves the holder and lease into a request for key.
func (a *app) holderRequest(cmd *cobra.Command, h *holderFlags, name, key string) (client.LockRequest, error) {
	a.subject, a.right = key, "write"
	switch {
	case cmd.Flags().Changed(name):
		a.holder, a.holderSource = h.holder, "--"+name
	case a.getenv("KVCTL_HOLDER") != "":
		a.holder, a.holderSource = a.getenv("KVCTL_HOLDER"), "KVCTL_HOLDER"
	default:
		a.holder, a.holderSource = userAtHost(a.getenv), "the default USER@HOST"
	}
	r := client.LockRequest{Key: key, Holder: a.holder, RequestID: newRequestID()}
	if h.wait < 0 {
		return r, &usageError{msg: fmt.Sprintf("--wait %v is negative", h.wait), solution: "give how long to keep trying, e.g. --wait 30s", cmd: a.cmdPath}
	}
	if h.ttl != "" {
		var err error
		if r.TTL, err = parseTTL(h.ttl); err != nil {
			return r, err
		}
	}
	return r, nil
}

// userAtHost is the default holder: the same for every kvctl a user runs
// on one host.
func userAtHost(getenv func(string) string) string {
	name := getenv("USER")
	if name == "" {
		name = getenv("LOGNAME")
	}
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		} else {
			name = strconv.Itoa(os.Getuid())
		}
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return name + "@" + host
}

// newRequestID makes a lock call idempotent, so the client may retry it
// after a network error or a partition move without taking a second
// tenure.
func newRequestID() string { return "kvctl-" + rand.Text() }

func (a *app) lockAcquireCommand() *cobra.Command {
	var h holderFlags
	cmd := &cobra.Command{
		Use:   "acquire KEY",
		Short: "Take a lock (or wait for it with --wait)",
		Long: `Take the lock at KEY for the holder, for a lease of --ttl. When the
holder already holds it, the lease is renewed and the token stays (stderr
notes the re-entry). When another holder has it, exit 4 at once, or with
--wait keep trying (exponential backoff with jitter, never sleeping past
the lease's end) until it is free or --wait has passed. --wait also
extends --timeout.

--format text prints the lock on lines, json {"key","holder","token",
"version","acquiredAt","expiresAt","reentered"}, value the fencing token.`,
		Example: `  kvctl lock acquire tenant/acme/project/demo/locks/deploy
  TOKEN=$(kvctl lock acquire tenant/acme/project/demo/locks/deploy --ttl 5m --wait 1m --format value)
  kvctl lock acquire tenant/acme/project/demo/locks/deploy --holder ci-runner-7 --format json`,
		Args:              args("KEY"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.holderRequest(cmd, &h, "holder", args[0])
			if err != nil {
				return err
			}
			l, err := a.take(cmd.Context(), h.wait, events.ELockHeld, func(ctx context.Context) (client.Lock, error) {
				return a.client.AcquireLock(ctx, r)
			})
			if err != nil {
				return err
			}
			if l.Reentered {
				fmt.Fprintf(a.stderr, "note: %s already held %s (holder from %s): the lease was renewed and the token is unchanged\n", l.Holder, l.Key, a.holderSource)
			}
			return a.writeLock(l, "holder")
		},
	}
	h.addHolder(cmd, "holder")
	h.addTTL(cmd, "lock")
	h.addWait(cmd, "another holder has it")
	return cmd
}

func (a *app) lockExtendCommand() *cobra.Command {
	var h holderFlags
	cmd := &cobra.Command{
		Use:   "extend KEY",
		Short: "Renew the lease of a lock this holder holds",
		Long: `Renew the lease of the lock at KEY: it now ends --ttl from now. The
token stays. A lock this holder does not hold (free, expired, or another
holder's) exits 4: stop acting on it.

Output as lock acquire.`,
		Example: `  kvctl lock extend tenant/acme/project/demo/locks/deploy --ttl 5m
  kvctl lock extend tenant/acme/project/demo/locks/deploy --holder ci-runner-7 || exit 4   # lost it`,
		Args:              args("KEY"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.holderRequest(cmd, &h, "holder", args[0])
			if err != nil {
				return err
			}
			l, err := a.client.ExtendLock(cmd.Context(), r)
			if err != nil {
				return err
			}
			return a.writeLock(l, "holder")
		},
	}
	h.addHolder(cmd, "holder")
	h.addTTL(cmd, "lock")
	return cmd
}

func (a *app) lockReleaseCommand() *cobra.Command {
	var h holderFlags
	cmd := &cobra.Command{
		Use:   "release KEY",
		Short: "Free a lock this holder holds",
		Long: `Free the lock at KEY. Only its holder may: a lock this holder does not
hold exits 4 (an operator can break a lock with 'kvctl delete KEY
--expected-version V').

--format text prints "KEY released at version N", json
{"key","version","released":true}, value the version.`,
		Example: `  kvctl lock release tenant/acme/project/demo/locks/deploy
  kvctl lock release tenant/acme/project/demo/locks/deploy --holder ci-runner-7`,
		Args:              args("KEY"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.holderRequest(cmd, &h, "holder", args[0])
			if err != nil {
				return err
			}
			res, err := a.client.ReleaseLock(cmd.Context(), r)
			if err != nil {
				return err
			}
			return a.writeReleased(res, "released")
		},
	}
	h.addHolder(cmd, "holder")
	return cmd
}

func (a *app) lockCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check KEY",
		Short: "Print who holds a lock; exit 1 if it is free",
		Long: `Print the holder, token and lease of the lock at KEY. A free lock (never
taken, released, or its lease ended) exits 1.

Output as lock acquire (reentered is always false).`,
		Example: `  kvctl lock check tenant/acme/project/demo/locks/deploy
  kvctl lock check tenant/acme/project/demo/locks/deploy --format json | jq -r .holder
  kvctl lock check tenant/acme/project/demo/locks/deploy 2>/dev/null || echo free`,
		Args:              args("KEY"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.subject, a.right = args[0], "read"
			l, err := a.client.CheckLock(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.writeLock(l, "holder")
		},
	}
}

// Bounds of the wait between tries of a busy lock.
const (
	minRetryWait = 100 * time.Millisecond
	maxRetryWait = 2 * time.Second
)

// backoff is an exponential wait with jitter over its upper half.
type backoff struct{ next time.Duration }

func (b *backoff) wait() time.Duration {
	d := max(b.next, minRetryWait)
	b.next = min(d*2, maxRetryWait)
	return d/2 + mrand.N(d/2+1)
}

// take calls try until it succeeds or fails with another code than busy;
// while the lock is busy it keeps trying for up to wait, sleeping with
// exponential backoff and jitter, never past the current lease's end or
// the deadline.
func (a *app) take(ctx context.Context, wait time.Duration, busy string, try func(context.Context) (client.Lock, error)) (client.Lock, error) {
	deadline := time.Now().Add(wait)
	var b backoff
	for first := true; ; first = false {
		l, err := try(ctx)
		var e *events.Error
		if err == nil || wait <= 0 || !errors.As(err, &e) || e.Code != busy {
			return l, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			a.waited = wait
			return l, err
		}
		if first {
			fmt.Fprintf(a.stderr, "waiting up to %v: %s\n", wait, e.Message)
		}
		d := min(b.wait(), left)
		if e.Current != nil && e.Current.ExpiresAt != nil {
			d = min(d, max(time.Until(*e.Current.ExpiresAt), 10*time.Millisecond))
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return l, ctx.Err()
		case <-t.C:
		}
	}
}

// writeLock writes a lock or leadership in a.format; who labels the
// holder's text line.
func (a *app) writeLock(l client.Lock, who string) error {
	switch a.format {
	case formatJSON:
		return writeJSON(a.stdout, l)
	case formatValue:
		_, err := fmt.Fprintln(a.stdout, l.Token)
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "key\t%s\n%s\t%s\ntoken\t%d\nversion\t%d\nacquired\t%s\n", l.Key, who, l.Holder, l.Token, l.Version, timeText(l.AcquiredAt))
	if l.ExpiresAt != nil {
		fmt.Fprintf(tw, "expires\t%s\n", timeText(*l.ExpiresAt))
	}
	if l.Reentered {
		fmt.Fprintf(tw, "reentered\tyes\n")
	}
	return tw.Flush()
}

// writeReleased writes the answer of release or resign.
func (a *app) writeReleased(r client.ReleaseResult, verb string) error {
	var err error
	switch a.format {
	case formatJSON:
		return writeJSON(a.stdout, r)
	case formatValue:
		_, err = fmt.Fprintln(a.stdout, r.Version)
	default:
		_, err = fmt.Fprintf(a.stdout, "%s %s at version %d\n", r.Key, verb, r.Version)
	}
	return err
}
