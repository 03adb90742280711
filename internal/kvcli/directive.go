package kvcli

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/eskv/eskv/contract"
)

// addCallFlags adds the global flags of the calls: --timeout, and
// --directive (KVCTL_DIRECTIVE), the directive the command's writes are
// made for, sent as Eskv-Directive (docs/api.md, "Directives").
func (a *app) addCallFlags(f *pflag.FlagSet) {
	durationVar(f, &a.timeout, "timeout", defaultTimeout, "give up on the whole command after this long, retries included")
	f.StringVar(&a.directive, "directive", a.getenv("KVCTL_DIRECTIVE"),
		"the directive writes are made for, sent as Eskv-Directive (KVCTL_DIRECTIVE; a principal named <agent>:<directive> needs none)")
	a.addCACertFlag(f)
}

// checkDirective refuses a directive that is not one before any call.
func (a *app) checkDirective(cmd *cobra.Command) error {
	if a.directive == "" || contract.ValidateDirective(a.directive) == nil {
		return nil
	}
	return &usageError{msg: fmt.Sprintf("--directive %q is not a directive", a.directive),
		solution: fmt.Sprintf("give 1 to %d characters of A-Z a-z 0-9 . _ - (or unset KVCTL_DIRECTIVE)", contract.MaxDirectiveLen), cmd: cmd.CommandPath()}
}
