package kvcli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
)

// completeKey completes the first argument with the keys under what was
// typed so far, once that names a scope (tenant/<t>/project/<p>/...).
func (a *app) completeKey(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	none := cobra.ShellCompDirectiveNoFileComp
	if len(args) > 0 || strings.Count(toComplete, "/") < 4 {
		return nil, none
	}
	if err := a.resolve(cmd); err != nil {
		return nil, none
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
	defer cancel()
	page, err := a.client.List(ctx, client.ListOptions{Prefix: toComplete, Limit: 200})
	if err != nil {
		return nil, none
	}
	keys := make([]cobra.Completion, 0, len(page.Items))
	for _, e := range page.Items {
		keys = append(keys, e.Key)
	}
	return keys, none
}

// completeKeyThenCommand completes KEY, then (after --) the command to
// run, from files and $PATH as the shell would.
func (a *app) completeKeyThenCommand(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return a.completeKey(cmd, args, toComplete)
	}
	return nil, cobra.ShellCompDirectiveDefault
}
