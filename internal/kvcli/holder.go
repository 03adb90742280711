package kvcli

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

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// holderFlags are the options of the commands that act as a holder.
type holderFlags struct {
	holder string
	ttl    string
	wait   time.Duration
}

// addHolder adds --holder (for locks) or --id (for leaders, with
// --holder as its synonym).
func (h *holderFlags) addHolder(cmd *cobra.Command, name string) {
	usage := "the holder's id (default $KVCTL_HOLDER, else USER@HOST; --owner, the seed's name, is the same)"
	synonym := "owner"
	if name == "id" {
		usage = "the candidate's id (default $KVCTL_HOLDER, else USER@HOST; --holder is the same)"
		synonym = "holder"
	}
	cmd.Flags().SetNormalizeFunc(func(_ *pflag.FlagSet, n string) pflag.NormalizedName {
		if n == synonym {
			n = name
		}
		return pflag.NormalizedName(n)
	})
	cmd.Flags().StringVar(&h.holder, name, "", usage)
}

func (h *holderFlags) addTTL(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&h.ttl, "ttl", "", "the "+what+"'s lease: a duration (30s, 5m) or seconds (default: for locks KVSTORE_LOCK_TTL, else the server's 60s)")
}

func (h *holderFlags) addWait(cmd *cobra.Command, what string, server bool) {
	how := "retry (exponential backoff with jitter)"
	if server {
		how = "wait in the server's queue of the lock (granted in arrival order)"
	}
	durationVar(cmd.Flags(), &h.wait, "wait", 0, "if "+what+", "+how+" for up to this long (e.g. 30s, 10m, or seconds: 60)")
}

// request resolves the holder and lease into a request for key.
func (a *app) holderRequest(cmd *cobra.Command, h *holderFlags, name, arg string) (client.LockRequest, error) {
	key, err := a.key(arg)
	if err != nil {
		return client.LockRequest{}, err
	}
	a.right = "write"
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
	switch {
	case h.ttl != "":
		if r.TTL, err = parseTTL(h.ttl); err != nil {
			return r, err
		}
	case a.kind == "kvctl lock acquire" || a.kind == "kvctl lock extend":
		r.TTL, err = a.envTTL("KVSTORE_LOCK_TTL")
	}
	return r, err
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
// while the lock is busy it keeps trying for up to wait. With
// serverWait (a lock) each try asks the server to hold it until the lock
// is granted, in arrival order (try's argument: what is left of wait, at
// most contract.MaxWait; a longer wait asks again, at the queue's tail;
// the first try asks none, so that stderr names the holder at once);
// otherwise (a leadership, or a server that answered at once, ignoring
// the wait) it sleeps between tries with exponential backoff and jitter,
// never past the current lease's end or the deadline.
func (a *app) take(ctx context.Context, wait time.Duration, busy string, serverWait bool, try func(context.Context, time.Duration) (client.Lock, error)) (client.Lock, error) {
	deadline := time.Now().Add(wait)
	var b backoff
	for first := true; ; first = false {
		var ask time.Duration
		if serverWait && !first { // the first try says who holds it
			ask = min(max(time.Until(deadline), 0), contract.MaxWait)
		}
		began := time.Now()
		l, err := try(ctx, ask)
		var e *contract.Error
		if err == nil || wait <= 0 || !errors.As(err, &e) || e.Code != busy {
			return l, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			a.waited = wait
			return l, err
		}
		if first {
			fmt.Fprintf(a.stderr, "waiting up to %v: %s\n", wait, printable(e.Message))
		}
		if serverWait && (first || ask > 0 && time.Since(began) >= ask/2) {
			continue // the server holds the next try: no sleep
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
		return a.writeJSON(l)
	case formatValue:
		_, err := fmt.Fprintln(a.stdout, l.Token)
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "key\t%s\n%s\t%s\ntoken\t%d\nversion\t%d\nacquired\t%s\n", printable(l.Key), who, printable(l.Holder), l.Token, l.Version, timeText(l.AcquiredAt))
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
		return a.writeJSON(r)
	case formatValue:
		_, err = fmt.Fprintln(a.stdout, r.Version)
	default:
		_, err = fmt.Fprintf(a.stdout, "%s %s at version %d\n", printable(r.Key), verb, r.Version)
	}
	return err
}
