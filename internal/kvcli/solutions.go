package kvcli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/eskv/eskv/contract"
)

// trouble is what a command's Solution line reads: the command's flags,
// the error answer and the key as the user named it ("the key" when
// none was).
type trouble struct {
	a       *app
	e       *contract.Error
	subject string
}

// line is a command's Solution line for one kind of error answer; ""
// leaves the answer to the line every command shares.
type line func(t trouble) string

// solutions are the Solution lines a command, or a family of commands,
// gives in place of the lines every command shares: one field per kind
// of error answer whose advice depends on the command. A command gets a
// kind's line from the first row that matches it and has one; no two
// rows matching one command fill the same field (the rows'
// commands are disjoint per field), so the rows' order does not matter.
// A new command with advice of its own is one row.
type solutions struct {
	cmds func(path string) bool // the commands of the row, by path ("kvctl lock acquire")
	// absent answers not_found of the key, or of a field (e.Field says
	// which).
	absent line
	// held answers lock_held, not_lock_holder and not_leader.
	held line
	// wrongType answers wrong_type; it comes before the shared line of a
	// key that is a collection (see notCollection).
	wrongType line
	// ttl answers invalid ttlSeconds (or semantics.ttlSeconds).
	ttl string
}

// commandSolutions are the commands' own Solution lines.
var commandSolutions = []solutions{
	{cmds: is("kvctl inc", "kvctl dec"),
		absent: fixed("start the counter from 0 with --create"),
		wrongType: func(t trouble) string {
			return fmt.Sprintf("%s holds %s, not an integer: counters are JSON integers; use another key, or reset it with 'kvctl set %s 0'", t.subject, t.value(), t.subject)
		}},
	{cmds: under("kvctl field"), wrongType: func(t trouble) string {
		return fmt.Sprintf("%s holds %s, not a JSON object: fields live in objects; use another key, or replace its value with 'kvctl set %s '{...}''", t.subject, t.value(), t.subject)
	}},
	{cmds: is("kvctl field get"), absent: func(t trouble) string {
		if t.e.Field != "field" {
			return ""
		}
		return fmt.Sprintf("%s has no field %s: set it with 'kvctl field set %s %s=VALUE' (see the whole value with 'kvctl get %s')", t.subject, t.a.field, t.subject, t.a.field, t.subject)
	}},
	{cmds: is("kvctl field set", "kvctl field cas"), absent: func(t trouble) string {
		return "start it from {} with --create, or create it with 'kvctl set " + t.subject + " '{...}''"
	}},
	{cmds: is("kvctl update"), absent: func(t trouble) string {
		return "hand the command null with --create to create it, or create it with 'kvctl set " + t.subject + " VALUE'"
	}},
	{cmds: under("kvctl lock", "kvctl leader"),
		wrongType: notCollection(func(t trouble) string {
			return fmt.Sprintf("%s holds %s and is not a %s: give the lock or leader pool a key of its own", t.subject, t.value(), strings.Fields(t.a.cmdPath)[1])
		}),
		ttl: fmt.Sprintf("--ttl (the lease) is %s; leave it out for the server's default of %ds", ttlRange(), contract.DefaultLockTTLSeconds)},
	{cmds: is("kvctl lock check"), absent: func(t trouble) string {
		return "the lock is free: take it with 'kvctl lock acquire " + t.subject + "'"
	}},
	{cmds: is("kvctl leader check"), absent: func(t trouble) string {
		return "the pool has no leader: become it with 'kvctl leader elect " + t.subject + "'"
	}},
	{cmds: is("kvctl leader elect"), held: func(t trouble) string {
		if t.e.Field == "key" || t.e.Code != contract.ENotLeader { // a plain write's refusal, or a lock's
			return ""
		}
		holder, _ := holding(t.e)
		return fmt.Sprintf("%s%s leads: stay a candidate and elect again later (or with --wait DURATION); see 'kvctl leader check %s'", t.a.waitedNote(), holder, t.subject)
	}},
	{cmds: isSetCommand, wrongType: func(t trouble) string {
		return fmt.Sprintf("%s holds %s and is not a set: give the set a key of its own", t.subject, t.value())
	}},
	{cmds: isListCommand, wrongType: func(t trouble) string {
		return fmt.Sprintf("%s holds %s and is not a list: give the list a key of its own", t.subject, t.value())
	}},
	{cmds: is("kvctl lpop", "kvctl rpop"), absent: func(t trouble) string {
		return fmt.Sprintf("%s is empty: push a value with 'kvctl rpush %s VALUE'", t.subject, t.subject)
	}},
	{cmds: isQueueCommand, wrongType: func(t trouble) string {
		return fmt.Sprintf("%s holds %s and is not a queue: give the queue a key of its own", t.subject, t.value())
	}},
	{cmds: is("kvctl touch"),
		absent: func(t trouble) string {
			return fmt.Sprintf("a touch never creates a key, and %s is absent, deleted or expired: write it with 'kvctl set %s VALUE --ttl DURATION'", t.subject, t.subject)
		},
		held: func(t trouble) string {
			if t.e.Field != "key" {
				return ""
			}
			return touchLockSolution(t.subject, t.e)
		},
		wrongType: notCollection(func(t trouble) string { return touchLockSolution(t.subject, t.e) }),
		ttl:       "--ttl is " + ttlRange() + "; --persist removes the expiry"},
	{cmds: is("kvctl session keepalive", "kvctl session revoke", "kvctl session get"), absent: func(t trouble) string {
		return fmt.Sprintf("the session %s ended (revoked, deleted, or expired with no keep-alive within its TTL), and with it its keys and locks: start a new one with 'kvctl session create %s --ttl DURATION'", t.subject, t.subject)
	}},
	{cmds: is("kvctl history"), absent: func(t trouble) string {
		return fmt.Sprintf("check the key (a deleted key keeps its history, so this one never existed), or look for keys with 'kvctl list %s'", projectPrefix(t.subject))
	}},
}

// commandLine is the Solution line t's command gives for the kind of
// answer pick selects, or "" when the shared line answers.
func commandLine(t trouble, pick func(solutions) line) string {
	for _, s := range commandSolutions {
		if l := pick(s); l != nil && s.cmds(t.a.kind) {
			if out := l(t); out != "" {
				return out
			}
		}
	}
	return ""
}

// ttlSolution is the Solution line cmd gives for an invalid ttlSeconds,
// or "" when the shared line answers.
func ttlSolution(cmd string) string {
	for _, s := range commandSolutions {
		if s.ttl != "" && s.cmds(cmd) {
			return s.ttl
		}
	}
	return ""
}

// is matches the commands named.
func is(paths ...string) func(string) bool {
	return func(p string) bool { return slices.Contains(paths, p) }
}

// under matches the commands whose path starts with one of prefixes.
func under(prefixes ...string) func(string) bool {
	return func(p string) bool {
		return slices.ContainsFunc(prefixes, func(pre string) bool { return strings.HasPrefix(p, pre) })
	}
}

// fixed is a line that does not depend on the answer.
func fixed(s string) line { return func(trouble) string { return s } }

// notCollection answers wrong_type with l unless the key is a collection,
// which the shared line answers (what the key is, and which commands
// change it).
func notCollection(l line) line {
	return func(t trouble) string {
		if collectionType(t.e) != "" {
			return ""
		}
		return l(t)
	}
}

// value is the key's value for a message, shortened, or "another kind of
// value" when the answer has none (the token may not read the key).
func (t trouble) value() string {
	if t.e.Current != nil && t.e.Current.Value != nil {
		return shorten(string(t.e.Current.Value))
	}
	return "another kind of value"
}
