package kvcli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// collectionArg is the first argument of a set, list or queue command:
// its name (SET, LIST, QUEUE) and the help about it.
type collectionArg struct{ name, long string }

// collectionCommand completes a set, list or queue command: its first
// argument, first, is the collection's key, then the further arguments
// rest; first.long is appended to its help. run gets the resolved key (a
// short key is a path in the namespace, as every command's) and the
// further arguments, with right the right it needs.
func (a *app) collectionCommand(c *cobra.Command, first collectionArg, right string, rest []string, run func(cmd *cobra.Command, key string, rest []string) error) *cobra.Command {
	c.Args = args(append([]string{first.name}, rest...)...)
	c.Annotations = apiAnnotation
	c.ValidArgsFunction = a.completeKey
	c.Long += first.long
	c.RunE = func(cmd *cobra.Command, args []string) error {
		key, err := a.key(args[0])
		if err != nil {
			return err
		}
		a.right = right
		return run(cmd, key, args[1:])
	}
	return c
}

// collectionLong is the help of a list or queue command about its first
// argument, arg, a noun.
func collectionLong(arg, noun string) string {
	return fmt.Sprintf(`

%s is a key (tenant/<t>/project/<p>/<path>), or a path in the namespace
(--table, KVSTORE_TABLE). A missing %s is empty. A key that holds
anything but a %s exits 1.`, arg, noun, noun)
}
