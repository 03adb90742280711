package kvcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

func (a *app) updateCommand() *cobra.Command {
	var (
		create bool
		w      writeFlags
		dead   deadLetterFlags
	)
	cmd := &cobra.Command{
		Use:   "update KEY [flags] -- CMD [ARG...]",
		Short: "Change a key's value with a command (read-modify-write, retried on conflict)",
		Long: `Read KEY, run CMD with its value (JSON) on stdin, and write what CMD prints
on stdout (one JSON value) as KEY's new value, compare-and-swap on the
version read: no other writer's change is lost. A missing key exits 1
unless --create hands CMD null.

When another writer changes KEY between the read and the write, kvctl
reads it again and runs CMD again after 1s, 2s, 4s, 8s, 16s and 32s (a
note on stderr says so each time); after the seventh attempt it gives up
(exit 1). Network errors and 503s are tried up to 5 times, with jitter. CMD
may run several times, so it should only compute the new value.

` + deadLetterHelp + `

CMD gets KVCTL_KEY and KVCTL_VERSION (0 when the key is absent) in its
environment. A CMD that fails ends kvctl with its exit status (127 when
not found, 126 when it cannot be started), and nothing is written;
output that is not JSON exits 2. --timeout bounds each call to the API.

--format text prints "KEY version N", json the entry after the change,
value the stored value.`,
		Example: `  kvctl update tenant/acme/project/demo/config -- jq '.limits.rps = 20'
  kvctl update tenant/acme/project/demo/visits --create -- jq '. + 1'
  kvctl update tenant/acme/project/demo/checkpoint --request-id sync-42 -- ./next-checkpoint.sh
  kvctl update tenant/acme/project/demo/cursor --dead-letter tenant/acme/project/demo/triage -- ./advance.sh`,
		Args: keyThenCommand("kvctl update takes KEY, then -- and the command that computes the new value",
			"e.g. kvctl update tenant/acme/project/demo/config -- jq '.limits.rps = 20'"),
		Annotations:       perCallAnnotation,
		ValidArgsFunction: a.completeKeyThenCommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := a.key(args[0])
			if err != nil {
				return err
			}
			argv := args[1:]
			a.right = "write"
			o := client.UpdateOptions{RequestID: w.requestID, SpecRef: w.specRef}
			if err := dead.apply(a, cmd, &o); err != nil {
				return err
			}
			if o.TTL, err = w.lease(); err != nil {
				return err
			}
			res, err := a.client.Update(cmd.Context(), key, func(cur *contract.Entry) (json.RawMessage, error) {
				if cur == nil && !create {
					return nil, contract.FieldErrorf(contract.ENotFound, "key", "key %s does not exist", key)
				}
				return a.transform(key, cur, argv)
			}, o)
			if err != nil {
				return err
			}
			a.noteReplayed(res.Replayed, w.requestID, "written")
			return a.writeEntry(res.Entry, fmt.Sprintf("%s version %d", res.Entry.Key, res.Entry.Version))
		},
	}
	cmd.Flags().BoolVar(&create, "create", false, "hand CMD null when the key is missing, and create it")
	dead.add(cmd)
	w.add(cmd, writeUsage{
		ttl:       "expire the entry this long after the change: a duration (30s, 24h) or seconds (default: keep its expiry)",
		requestID: "names the update (attempt N writes with ID-N): run again with the same id, it is not applied twice",
		specRef:   "reference to the spec or decision record the change follows",
	})
	return cmd
}

// transform runs CMD with the current value of key on stdin and returns
// the JSON value it prints.
func (a *app) transform(key string, cur *contract.Entry, argv []string) (json.RawMessage, error) {
	value, version := json.RawMessage("null"), int64(0)
	if cur != nil {
		value, version = cur.Value, cur.Version
	}
	c := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	c.Stdin, c.Stdout, c.Stderr = bytes.NewReader(append(value, '\n')), &out, a.stderr
	c.Env = append(os.Environ(), "KVCTL_KEY="+key, "KVCTL_VERSION="+strconv.FormatInt(version, 10))
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return nil, &exitError{code: exitStatus(c.ProcessState)}
	case err != nil:
		return nil, cannotRun(argv[0], err, "nothing was written")
	}
	next := bytes.TrimSpace(out.Bytes())
	if !json.Valid(next) {
		printed := "nothing"
		if len(next) > 0 {
			printed = shorten(string(next)) + ", which is not one JSON value"
		}
		return nil, &failure{code: exitUsage, msg: fmt.Sprintf("%s printed %s", argv[0], printed),
			solution: "CMD must print the new value as one JSON value (quote text: \"hello\"); nothing was written"}
	}
	return next, nil
}

// noteRetry says on stderr that an update lost to another writer and
// when it tries again; other retries pass silently.
func (a *app) noteRetry(err error, attempt int, wait time.Duration) {
	a.noteVerboseRetry(err, attempt, wait)
	if client.Classify(err) != client.ClassConflict {
		return
	}
	now := "was deleted"
	var e *contract.Error
	if errors.As(err, &e) && e.Current != nil {
		now = "is at version " + strconv.FormatInt(e.Current.Version, 10)
	}
	fmt.Fprintf(a.stderr, "note: another writer changed %s first (it %s now): reading it again in %v (attempt %d failed)\n",
		printable(a.subject), now, wait, attempt)
}

// escalated explains an error err the retry policy gave up on (esc):
// the last error's explanation, with the attempts, and the dead-letter
// queue that holds it (or why it does not).
func (a *app) escalated(err error, esc *client.EscalationError) (int, string, string) {
	code, msg, solution := a.explain(esc.Err)
	msg = fmt.Sprintf("%s (gave up after %d attempts)", msg, esc.Attempts)
	switch {
	case esc.DeadLetter != "":
		return code, msg, fmt.Sprintf("the update was handed to the dead-letter queue %s (its key, requestId, attempts and last error): take it with 'kvctl queue pop %s' to triage it",
			esc.DeadLetter, esc.DeadLetter)
	case errors.Is(esc.Err, client.ErrOutcomeUnknown):
		solution = fmt.Sprintf("the update's last write got no answer and may have been applied before another writer changed %s: check with 'kvctl get %s --format json' (requestId, value) before running it again",
			a.subject, a.subject)
	case client.Classify(esc.Err) == client.ClassConflict:
		solution = fmt.Sprintf("other writers kept changing %s while the command ran; see who with 'kvctl get %s --format json' (lastWriter), then run the update again",
			a.subject, a.subject)
	}
	if a.deadLetter != "" {
		solution = fmt.Sprintf("%s; handing it to the dead-letter queue %s failed too (%s)", solution, a.deadLetter, deadLetterFailure(err, esc))
	}
	return code, msg, solution
}
