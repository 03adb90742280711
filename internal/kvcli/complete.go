package kvcli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// completeKey completes the first argument: before it names a scope,
// with the projects the token may read (completeProjects, each followed
// by "/" and no space, to go on with the key's path); then with the keys
// under what was typed so far (tenant/<t>/project/<p>/...).
func (a *app) completeKey(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	none := cobra.ShellCompDirectiveNoFileComp
	if len(args) > 0 {
		return nil, none
	}
	if strings.Count(toComplete, "/") < 4 {
		return a.completeProjects(cmd, toComplete, "/", none|cobra.ShellCompDirectiveNoSpace)
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

// maxCompletedProjects bounds the projects a completion asks for: one
// page of GET /v1/projects, in key order (a token that may read more
// projects is offered the first of them only).
const maxCompletedProjects = contract.MaxProjectsLimit

// completeProjects completes toComplete with the projects the token may
// read keys of (GET /v1/projects), as tenant/<t>/project/<p> followed by
// suffix, those that start with toComplete; nothing for what cannot
// become a scope (a key relative to --table).
func (a *app) completeProjects(cmd *cobra.Command, toComplete, suffix string, d cobra.ShellCompDirective) ([]cobra.Completion, cobra.ShellCompDirective) {
	none := cobra.ShellCompDirectiveNoFileComp
	if !strings.HasPrefix(toComplete, "tenant/") && !strings.HasPrefix("tenant/", toComplete) {
		return nil, none
	}
	if err := a.resolve(cmd); err != nil {
		return nil, none
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
	defer cancel()
	page, err := a.client.Projects(ctx, client.ProjectsOptions{Limit: maxCompletedProjects})
	if err != nil {
		return nil, none
	}
	var out []cobra.Completion
	for _, p := range page.Items {
		if s := p.Scope() + suffix; strings.HasPrefix(s, toComplete) {
			out = append(out, s)
		}
	}
	return out, d
}

// completeNamespace completes --table and --project with the projects
// the token may read.
func (a *app) completeNamespace(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return a.completeProjects(cmd, toComplete, "", cobra.ShellCompDirectiveNoFileComp)
}
