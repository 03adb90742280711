package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/api/client"
	"github.com/eskv/eskv/events"
)

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
	cmd.AddCommand(a.leaderElectCommand(), a.leaderHeartbeatCommand(), a.leaderCheckCommand(), a.leaderResignCommand())
	return cmd
}

func (a *app) leaderElectCommand() *cobra.Command {
	var h holderFlags
	cmd := &cobra.Command{
		Use:   "elect KEY",
		Short: "Become the pool's leader if it has none (or renew)",
		Long: `Make the candidate the leader of the pool at KEY if it has none, for a
lease of --ttl; when it already leads, the lease is renewed (the token
stays). When another candidate leads, exit 4 at once, or with --wait keep
trying (exponential backoff with jitter) until it may lead or --wait has
passed.

--format text prints the leadership on lines, json {"key","holder",
"token","version","acquiredAt","expiresAt","reentered"} (holder is the
leader), value the fencing token.`,
		Example: `  kvctl leader elect tenant/acme/project/demo/leaders/scheduler --id sched-1 --ttl 15s
  while ! kvctl leader elect tenant/acme/project/demo/leaders/scheduler --id "$HOSTNAME" 2>/dev/null; do sleep 5; done
  kvctl leader elect tenant/acme/project/demo/leaders/scheduler --wait 1m --format value`,
		Args:              args("KEY"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.holderRequest(cmd, &h, "id", args[0])
			if err != nil {
				return err
			}
			l, err := a.take(cmd.Context(), h.wait, events.ENotLeader, func(ctx context.Context) (client.Lock, error) {
				return a.client.Elect(ctx, r)
			})
			if err != nil {
				return err
			}
			return a.writeLock(l, "leader")
		},
	}
	h.addHolder(cmd, "id")
	h.addTTL(cmd, "leadership")
	h.addWait(cmd, "another candidate leads")
	return cmd
}

func (a *app) leaderHeartbeatCommand() *cobra.Command {
	var h holderFlags
	cmd := &cobra.Command{
		Use:   "heartbeat KEY",
		Short: "Renew this candidate's leadership",
		Long: `Renew the leadership of the candidate: its lease now ends --ttl from now.
When the candidate does not lead (any more), exit 4: it must stop acting
as the leader.

Output as leader elect.`,
		Example: `  kvctl leader heartbeat tenant/acme/project/demo/leaders/scheduler --id sched-1 --ttl 15s
  kvctl leader heartbeat tenant/acme/project/demo/leaders/scheduler --id sched-1 || stop_scheduling`,
		Args:              args("KEY"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.holderRequest(cmd, &h, "id", args[0])
			if err != nil {
				return err
			}
			l, err := a.client.Heartbeat(cmd.Context(), r)
			if err != nil {
				return err
			}
			return a.writeLock(l, "leader")
		},
	}
	h.addHolder(cmd, "id")
	h.addTTL(cmd, "leadership")
	return cmd
}

func (a *app) leaderResignCommand() *cobra.Command {
	var h holderFlags
	cmd := &cobra.Command{
		Use:   "resign KEY",
		Short: "End this candidate's leadership",
		Long: `End the candidate's leadership of the pool at KEY, so another candidate
can be elected at once. When the candidate does not lead, exit 4.

--format text prints "KEY resigned at version N", json
{"key","version","released":true}, value the version.`,
		Example:           `  kvctl leader resign tenant/acme/project/demo/leaders/scheduler --id sched-1`,
		Args:              args("KEY"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.holderRequest(cmd, &h, "id", args[0])
			if err != nil {
				return err
			}
			res, err := a.client.Resign(cmd.Context(), r)
			if err != nil {
				return err
			}
			return a.writeReleased(res, "resigned")
		},
	}
	h.addHolder(cmd, "id")
	return cmd
}

func (a *app) leaderCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check KEY",
		Short: "Print the pool's leader; exit 1 if it has none",
		Long: `Print the leader, token and lease of the pool at KEY. A pool without a
leader (never elected, resigned, or its lease ended) exits 1.

Output as leader elect (reentered is always false).`,
		Example: `  kvctl leader check tenant/acme/project/demo/leaders/scheduler
  kvctl leader check tenant/acme/project/demo/leaders/scheduler --format json | jq -r .holder`,
		Args:              args("KEY"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.subject, a.right = args[0], "read"
			l, err := a.client.Leader(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.writeLock(l, "leader")
		},
	}
}
