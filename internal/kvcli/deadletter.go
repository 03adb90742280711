package kvcli

import (
	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
)

// deadLetterHelp is update's help on --dead-letter.
const deadLetterHelp = `--dead-letter QUEUE hands an update that gives up (conflicts or network
errors ran out) to the eskv queue QUEUE: one item {key, requestId,
attempts, lastError {code, message}, escalatedAt, directive} (the value
CMD last printed only with --dead-letter-value), pushed with the last
write's requestId, so a retried push adds nothing; kvctl then exits as it
would without it, its Solution line naming the queue. A triage worker
takes the items with 'kvctl queue pop QUEUE'.`

// deadLetterFlags are update's --dead-letter and --dead-letter-value.
type deadLetterFlags struct {
	queue string
	value bool
}

func (d *deadLetterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&d.queue, "dead-letter", "", "push an update that gives up onto this queue (a key) for triage")
	cmd.Flags().BoolVar(&d.value, "dead-letter-value", false, "put the value CMD last printed in the dead-letter item (default: none)")
}

// apply sets o's dead-letter queue (a key, short in the namespace) and
// notes it for the error's Solution line.
func (d *deadLetterFlags) apply(a *app, cmd *cobra.Command, o *client.UpdateOptions) error {
	if d.queue == "" {
		if d.value {
			return &usageError{msg: "--dead-letter-value needs --dead-letter", solution: "name the queue with --dead-letter QUEUE", cmd: cmd.CommandPath()}
		}
		return nil
	}
	q, err := a.key(d.queue)
	if err != nil {
		return err
	}
	o.DeadLetter, o.DeadLetterValue, a.deadLetter = q, d.value, q
	return nil
}

// deadLetterFailure is why the dead-letter push of an escalated update
// failed: err joins esc and the push's error.
func deadLetterFailure(err error, esc *client.EscalationError) string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if e != error(esc) {
				return e.Error()
			}
		}
	}
	return "no answer"
}
