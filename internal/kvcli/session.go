package kvcli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

func (a *app) sessionCommand() *cobra.Command {
	cmd := a.groupCommand(&cobra.Command{
		Use:   "session",
		Short: "Create, keep alive, revoke and hold sessions (keys and locks that end together)",
		Long: `A session is a key with a TTL that one call keeps alive (etcd's leases,
Consul's sessions). Keys written with 'kvctl set --session SESSION' and
locks taken with 'kvctl lock acquire --session SESSION' are attached to
it: they have no expiry of their own, and when the session ends (revoke,
or its expiry: no keep-alive within its TTL) every one of them is deleted
or released at once, in one transaction. A session and its keys lie in
one project.

'session hold' is a process's heartbeat: it creates a session, attaches
its keys and locks, keeps it alive until SIGINT or SIGTERM, and revokes
it then; if the process dies, its keys go when the TTL runs out.

Exit codes: 0 done; 1 an ended or expired session, or a key that is no
session; 4 a session hold lost its session.`,
		Example: `  kvctl session create tenant/acme/project/demo/sessions/web-1 --ttl 10s
  kvctl set tenant/acme/project/demo/services/web/1 '{"addr":"10.0.0.1:80"}' --session tenant/acme/project/demo/sessions/web-1
  kvctl session keepalive tenant/acme/project/demo/sessions/web-1
  kvctl session revoke tenant/acme/project/demo/sessions/web-1
  kvctl session hold tenant/acme/project/demo/sessions/web-1 --ttl 5s --put tenant/acme/project/demo/services/web/1='{"addr":"10.0.0.1:80"}'`,
	})
	cmd.AddCommand(a.sessionCreateCommand(), a.sessionWriteCommand(contract.OpSessionKeepAlive), a.sessionWriteCommand(contract.OpSessionRevoke),
		a.sessionGetCommand(), a.sessionHoldCommand())
	return cmd
}

func (a *app) sessionCreateCommand() *cobra.Command {
	var ttl, requestID string
	cmd := a.keyCommand(&cobra.Command{
		Use:   "create SESSION --ttl DURATION",
		Short: "Create a session that expires --ttl after its last keep-alive",
		Long: `Create a session at SESSION, a key that must not hold a live entry
(else exit 1). It expires --ttl from now unless kept alive
('kvctl session keepalive', every third of --ttl is safe).

--format text prints "SESSION expires at TIME (version N, K attached)",
json the session, value its expiry.`,
		Example: `  kvctl session create tenant/acme/project/demo/sessions/web-1 --ttl 10s`,
	}, "write", func(cmd *cobra.Command, key string) error {
		if ttl == "" {
			return &usageError{msg: "session create needs --ttl", solution: "give the session's TTL, e.g. --ttl 10s", cmd: a.cmdPath}
		}
		d, err := parseTTL(ttl)
		if err != nil {
			return err
		}
		s, err := a.client.CreateSession(cmd.Context(), key, d, requestID)
		if err != nil {
			return err
		}
		return a.writeSession(s)
	})
	cmd.Flags().StringVar(&ttl, "ttl", "", "the session's TTL: a duration (10s, 5m) or seconds")
	cmd.Flags().StringVar(&requestID, "request-id", "", "idempotency id: repeating the create with it is answered as a replay")
	return cmd
}

func (a *app) sessionWriteCommand(op contract.Op) *cobra.Command {
	verb, short, long := "keepalive", "Renew a session: it expires its TTL from now",
		`Renew the session at SESSION: it expires its TTL from now, its attached
keys kept. An ended or expired session exits 1 (it is never revived).`
	if op == contract.OpSessionRevoke {
		verb, short, long = "revoke", "End a session: delete its keys and release its locks at once",
			`End the session at SESSION now: in one transaction, delete every key
attached to it and release every lock and leadership, each event saying
why (session_revoked). A key rewritten since without the session, or a
lock released and taken again, is left. An ended or expired session
exits 1.

--format text prints "SESSION revoked: N keys ended", json the answer.`
	}
	return a.keyCommand(&cobra.Command{
		Use:     verb + " SESSION",
		Short:   short,
		Long:    long,
		Example: "  kvctl session " + verb + " tenant/acme/project/demo/sessions/web-1",
	}, "write", func(cmd *cobra.Command, key string) error {
		// a.client is set once flags are read: look the call up now.
		call := a.client.KeepAlive
		if op == contract.OpSessionRevoke {
			call = a.client.RevokeSession
		}
		s, err := call(cmd.Context(), key)
		if err != nil {
			return err
		}
		return a.writeSession(s)
	})
}

func (a *app) sessionGetCommand() *cobra.Command {
	return a.keyCommand(&cobra.Command{
		Use:   "get SESSION",
		Short: "Print a session: its expiry and attached keys",
		Long: `Print the session at SESSION: its TTL, expiry and the keys, locks and
leaderships attached to it. An ended or expired session exits 1.`,
		Example: `  kvctl session get tenant/acme/project/demo/sessions/web-1 --format json | jq -r '.attached[].key'`,
	}, "read", func(cmd *cobra.Command, key string) error {
		s, err := a.client.GetSession(cmd.Context(), key)
		if err != nil {
			return err
		}
		return a.writeSession(s)
	})
}

// writeSession writes a session's answer in a.format.
func (a *app) writeSession(s client.SessionInfo) error {
	switch {
	case a.format == formatJSON:
		return a.writeJSON(s)
	case s.Revoked:
		_, err := fmt.Fprintf(a.stdout, "%s revoked: %d keys ended\n", printable(s.Key), len(s.Ended))
		return err
	case a.format == formatValue && s.ExpiresAt != nil:
		_, err := fmt.Fprintln(a.stdout, s.ExpiresAt.Format(time.RFC3339Nano))
		return err
	case s.ExpiresAt != nil:
		_, err := fmt.Fprintf(a.stdout, "%s expires at %s (version %d, %d attached)\n", printable(s.Key), s.ExpiresAt.Format(time.RFC3339), s.Version, len(s.Attached))
		return err
	}
	_, err := fmt.Fprintf(a.stdout, "%s (version %d)\n", printable(s.Key), s.Version)
	return err
}

func (a *app) sessionHoldCommand() *cobra.Command {
	var (
		ttl   string
		puts  []string
		locks []string
		h     holderFlags
	)
	cmd := a.keyCommand(&cobra.Command{
		Use:   "hold SESSION --ttl DURATION [--put KEY=VALUE]... [--lock KEY]...",
		Short: "Hold a session with keys and locks attached until stopped",
		Long: `Create a session at SESSION, attach each --put KEY=VALUE (VALUE as for
'kvctl set': JSON, else text) and each --lock KEY (taken with --holder,
else USER@HOST/PID), keep it alive every third of --ttl, and on SIGINT or
SIGTERM revoke it (deleting the keys and releasing the locks) and exit 0.
If the process dies instead, the session expires --ttl after its last
keep-alive and the sweeper deletes the keys and releases the locks then:
one heartbeat per process for service registration and presence.

It prints "holding SESSION (N keys, M locks)" once everything is
attached. A lock held by another holder exits 4 (the session revoked);
a session lost while held (no keep-alive got through in time, or it was
revoked or deleted) exits 4.`,
		Example: `  kvctl session hold tenant/acme/project/demo/sessions/web-1 --ttl 5s \
    --put tenant/acme/project/demo/services/web/1='{"addr":"10.0.0.1:80"}' \
    --lock tenant/acme/project/demo/locks/web-primary`,
	}, "write", func(cmd *cobra.Command, key string) error {
		if ttl == "" {
			return &usageError{msg: "session hold needs --ttl", solution: "give the session's TTL, e.g. --ttl 5s", cmd: a.cmdPath}
		}
		d, err := parseTTL(ttl)
		if err != nil {
			return err
		}
		holder := h.holder
		if !cmd.Flags().Changed("holder") {
			holder = fmt.Sprintf("%s/%d", userAtHost(a.getenv), os.Getpid())
		}
		return a.holdSession(cmd.Context(), key, d, puts, locks, holder)
	})
	f := cmd.Flags()
	f.StringVar(&ttl, "ttl", "", "the session's TTL, renewed every third of it: a duration (5s, 1m) or seconds")
	f.StringArrayVar(&puts, "put", nil, "KEY=VALUE to write attached to the session (repeatable)")
	f.StringArrayVar(&locks, "lock", nil, "KEY of a lock to take attached to the session (repeatable)")
	f.StringVar(&h.holder, "holder", "", "the locks' holder (default USER@HOST/PID)")
	return cmd
}

// holdSession runs session hold: create, attach, keep alive until a
// signal (revoke, exit 0) or the session's loss (exit 4).
func (a *app) holdSession(ctx context.Context, key string, ttl time.Duration, puts, locks []string, holder string) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	sess, err := client.NewSession(context.WithoutCancel(ctx), a.client, key, ttl)
	if err != nil {
		return err
	}
	revoke := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.timeout)
		defer cancel()
		if err := sess.Close(rctx); err != nil {
			fmt.Fprintf(a.stderr, "note: could not revoke %s (%v): its keys go when its TTL runs out\n", printable(key), err)
		}
	}
	for _, p := range puts {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			revoke()
			return &usageError{msg: fmt.Sprintf("--put %q is not KEY=VALUE", p), solution: "give --put KEY=VALUE, e.g. --put tenant/acme/project/demo/services/web/1='{\"addr\":\"10.0.0.1:80\"}'", cmd: a.cmdPath}
		}
		if k, err = a.key(k); err == nil {
			var value []byte
			if value, err = (valueRule{}).parse(v, "--put "+k, a.cmdPath); err == nil {
				_, err = a.client.Put(ctx, client.PutRequest{Key: k, Value: value, Session: key})
			}
		}
		if err != nil {
			revoke()
			return err
		}
	}
	for _, l := range locks {
		k, err := a.key(l)
		if err == nil {
			_, err = a.client.AcquireLock(ctx, client.LockRequest{Key: k, Holder: holder, Session: key})
		}
		if err != nil {
			revoke()
			return err
		}
	}
	fmt.Fprintf(a.stdout, "holding %s (%d keys, %d locks)\n", printable(key), len(puts), len(locks))
	// kvctl's own handler cancels ctx on the same signals: either way
	// the stop is a clean one.
	select {
	case <-sigs:
		revoke()
		return nil
	case <-ctx.Done():
		revoke()
		return nil
	case <-sess.Done():
		return &failure{code: exitUnavailable, msg: fmt.Sprintf("lost the session %s: %v", key, sess.Err()),
			solution: "its keys and locks are ended (or will be when its TTL runs out): start the hold again; a longer --ttl rides out slower networks"}
	}
}
