package kvcli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// Sets: sadd, srem, sismember, smembers and scard (the seed's "Set
// Operations"). SET is a key, resolved like every command's (app.key: a
// short key is a path in the namespace). MEMBER is any text.

const setsLong = `

SET is a key (tenant/<t>/project/<p>/<path>), or a path in the namespace
(--table, KVSTORE_TABLE), e.g. --table tenant/acme/project/demo. Members are any
text up to 1024 bytes (not limited to key characters). A missing set
is empty. A key that holds anything but a set exits 1.`

// setCommand completes a set command on SET and the names of further
// arguments; run gets the resolved set key and the further arguments.
func (a *app) setsCommand(c *cobra.Command, right string, rest []string, run func(cmd *cobra.Command, set string, rest []string) error) *cobra.Command {
	return a.collectionCommand(c, collectionArg{"SET", setsLong}, right, rest, run)
}

func (a *app) saddCommand() *cobra.Command {
	return a.memberCommand("sadd", "Add a member to a set (creating the set)", `Add MEMBER to the set SET, creating the set. Adding a member that is
already there changes nothing (exit 0, "added": false), so sadd is safe
to repeat.

--format text prints "added MEMBER to SET (size N)" or "MEMBER is already
in SET (size N)", json {"set","added","size","version"}, value true or
false (added).`, `  kvctl sadd tenant/acme/project/demo/active-agents agent-123
  KVSTORE_TABLE=tenant/acme/project/demo kvctl sadd processed-messages "$message_id"`)
}

func (a *app) sremCommand() *cobra.Command {
	return a.memberCommand("srem", "Remove a member from a set", `Remove MEMBER from the set SET. Removing a member that is not there
changes nothing (exit 0, "removed": false). The set stays, empty, once
its last member is removed; 'kvctl delete SET' removes the whole set.

--format text prints "removed MEMBER from SET (size N)" or "MEMBER is
not in SET (size N)", json {"set","removed","size","version"}, value true
or false (removed).`, `  kvctl srem tenant/acme/project/demo/active-agents agent-123`)
}

// memberCommand is sadd or srem.
func (a *app) memberCommand(name, short, long, example string) *cobra.Command {
	var w writeFlags
	cmd := a.setsCommand(&cobra.Command{Use: name + " SET MEMBER", Short: short, Long: long, Example: example}, "write", []string{"MEMBER"},
		func(cmd *cobra.Command, set string, rest []string) error {
			r := client.SetRequest{Key: set, Member: rest[0], ExpectedVersion: w.expectedVersion(cmd), RequestID: w.requestID}
			if err := contract.ValidateMember("MEMBER", r.Member); err != nil {
				return &usageError{msg: err.Error(), cmd: a.cmdPath}
			}
			var (
				res client.SetChange
				err error
			)
			if name == "sadd" {
				if r.TTL, err = w.lease(); err != nil {
					return err
				}
				res, err = a.client.SAdd(cmd.Context(), r)
			} else {
				res, err = a.client.SRem(cmd.Context(), r)
			}
			if err != nil {
				return err
			}
			return a.writeSetChange(name, rest[0], res)
		})
	u := writeUsage{
		expected:  "change it only if the set is at this version (0: it must not exist)",
		requestID: "idempotency id (kvctl gives one when none is given, so its retries never apply twice)",
	}
	if name == "sadd" {
		u.ttl = "expire the whole set this long after the change: a duration (30s, 24h) or seconds"
	}
	w.add(cmd, u)
	return cmd
}

// writeSetChange prints the answer of sadd or srem.
func (a *app) writeSetChange(name, member string, res client.SetChange) error {
	changed := res.Added
	if name == "srem" {
		changed = res.Removed
	}
	switch a.format {
	case formatJSON:
		return a.writeJSON(res)
	case formatValue:
		if changed == nil {
			return nil
		}
		_, err := fmt.Fprintln(a.stdout, *changed)
		return err
	}
	var text string
	switch {
	case changed == nil: // no read right: the server did not say
		text = fmt.Sprintf("%s %s (version %d)", name, member, res.Version)
	case name == "sadd" && *changed:
		text = fmt.Sprintf("added %s to %s (size %d)", member, res.Set, res.Size)
	case name == "sadd":
		text = fmt.Sprintf("%s is already in %s (size %d)", member, res.Set, res.Size)
	case *changed:
		text = fmt.Sprintf("removed %s from %s (size %d)", member, res.Set, res.Size)
	default:
		text = fmt.Sprintf("%s is not in %s (size %d)", member, res.Set, res.Size)
	}
	_, err := fmt.Fprintln(a.stdout, printable(text))
	return err
}

func (a *app) sismemberCommand() *cobra.Command {
	return a.setsCommand(&cobra.Command{
		Use:   "sismember SET MEMBER",
		Short: "Exit 0 if MEMBER is in the set, 1 if not",
		Long: `Check whether MEMBER belongs to the set SET: exit 0 if it does, 1 if
not (or the set does not exist). The read is as fresh as get's.

--format text and value print nothing (the exit code is the answer), json
{"set","isMember"}.`,
		Example: `  kvctl sismember tenant/acme/project/demo/processed-messages "$message_id" && echo "already processed"
  kvctl sismember processed-messages "$message_id" --table tenant/acme/project/demo --format json`,
	}, "read", []string{"MEMBER"}, func(cmd *cobra.Command, set string, rest []string) error {
		if err := contract.ValidateMember("MEMBER", rest[0]); err != nil {
			return &usageError{msg: err.Error(), cmd: a.cmdPath}
		}
		in, err := a.client.SIsMember(cmd.Context(), set, rest[0])
		if err != nil {
			return err
		}
		if a.format == formatJSON {
			if err := a.writeJSON(contract.IsMemberAnswer{Set: set, IsMember: in}); err != nil {
				return err
			}
		}
		if !in {
			return &exitError{code: exitFailed}
		}
		return nil
	})
}

func (a *app) scardCommand() *cobra.Command {
	return a.setsCommand(&cobra.Command{
		Use:   "scard SET",
		Short: "Print the number of members of a set",
		Long: `Print how many members the set SET has (0 when it does not exist).

--format text and value print the number, json {"set","size"}.`,
		Example: `  kvctl scard tenant/acme/project/demo/active-agents`,
	}, "read", nil, func(cmd *cobra.Command, set string, _ []string) error {
		n, err := a.client.SCard(cmd.Context(), set)
		if err != nil {
			return err
		}
		if a.format == formatJSON {
			return a.writeJSON(contract.CardAnswer{Set: set, Size: n})
		}
		_, err = fmt.Fprintln(a.stdout, strconv.FormatInt(n, 10))
		return err
	})
}

func (a *app) smembersCommand() *cobra.Command {
	var (
		limit  int
		cursor string
		all    bool
	)
	cmd := a.setsCommand(&cobra.Command{
		Use:   "smembers SET",
		Short: "List the members of a set",
		Long: `List the members of the set SET in bytewise order (none when it does
not exist). Each page sees every change acknowledged before it was sent.

Without --all, one page of at most --limit members (default 100) is
printed; when more follow, stderr says so and how to continue (--cursor).
With --all, every member is printed, fetched in pages of --limit.

--format json prints {"set","members":[...]} (and "cursor" when more
follow), text one member per line (escaped when not printable), value one
raw member per line.`,
		Example: `  kvctl smembers tenant/acme/project/demo/active-agents --all
  kvctl smembers tenant/acme/project/demo/active-agents --format json | jq -r '.members[]'`,
	}, "read", nil, func(cmd *cobra.Command, set string, _ []string) error {
		if limit < 0 || limit > contract.MaxListLimit {
			return &usageError{msg: fmt.Sprintf("--limit must be between 1 and %d", contract.MaxListLimit), cmd: a.cmdPath}
		}
		out := contract.MembersAnswer{Set: set, Members: []string{}}
		for {
			page, err := a.client.SMembersPage(cmd.Context(), set, cursor, limit)
			if err != nil {
				return err
			}
			out.Members = append(out.Members, page.Members...)
			out.Cursor, cursor = page.Cursor, page.Cursor
			if !all || cursor == "" {
				break
			}
		}
		var err error
		switch a.format {
		case formatJSON:
			err = a.writeJSON(out)
		default:
			for _, m := range out.Members {
				if a.format == formatText {
					m = printable(m)
				}
				if _, err = fmt.Fprintln(a.stdout, m); err != nil {
					break
				}
			}
		}
		if err == nil && out.Cursor != "" {
			fmt.Fprintf(a.stderr, "more members follow: add --cursor %s for the next page, or --all for every member\n", printable(out.Cursor))
		}
		return err
	})
	f := cmd.Flags()
	f.IntVar(&limit, "limit", 0, fmt.Sprintf("page size, 1 to %d (default %d)", contract.MaxListLimit, contract.DefaultListLimit))
	f.StringVar(&cursor, "cursor", "", "start after this cursor (the cursor of the previous page)")
	f.BoolVar(&all, "all", false, "print every member, fetching every page")
	return cmd
}

// isSetCommand reports whether the command path names a set command.
func isSetCommand(path string) bool {
	switch path {
	case "kvctl sadd", "kvctl srem", "kvctl sismember", "kvctl smembers", "kvctl scard":
		return true
	}
	return false
}

// collectionType is the type of the collection (set, queue, list) whose
// metadata the error's current value is, or "".
func collectionType(e *contract.Error) string {
	if e.Current == nil {
		return ""
	}
	m, err := contract.ParseCollectionMeta(e.Current.Value)
	if err != nil {
		return ""
	}
	return m.Type
}
