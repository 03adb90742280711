package kvcli

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// Lists: lpush, rpush, lpop, rpop, lrange, ltrim and llen (the seed's
// "List Operations" and use case 7). LIST is a key, resolved like every
// command's (app.key). VALUE is text, pushed as a JSON string as the
// seed's examples push it, or JSON with --json.

var listsLong = collectionLong("LIST", "list")

// listCommand completes a list command on LIST and the names of further
// arguments; run gets the resolved list key and the further arguments.
func (a *app) listsCommand(c *cobra.Command, right string, rest []string, run func(cmd *cobra.Command, list string, rest []string) error) *cobra.Command {
	return a.collectionCommand(c, collectionArg{"LIST", listsLong}, right, rest, run)
}

func (a *app) lpushCommand() *cobra.Command {
	return a.pushCommand("lpush", "Prepend a value to a list (creating the list)", `  kvctl lpush tenant/acme/project/demo/recent-logs "Error at 12:34:56"
  KVSTORE_TABLE=tenant/acme/project/demo kvctl lpush activity-log "User login at $(date)"`)
}

func (a *app) rpushCommand() *cobra.Command {
	return a.pushCommand("rpush", "Append a value to a list (creating the list)", `  kvctl rpush tenant/acme/project/demo/task-queue "Task 123"
  kvctl rpush tenant/acme/project/demo/task-queue '{"task":123}' --json`)
}

// pushCommand is lpush or rpush.
func (a *app) pushCommand(name, short, example string) *cobra.Command {
	var (
		w    writeFlags
		rule valueRule
	)
	end := "front"
	if name == "rpush" {
		end = "end"
	}
	cmd := a.listsCommand(&cobra.Command{Use: name + " LIST VALUE", Short: short, Example: example,
		Long: fmt.Sprintf(`Push VALUE at the %s of the list LIST, creating the list. 
`+valueRuleHelp+`

--format text prints "pushed to LIST (length N)", json
{"list","value","length","version"}, value the length.`, end)},
		"write", []string{"VALUE"}, func(cmd *cobra.Command, list string, rest []string) error {
			value, err := rule.parse(rest[0], "VALUE", a.cmdPath)
			if err != nil {
				return err
			}
			r := client.PushRequest{Key: list, Value: value, ExpectedVersion: w.expectedVersion(cmd), RequestID: w.requestID}
			if r.TTL, err = w.lease(); err != nil {
				return err
			}
			var res client.ListChange
			if name == "lpush" {
				res, err = a.client.LPush(cmd.Context(), r)
			} else {
				res, err = a.client.RPush(cmd.Context(), r)
			}
			if err != nil {
				return err
			}
			return a.writeListChange(fmt.Sprintf("pushed to %s (length %d)", res.List, res.Length), res, false)
		})
	w.add(cmd, writeUsage{
		expected:  "change it only if the list is at this version (0: it must not exist)",
		ttl:       "expire the whole list this long after the change: a duration (30s, 24h) or seconds",
		requestID: "idempotency id (kvctl gives one when none is given, so its retries never apply twice)",
	})
	rule.add(cmd)
	return cmd
}

func (a *app) lpopCommand() *cobra.Command {
	return a.popCommand("lpop", "Remove and print the first value of a list", `  kvctl lpop tenant/acme/project/demo/recent-logs`)
}

func (a *app) rpopCommand() *cobra.Command {
	return a.popCommand("rpop", "Remove and print the last value of a list", `  kvctl rpop tenant/acme/project/demo/task-queue`)
}

// popCommand is lpop or rpop.
func (a *app) popCommand(name, short, example string) *cobra.Command {
	end := "first"
	if name == "rpop" {
		end = "last"
	}
	var wait time.Duration
	cmd := a.listsCommand(&cobra.Command{Use: name + " LIST", Short: short, Example: example,
		Long: fmt.Sprintf(`Remove the %s value of the list LIST and print it. An empty or missing
list exits 1 ("LIST is empty"), as get of a missing key does: at once, or
with --wait (up to 30s) once the server held the pop that long without a
value arriving (waiting pops are served in arrival order).

--format json prints {"list","value","length","version"} (the seed's
{"list","value"}), text and value the value (text as it is stored, a
JSON string printed without its quotes).`, end)},
		"write", nil, func(cmd *cobra.Command, list string, _ []string) error {
			w, err := a.popWait(wait)
			if err != nil {
				return err
			}
			var res client.ListChange
			if name == "lpop" {
				res, err = a.client.LPopWait(cmd.Context(), list, w)
			} else {
				res, err = a.client.RPopWait(cmd.Context(), list, w)
			}
			if err != nil {
				return err
			}
			return a.writeListChange(listText(res.Value), res, true)
		})
	addPopWait(cmd, &wait, "value")
	return cmd
}

func (a *app) ltrimCommand() *cobra.Command {
	return a.listsCommand(&cobra.Command{Use: "ltrim LIST START STOP", Short: "Keep only a range of a list",
		Long: `Keep the values of the list LIST from index START to STOP (inclusive; a
negative index counts from the end, -1 the last), as Redis LTRIM: 'ltrim
LIST 0 999' keeps the first 1000. It costs the same whatever the list's
length (only the list's head and length change).

--format text prints "LIST keeps N values", json
{"list","length","version"}, value the length.`,
		Example: `  kvctl ltrim tenant/acme/project/demo/activity-log 0 999`},
		"write", []string{"START", "STOP"}, func(cmd *cobra.Command, list string, rest []string) error {
			start, stop, err := a.indexes(rest)
			if err != nil {
				return err
			}
			res, err := a.client.LTrim(cmd.Context(), list, start, stop)
			if err != nil {
				return err
			}
			return a.writeListChange(fmt.Sprintf("%s keeps %d values", res.List, res.Length), res, false)
		})
}

func (a *app) lrangeCommand() *cobra.Command {
	return a.listsCommand(&cobra.Command{Use: "lrange LIST START STOP", Short: "Print a range of a list",
		Long: fmt.Sprintf(`Print the values of the list LIST from index START to STOP (inclusive; a
negative index counts from the end: 0 -1 is the whole list), as Redis
LRANGE. It sees every change acknowledged before it was sent. At most %d
values are printed, fewer when their bytes pass the server's page budget;
stderr says when the range held more and the START to ask for the rest.

--format json prints {"list","values":[...]}, text and value one value
per line (a JSON string without its quotes; text escaped when not
printable).`, contract.MaxRange),
		Example: `  kvctl lrange tenant/acme/project/demo/activity-log 0 99
  kvctl lrange recent-logs 0 9 --table tenant/acme/project/demo`},
		"read", []string{"START", "STOP"}, func(cmd *cobra.Command, list string, rest []string) error {
			start, stop, err := a.indexes(rest)
			if err != nil {
				return err
			}
			out, err := a.client.LRange(cmd.Context(), list, start, stop)
			if err != nil {
				return err
			}
			// lrange prints the seed's answer ({"list","values"}): the
			// read's position is told by listings (kvctl list).
			out.Position = ""
			if a.format == formatJSON {
				err = a.writeJSON(out)
			} else {
				for _, v := range out.Values {
					line := listText(v)
					if a.format == formatText {
						line = printable(line)
					}
					if _, err = fmt.Fprintln(a.stdout, line); err != nil {
						break
					}
				}
			}
			if err == nil && out.Truncated {
				fmt.Fprintf(a.stderr, "the range holds more than one page of values: ask for the rest from START %d\n", start+int64(len(out.Values)))
			}
			return err
		})
}

func (a *app) llenCommand() *cobra.Command {
	return a.listsCommand(&cobra.Command{Use: "llen LIST", Short: "Print the length of a list",
		Long: `Print how many values the list LIST holds (0 when it does not exist).

--format text and value print the number, json {"list","length"}.`,
		Example: `  kvctl llen tenant/acme/project/demo/activity-log`},
		"read", nil, func(cmd *cobra.Command, list string, _ []string) error {
			n, err := a.client.LLen(cmd.Context(), list)
			if err != nil {
				return err
			}
			if a.format == formatJSON {
				return a.writeJSON(contract.LenAnswer{List: list, Length: n})
			}
			_, err = fmt.Fprintln(a.stdout, strconv.FormatInt(n, 10))
			return err
		})
}

// indexes parses START and STOP.
func (a *app) indexes(rest []string) (start, stop int64, err error) {
	for i, name := range []string{"START", "STOP"} {
		n, perr := strconv.ParseInt(strings.TrimPrefix(rest[i], " "), 10, 64)
		if perr != nil {
			return 0, 0, &usageError{msg: fmt.Sprintf("%s must be an integer (negative counts from the end), not %q", name, strings.TrimPrefix(rest[i], " ")), cmd: a.cmdPath}
		}
		if i == 0 {
			start = n
		} else {
			stop = n
		}
	}
	return start, stop, nil
}

// listText is a value as text and value print it: a JSON string without
// its quotes, any other JSON as it is.
func listText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

// writeListChange prints the answer of a list write: json the answer,
// text the line given, value the popped value (pop) or the length.
func (a *app) writeListChange(text string, res client.ListChange, pop bool) error {
	switch a.format {
	case formatJSON:
		return a.writeJSON(res)
	case formatValue:
		if pop {
			text = listText(res.Value)
		} else {
			text = strconv.FormatInt(res.Length, 10)
		}
		_, err := fmt.Fprintln(a.stdout, text)
		return err
	}
	_, err := fmt.Fprintln(a.stdout, printable(text))
	return err
}

// isListCommand reports whether the command path names a list command.
func isListCommand(path string) bool {
	switch path {
	case "kvctl lpush", "kvctl rpush", "kvctl lpop", "kvctl rpop", "kvctl lrange", "kvctl ltrim", "kvctl llen":
		return true
	}
	return false
}

var negativeInt = regexp.MustCompile(`^-[0-9]+$`)

// negativeIndexes keeps the negative START and STOP of lrange and ltrim
// ('lrange LIST 0 -1', as Redis users type it) from being read as
// shorthand flags: after the command's name, such an argument gets a
// leading space, which the flag parser leaves alone and indexes strips.
// Neither command has a flag that takes a negative number.
func negativeIndexes(args []string) []string {
	out := slices.Clone(args)
	in := false
	for i, a := range out {
		switch {
		case a == "--":
			return out
		case a == "lrange" || a == "ltrim":
			in = true
		case in && negativeInt.MatchString(a):
			out[i] = " " + a
		}
	}
	return out
}
