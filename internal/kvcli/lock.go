package kvcli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
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
	cmd.AddCommand(a.holderCommands(contract.PurposeLock)...)
	cmd.AddCommand(a.lockRunCommand())
	return cmd
}

func (a *app) leaderCommand() *cobra.Command {
	cmd := a.groupCommand(&cobra.Command{
		Use:   "leader",
		Short: "Elect a leader among candidates, keep and end its leadership",
		Long: `A leader pool is a key that names one leader at a time for a lease
(--ttl, 60s by default on the server). Candidates call 'leader elect':
the first wins, the others exit 4 until the leader resigns or stops
heartbeating. The leader renews its lease with 'leader heartbeat' (or
'leader elect' again) more often than --ttl; a heartbeat that exits 4
means it is no longer the leader and must stop acting as one.

The candidate's id is --id (or --holder), else $KVCTL_HOLDER, else
USER@HOST. Like a lock, leadership carries a fencing token that grows
from one leader's tenure to the next.

Exit codes: 0 done; 1 leader check without a leader; 4 another candidate
leads (elect) or this one does not (heartbeat, resign).`,
		Example: `  kvctl leader elect tenant/acme/project/demo/leaders/scheduler --id sched-1 --ttl 15s
  kvctl leader heartbeat tenant/acme/project/demo/leaders/scheduler --id sched-1 --ttl 15s
  kvctl leader check tenant/acme/project/demo/leaders/scheduler --format value
  kvctl leader resign tenant/acme/project/demo/leaders/scheduler --id sched-1`,
	})
	cmd.AddCommand(a.holderCommands(contract.PurposeLeader)...)
	return cmd
}

// holderCmd is one subcommand of lock or leader: the op it runs and the
// client call for it (hold, release or check).
type holderCmd struct {
	op                        contract.Op
	use, short, long, example string
	hold                      func(*client.Client, context.Context, client.LockRequest) (client.Lock, error)
	release                   func(*client.Client, context.Context, client.LockRequest) (client.ReleaseResult, error)
	check                     func(*client.Client, context.Context, string) (client.Lock, error)
}

// holderCmds are the subcommands of lock and leader (but lock run), in
// the order their group lists them.
var holderCmds = []holderCmd{
	{
		op: contract.OpLockAcquire, hold: (*client.Client).AcquireLock,
		use: "acquire KEY", short: "Take a lock (or wait for it with --wait)",
		long: `Take the lock at KEY for the holder, for a lease of --ttl. When the
holder already holds it, the lease is renewed and the token stays (stderr
notes the re-entry). When another holder has it, exit 4 at once, or with
--wait wait in the server's queue of the lock until it is granted (in
arrival order: when it is released, or its lease ends) or --wait has
passed. The server holds one request up to 30s; a longer --wait asks
again, at the queue's tail. --wait also extends --timeout.

--format text prints the lock on lines, json {"key","holder","token",
"version","acquiredAt","expiresAt","reentered"}, value the fencing token.`,
		example: `  kvctl lock acquire tenant/acme/project/demo/locks/deploy
  TOKEN=$(kvctl lock acquire tenant/acme/project/demo/locks/deploy --ttl 5m --wait 1m --format value)
  kvctl lock acquire tenant/acme/project/demo/locks/deploy --holder ci-runner-7 --format json`,
	},
	{
		op: contract.OpLockExtend, hold: (*client.Client).ExtendLock,
		use: "extend KEY", short: "Renew the lease of a lock this holder holds",
		long: `Renew the lease of the lock at KEY: it now ends --ttl from now. The
token stays. A lock this holder does not hold (free, expired, or another
holder's) exits 4: stop acting on it.

Output as lock acquire.`,
		example: `  kvctl lock extend tenant/acme/project/demo/locks/deploy --ttl 5m
  kvctl lock extend tenant/acme/project/demo/locks/deploy --holder ci-runner-7 || exit 4   # lost it`,
	},
	{
		op: contract.OpLockRelease, release: (*client.Client).ReleaseLock,
		use: "release KEY", short: "Free a lock this holder holds",
		long: `Free the lock at KEY. Only its holder may: a lock this holder does not
hold exits 4 (an operator can break a lock with 'kvctl delete KEY
--expected-version V').

--format text prints "KEY released at version N", json
{"key","version","released":true}, value the version.`,
		example: `  kvctl lock release tenant/acme/project/demo/locks/deploy
  kvctl lock release tenant/acme/project/demo/locks/deploy --holder ci-runner-7`,
	},
	{
		op: contract.OpLockCheck, check: (*client.Client).CheckLock,
		use: "check KEY", short: "Print who holds a lock; exit 1 if it is free",
		long: `Print the holder, token and lease of the lock at KEY. A free lock (never
taken, released, or its lease ended) exits 1.

Output as lock acquire (reentered is always false).`,
		example: `  kvctl lock check tenant/acme/project/demo/locks/deploy
  kvctl lock check tenant/acme/project/demo/locks/deploy --format json | jq -r .holder
  kvctl lock check tenant/acme/project/demo/locks/deploy 2>/dev/null || echo free`,
	},
	{
		op: contract.OpLeaderElect, hold: (*client.Client).Elect,
		use: "elect KEY", short: "Become the pool's leader if it has none (or renew)",
		long: `Make the candidate the leader of the pool at KEY if it has none, for a
lease of --ttl; when it already leads, the lease is renewed (the token
stays). When another candidate leads, exit 4 at once, or with --wait keep
trying (exponential backoff with jitter) until it may lead or --wait has
passed.

--format text prints the leadership on lines, json {"key","holder",
"token","version","acquiredAt","expiresAt","reentered"} (holder is the
leader), value the fencing token.`,
		example: `  kvctl leader elect tenant/acme/project/demo/leaders/scheduler --id sched-1 --ttl 15s
  while ! kvctl leader elect tenant/acme/project/demo/leaders/scheduler --id "$HOSTNAME" 2>/dev/null; do sleep 5; done
  kvctl leader elect tenant/acme/project/demo/leaders/scheduler --wait 1m --format value`,
	},
	{
		op: contract.OpLeaderHeartbeat, hold: (*client.Client).Heartbeat,
		use: "heartbeat KEY", short: "Renew this candidate's leadership",
		long: `Renew the leadership of the candidate: its lease now ends --ttl from now.
When the candidate does not lead (any more), exit 4: it must stop acting
as the leader.

Output as leader elect.`,
		example: `  kvctl leader heartbeat tenant/acme/project/demo/leaders/scheduler --id sched-1 --ttl 15s
  kvctl leader heartbeat tenant/acme/project/demo/leaders/scheduler --id sched-1 || stop_scheduling`,
	},
	{
		op: contract.OpLeaderResign, release: (*client.Client).Resign,
		use: "resign KEY", short: "End this candidate's leadership",
		long: `End the candidate's leadership of the pool at KEY, so another candidate
can be elected at once. When the candidate does not lead, exit 4.

--format text prints "KEY resigned at version N", json
{"key","version","released":true}, value the version.`,
		example: `  kvctl leader resign tenant/acme/project/demo/leaders/scheduler --id sched-1`,
	},
	{
		op: contract.OpLeaderCheck, check: (*client.Client).Leader,
		use: "check KEY", short: "Print the pool's leader; exit 1 if it has none",
		long: `Print the leader, token and lease of the pool at KEY. A pool without a
leader (never elected, resigned, or its lease ended) exits 1.

Output as leader elect (reentered is always false).`,
		example: `  kvctl leader check tenant/acme/project/demo/leaders/scheduler
  kvctl leader check tenant/acme/project/demo/leaders/scheduler --format json | jq -r .holder`,
	},
}

// holderGroup is what the subcommands of lock or of leader share.
type holderGroup struct {
	flag     string // the holder's flag: holder, or id
	what     string // what the lease is of, for --ttl's help
	who      string // the holder's text label
	waitIf   string // when --wait waits, for its help
	busy     string // the code --wait waits on
	released string // the text of a release
	note     bool   // a re-entry is noted on stderr
}

var holderGroups = map[string]holderGroup{
	contract.PurposeLock: {flag: "holder", what: "lock", who: "holder", waitIf: "another holder has it", busy: contract.ELockHeld,
		released: "released", note: true},
	contract.PurposeLeader: {flag: "id", what: "leadership", who: "leader", waitIf: "another candidate leads", busy: contract.ENotLeader,
		released: "resigned"},
}

// holderCommands returns the subcommands of the lock or leader group.
func (a *app) holderCommands(purpose string) []*cobra.Command {
	var out []*cobra.Command
	for _, hc := range holderCmds {
		if hc.op.Purpose() == purpose {
			out = append(out, a.holderCommand(hc, holderGroups[purpose]))
		}
	}
	return out
}

// holderCommand builds one subcommand of lock or leader.
func (a *app) holderCommand(hc holderCmd, g holderGroup) *cobra.Command {
	var h holderFlags
	cmd := &cobra.Command{
		Use: hc.use, Short: hc.short, Long: hc.long, Example: hc.example,
		Args:              args("KEY"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			if hc.check != nil {
				k, err := a.key(args[0])
				if err != nil {
					return err
				}
				a.right = "read"
				l, err := hc.check(a.client, cmd.Context(), k)
				if err != nil {
					return err
				}
				if a.flavor.Seed && a.format == formatJSON {
					return a.writeSeedCheck(l, g.who)
				}
				return a.writeLock(l, g.who)
			}
			r, err := a.holderRequest(cmd, &h, g.flag, args[0])
			if err != nil {
				return err
			}
			if hc.release != nil {
				res, err := hc.release(a.client, cmd.Context(), r)
				if err != nil {
					return err
				}
				return a.writeReleased(res, g.released)
			}
			serverWait := hc.op == contract.OpLockAcquire
			l, err := a.take(cmd.Context(), h.wait, g.busy, serverWait, func(ctx context.Context, wait time.Duration) (client.Lock, error) {
				r.Wait = wait
				return hc.hold(a.client, ctx, r)
			})
			if err != nil {
				return err
			}
			if l.Reentered && g.note {
				fmt.Fprintf(a.stderr, "note: %s already held %s (holder from %s): the lease was renewed and the token is unchanged\n", printable(l.Holder), printable(l.Key), a.holderSource)
			}
			return a.writeLock(l, g.who)
		},
	}
	if hc.check == nil {
		h.addHolder(cmd, g.flag)
	}
	if hc.hold != nil {
		h.addTTL(cmd, g.what)
	}
	if hc.op.LockAction() == contract.LockAcquire {
		h.addWait(cmd, g.waitIf, hc.op == contract.OpLockAcquire)
	}
	return cmd
}
