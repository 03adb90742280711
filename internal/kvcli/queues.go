package kvcli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// Queues: queue push, pop, peek, size and ack (the seed's "Queue
// Operations" and use case 3). QUEUE is a key, resolved like every
// command's (app.key). DATA is JSON; text that is not JSON is pushed as a
// JSON string, so the seed's '{"task": "t", "params": {...}}' (not JSON)
// is pushed as it is written rather than refused.

var queuesLong = collectionLong("QUEUE", "queue")

// queueVisibilityEnv is the seed's default of pop --visibility-timeout.
const queueVisibilityEnv = "KVSTORE_QUEUE_VISIBILITY"

func (a *app) queueCommand() *cobra.Command {
	cmd := a.groupCommand(&cobra.Command{
		Use:   "queue",
		Short: "Push, pop, peek, size and acknowledge queue items",
		Long: `A queue is one key holding JSON items, served lowest priority first and
first in, first out within a priority. A pop removes the next item, or
with --visibility-timeout (or ` + queueVisibilityEnv + `) hides it until its
deadline: acknowledge it with 'queue ack QUEUE RECEIPT' before then, or it
is delivered again. Each item is delivered to one consumer at a time.

Exit codes: 0 done; 1 a stale receipt (ack) or a key that is not a queue;
4 the queue has no visible item (pop).`,
		Example: `  kvctl queue push tenant/acme/project/demo/tasks '{"task": "analyze-logs"}'
  task=$(kvctl queue pop tenant/acme/project/demo/tasks --visibility-timeout 300) &&
    kvctl queue ack tenant/acme/project/demo/tasks "$(echo "$task" | jq -r .receipt)"`,
	})
	cmd.AddCommand(a.qpushCommand(), a.qpopCommand(), a.qpeekCommand(), a.qsizeCommand(), a.qackCommand())
	return cmd
}

// queuesCommand completes a queue command on QUEUE and the names of
// further arguments; run gets the resolved queue key and the further
// arguments.
func (a *app) queuesCommand(c *cobra.Command, right string, rest []string, run func(cmd *cobra.Command, queue string, rest []string) error) *cobra.Command {
	return a.collectionCommand(c, collectionArg{"QUEUE", queuesLong}, right, rest, run)
}

func (a *app) qpushCommand() *cobra.Command {
	var (
		w        writeFlags
		priority int64
		dedupID  string
		itemTTL  string
		rule     valueRule
	)
	cmd := a.queuesCommand(&cobra.Command{Use: "push QUEUE DATA", Short: "Push an item onto a queue (creating the queue)",
		Long: fmt.Sprintf(`Push DATA onto the queue QUEUE, creating the queue. DATA follows
the rule of every VALUE: JSON when it is valid JSON, else text pushed as a
JSON string; --json requires JSON, --string forces a string. --priority orders items
(lower first, %d..%d, default 0); items of one priority are served in
push order. A push repeating a --dedup-id within the server's dedup window
(ESKV_QUEUE_DEDUP_WINDOW) adds nothing ("deduplicated": true).
--item-ttl expires this item alone (a duration or seconds): it is never
served after, and the server's sweeper removes it; --ttl expires the
whole queue.

--format text prints "pushed ITEM to QUEUE (size N)", json
{"queue","item","priority","size","version","deduplicated"?}, value the
item.`, -contract.MaxPriority, contract.MaxPriority),
		Example: `  kvctl queue push tenant/acme/project/demo/tasks '{"task": "analyze-logs", "params": {"day": 1}}'
  kvctl queue push tasks '{"task": "urgent"}' --priority 1 --table tenant/acme/project/demo
  KVSTORE_TABLE=tenant/acme/project/demo kvctl queue push tasks '{"task": "idempotent"}' --dedup-id task-123
  kvctl queue push tenant/acme/project/demo/tasks '{"task": "fresh-only"}' --item-ttl 10m`},
		"write", []string{"DATA"}, func(cmd *cobra.Command, queue string, rest []string) error {
			data, err := rule.parse(rest[0], "DATA", a.cmdPath)
			if err != nil {
				return err
			}
			r := client.QPushRequest{Key: queue, Data: data, Priority: priority, DedupID: dedupID,
				ExpectedVersion: w.expectedVersion(cmd), RequestID: w.requestID}
			if r.TTL, err = w.lease(); err != nil {
				return err
			}
			if r.ItemTTL, err = a.itemTTL(itemTTL); err != nil {
				return err
			}
			res, err := a.client.QPush(cmd.Context(), r)
			if err != nil {
				return err
			}
			text := fmt.Sprintf("pushed %s to %s (size %d)", res.Item, res.Queue, res.Size)
			if res.Deduplicated {
				text = fmt.Sprintf("%s already holds --dedup-id %s as %s: nothing pushed (size %d)", res.Queue, dedupID, res.Item, res.Size)
			}
			return a.writeQueueAnswer(res, text, res.Item)
		})
	w.add(cmd, writeUsage{
		expected:  "change it only if the queue is at this version (0: it must not exist)",
		ttl:       "expire the whole queue this long after the push: a duration (30s, 24h) or seconds",
		requestID: "idempotency id (kvctl gives one when none is given, so its retries never apply twice)",
	})
	rule.add(cmd)
	f := cmd.Flags()
	f.Int64Var(&priority, "priority", 0, "lower is served first")
	f.StringVar(&dedupID, "dedup-id", "", "push nothing if an item with this id was pushed within the dedup window")
	f.StringVar(&itemTTL, "item-ttl", "", "expire this item alone this long after the push (a duration such as 30s, 24h, or seconds): never served after")
	return cmd
}

// itemTTL is push's --item-ttl (0 when not given: the item never
// expires), a duration or seconds as --ttl.
func (a *app) itemTTL(flag string) (time.Duration, error) {
	if flag == "" {
		return 0, nil
	}
	d, err := parseTTL(flag)
	if err != nil {
		return 0, &usageError{msg: fmt.Sprintf("--item-ttl %q is not a whole number of seconds of at least 1s", flag),
			solution: "give a duration such as --item-ttl 30s, --item-ttl 24h, or seconds such as --item-ttl 3600", cmd: a.cmdPath}
	}
	return d, nil
}

// popOutput is pop's json: the seed's {"queue","data","receipt",
// "visibility_timeout"} first, then what eskv adds.
type popOutput struct {
	Queue             string          `json:"queue"`
	Data              json.RawMessage `json:"data"`
	Receipt           string          `json:"receipt"`
	VisibilityTimeout int64           `json:"visibility_timeout,omitempty"`
	Deadline          *time.Time      `json:"deadline,omitempty"`
	Item              string          `json:"item"`
	Priority          int64           `json:"priority"`
	Deliveries        int64           `json:"deliveries"`
	ExpiresAt         *time.Time      `json:"expiresAt,omitempty"`
	Size              int64           `json:"size"`
	Version           int64           `json:"version"`
}

func (a *app) qpopCommand() *cobra.Command {
	var (
		visibility string
		requestID  string
		wait       time.Duration
	)
	cmd := a.queuesCommand(&cobra.Command{Use: "pop QUEUE", Short: "Take the next item of a queue",
		Long: `Take the next item of the queue QUEUE (lowest priority, then oldest) and
print it. Without a visibility timeout it is removed at once. With
--visibility-timeout S (or ` + queueVisibilityEnv + ` when the flag is
absent; --visibility-timeout 0 removes at once whatever the variable says)
it is hidden for S seconds: acknowledge it with 'queue ack QUEUE RECEIPT'
before its deadline, or it returns to the queue and is delivered again
(with a new receipt). An empty or missing queue, or one whose items are
all in flight, exits 4: at once, or with --wait (up to 30s) once the
server held the pop that long without an item arriving (waiting pops are
served in arrival order, as soon as an item is pushed).

--format json prints {"queue","data","receipt","visibility_timeout"?,
"deadline"?,"item","priority","deliveries","expiresAt"?,"size","version"}, text the
data and receipt, value the data.`,
		Example: `  kvctl queue pop tenant/acme/project/demo/tasks
  kvctl queue pop tasks --visibility-timeout 300 --table tenant/acme/project/demo
  kvctl queue pop tenant/acme/project/demo/tasks --wait 30s
  KVSTORE_QUEUE_VISIBILITY=60 kvctl queue pop tenant/acme/project/demo/tasks`},
		"write", nil, func(cmd *cobra.Command, queue string, _ []string) error {
			r := client.QPopRequest{Key: queue, RequestID: requestID}
			var err error
			if r.Wait, err = a.popWait(wait); err != nil {
				return err
			}
			if r.Visibility, err = a.popVisibility(cmd, visibility); err != nil {
				return err
			}
			res, err := a.client.QPop(cmd.Context(), r)
			if err != nil {
				return err
			}
			return a.writePop(res)
		})
	f := cmd.Flags()
	f.StringVar(&visibility, "visibility-timeout", "", "hide the item this long (seconds or a duration) until acknowledged, instead of removing it (default "+queueVisibilityEnv+", else remove at once)")
	f.StringVar(&requestID, "request-id", "", "idempotency id (kvctl gives one when none is given, so a retried pop answers the item it took)")
	addPopWait(cmd, &wait, "item")
	return cmd
}

// addPopWait adds a pop's --wait.
func addPopWait(cmd *cobra.Command, wait *time.Duration, what string) {
	durationVar(cmd.Flags(), wait, "wait", 0, fmt.Sprintf("when empty, have the server hold the pop up to this long (at most %v) until an %s arrives", contract.MaxWait, what))
}

// popWait checks a pop's --wait.
func (a *app) popWait(wait time.Duration) (time.Duration, error) {
	if wait < 0 || wait > contract.MaxWait {
		return 0, &usageError{msg: fmt.Sprintf("--wait %v is outside 0 to %v", wait, contract.MaxWait), solution: "give how long the server may hold the pop, e.g. --wait 30s", cmd: a.cmdPath}
	}
	return wait, nil
}

// popVisibility is --visibility-timeout when given (0 removes at once),
// else KVSTORE_QUEUE_VISIBILITY, else 0.
func (a *app) popVisibility(cmd *cobra.Command, flag string) (time.Duration, error) {
	if !cmd.Flags().Changed("visibility-timeout") {
		return a.envTTL(queueVisibilityEnv)
	}
	if n, err := strconv.ParseInt(flag, 10, 64); err == nil && n == 0 {
		return 0, nil
	}
	d, err := parseTTL(flag)
	if err != nil {
		return 0, &usageError{msg: fmt.Sprintf("--visibility-timeout %q is not a whole number of seconds", flag),
			solution: "give seconds such as --visibility-timeout 300 or a duration such as 5m; 0 removes the item at once", cmd: a.cmdPath}
	}
	return d, nil
}

// writePop prints a pop's answer: json popOutput, value the data, text
// the data and, with a visibility timeout, the receipt and deadline.
func (a *app) writePop(res client.QueuePop) error {
	switch a.format {
	case formatJSON:
		return a.writeJSON(popOutput{Queue: res.Queue, Data: res.Data, Receipt: res.Receipt, VisibilityTimeout: res.VisibilityTimeout,
			Deadline: res.Deadline, Item: res.Item, Priority: res.Priority, Deliveries: res.Deliveries, ExpiresAt: res.ExpiresAt, Size: res.Size, Version: res.Version})
	case formatValue:
		return writeValue(a.stdout, res.Data)
	}
	lines := []string{fmt.Sprintf("popped %s from %s (size %d, delivery %d)", res.Item, res.Queue, res.Size, res.Deliveries),
		"data     " + printable(string(res.Data))}
	if res.Deadline != nil {
		lines = append(lines, "receipt  "+printable(res.Receipt),
			"deadline "+timeText(*res.Deadline)+" (ack before it, or the item is delivered again)")
	} else {
		lines = append(lines, "removed (no visibility timeout: nothing to ack)")
	}
	_, err := fmt.Fprintln(a.stdout, strings.Join(lines, "\n"))
	return err
}

func (a *app) qpeekCommand() *cobra.Command {
	var count int
	cmd := a.queuesCommand(&cobra.Command{Use: "peek QUEUE", Short: "Print the next items of a queue without taking them",
		Long: fmt.Sprintf(`Print the next --count ready items of the queue QUEUE (1 to %d,
default 1) in serving order, removing nothing. Items in flight (popped
with a visibility timeout, not acknowledged, deadline not passed) are not
shown.

--format json prints {"queue","items":[{"item","data","priority",
"deliveries"}]}, text one "ITEM  priority P  deliveries D  DATA" line per
item, value one data per line.`, contract.MaxPeek),
		Example: `  kvctl queue peek tenant/acme/project/demo/tasks
  kvctl queue peek tasks --count 10 --table tenant/acme/project/demo`},
		"read", nil, func(cmd *cobra.Command, queue string, _ []string) error {
			if count < 1 || count > contract.MaxPeek {
				return &usageError{msg: fmt.Sprintf("--count must be between 1 and %d, not %d", contract.MaxPeek, count), cmd: a.cmdPath}
			}
			items, err := a.client.QPeek(cmd.Context(), queue, count)
			if err != nil {
				return err
			}
			return a.writePeek(queue, items)
		})
	cmd.Flags().IntVar(&count, "count", 1, "how many items to print")
	return cmd
}

// writePeek prints peeked items in a.format.
func (a *app) writePeek(queue string, items []client.QueueItem) error {
	if a.format == formatJSON {
		if items == nil {
			items = []client.QueueItem{}
		}
		return a.writeJSON(contract.QPeekAnswer{Queue: queue, Items: items})
	}
	for _, it := range items {
		line := string(it.Data)
		if a.format == formatText {
			expires := ""
			if it.ExpiresAt != nil {
				expires = "  expires " + timeText(*it.ExpiresAt)
			}
			line = printable(fmt.Sprintf("%s  priority %d  deliveries %d%s  %s", it.Item, it.Priority, it.Deliveries, expires, it.Data))
		}
		if _, err := fmt.Fprintln(a.stdout, line); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) qsizeCommand() *cobra.Command {
	return a.queuesCommand(&cobra.Command{Use: "size QUEUE", Short: "Print how many items a queue holds",
		Long: `Print how many items the queue QUEUE holds: pushed and not yet removed
or acknowledged, in flight included (0 when it does not exist).

--format text and value print the number, json {"queue","size","inFlight"}.`,
		Example: `  kvctl queue size tenant/acme/project/demo/tasks`},
		"read", nil, func(cmd *cobra.Command, queue string, _ []string) error {
			res, err := a.client.QSize(cmd.Context(), queue)
			if err != nil {
				return err
			}
			return a.writeQueueAnswer(res, strconv.FormatInt(res.Size, 10), strconv.FormatInt(res.Size, 10))
		})
}

func (a *app) qackCommand() *cobra.Command {
	return a.queuesCommand(&cobra.Command{Use: "ack QUEUE RECEIPT", Short: "Acknowledge (remove) a popped item",
		Long: `Acknowledge the delivery RECEIPT names (the "receipt" of a pop with a
visibility timeout): the item is removed for good. A receipt that is not
the item's current delivery (acknowledged already, its deadline passed
and the item returned to the queue or was delivered again, unknown)
exits 1 and changes nothing.

--format text prints "acked RECEIPT (QUEUE size N)", json
{"queue","acked","size","version"}, value true.`,
		Example: `  kvctl queue ack tenant/acme/project/demo/tasks "$receipt"`},
		"write", []string{"RECEIPT"}, func(cmd *cobra.Command, queue string, rest []string) error {
			res, err := a.client.QAck(cmd.Context(), queue, rest[0])
			if err != nil {
				return err
			}
			return a.writeQueueAnswer(res, fmt.Sprintf("acked %s (%s size %d)", rest[0], res.Queue, res.Size), "true")
		})
}

// writeQueueAnswer prints a queue answer: json the answer, value the
// value given, text the line given.
func (a *app) writeQueueAnswer(res any, text, value string) error {
	switch a.format {
	case formatJSON:
		return a.writeJSON(res)
	case formatValue:
		text = value
	}
	_, err := fmt.Fprintln(a.stdout, printable(text))
	return err
}

// isQueueCommand reports whether the command path names a queue command.
func isQueueCommand(path string) bool {
	return strings.HasPrefix(path, "kvctl queue ")
}
