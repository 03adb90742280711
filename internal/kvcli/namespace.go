package kvcli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/contract"
)

// The namespace is the seed's "table": the project that relative keys
// (the seed's short keys, such as config/api-key) are paths in. eskv has
// no default one: a key lives in exactly one tenant's project, and a
// made-up default project would put a script's data where no grant of
// its tenant reads it. So without a namespace, keys must be full.
//
// Where it comes from, first found wins: --table (or its alias --project,
// which transaction had first), then the environment variables below in
// order: the seed's KVSTORE_TABLE, kvctl's own KVCTL_NAMESPACE, and
// KVCTL_PROJECT (transaction's, kept for the scripts that use it).
var namespaceEnv = []string{"KVSTORE_TABLE", "KVCTL_NAMESPACE", "KVCTL_PROJECT"}

// namespace is a resolved namespace: tenant/<t>/project/<p> (no trailing
// slash), "" for none, and where it came from, for messages.
type namespace struct {
	project string
	source  string
}

// addNamespaceFlags adds --table and its alias --project to every command.
func (a *app) addNamespaceFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&a.table, "table", "", "tenant/<t>/project/<p> that keys not starting with tenant/ are paths in (KVSTORE_TABLE, KVCTL_NAMESPACE, KVCTL_PROJECT; default none: keys are full)")
	f.StringVar(&a.project, "project", "", "the same as --table")
	_ = root.RegisterFlagCompletionFunc("table", a.completeNamespace)
	_ = root.RegisterFlagCompletionFunc("project", a.completeNamespace)
}

// resolveNamespace sets a.ns from the flags and the environment; a
// malformed namespace is a usage error even when every key is full, so a
// typo never goes unnoticed.
func (a *app) resolveNamespace(cmd *cobra.Command) error {
	table, project := cmd.Flags().Changed("table"), cmd.Flags().Changed("project")
	switch {
	case table && project && a.table != a.project:
		return &usageError{msg: fmt.Sprintf("--table %q and --project %q differ", a.table, a.project), solution: "give the namespace once, with --table", cmd: a.cmdPath}
	case table:
		a.ns = namespace{project: a.table, source: "--table"}
	case project:
		a.ns = namespace{project: a.project, source: "--project"}
	default:
		a.ns = namespace{}
		for _, name := range namespaceEnv {
			if v := a.getenv(name); v != "" {
				a.ns = namespace{project: v, source: name}
				break
			}
		}
	}
	if a.ns.project == "" {
		return nil
	}
	p, err := checkNamespace(a.ns.project)
	if err != nil {
		bad := a.ns
		a.ns = namespace{} // error Details name only a namespace in use
		return &usageError{msg: fmt.Sprintf("%s %q is not tenant/<tenant>/project/<project>", bad.source, bad.project),
			solution: "name the project relative keys are paths in, e.g. --table tenant/acme/project/demo (or KVSTORE_TABLE=tenant/acme/project/demo)", cmd: a.cmdPath}
	}
	a.ns.project = p
	return nil
}

// checkNamespace returns p without a trailing slash when it names a
// project: tenant/<t>/project/<p>.
func checkNamespace(p string) (string, error) {
	p = strings.TrimSuffix(p, "/")
	if contract.ScopeOf(p+"/x") != p || contract.ValidatePrefix(p+"/") != nil {
		return "", fmt.Errorf("%q is not tenant/<tenant>/project/<project>", p)
	}
	return p, nil
}

// resolveKey returns arg as a full eskv key: as it is when it starts with
// tenant/, else the path arg inside the namespace. Every key (and list
// prefix) a command takes goes through it (through app.key).
func resolveKey(arg string, ns namespace) (string, error) {
	switch {
	case arg == "":
		return "", fmt.Errorf("key is missing")
	case strings.HasPrefix(arg, "tenant/"):
		return arg, nil
	case ns.project == "":
		return "", fmt.Errorf("key %q is not a full key (tenant/<t>/project/<p>/<path>) and no namespace was given (--table, KVSTORE_TABLE or KVCTL_NAMESPACE)", arg)
	}
	return ns.project + "/" + arg, nil
}

// key resolves a command's KEY argument (see resolveKey) and makes it the
// subject of error messages. Commands call it on every key they take.
func (a *app) key(arg string) (string, error) {
	if a.nsErr != nil && !strings.HasPrefix(arg, "tenant/") {
		return "", a.nsErr
	}
	k, err := resolveKey(arg, a.ns)
	if err != nil {
		return "", &usageError{msg: err.Error(), solution: namespaceSolution, cmd: a.cmdPath}
	}
	a.subject = k
	return k, nil
}

const namespaceSolution = "give a full key (tenant/<t>/project/<p>/<path>), or the project short keys are paths in with --table tenant/<t>/project/<p> (or KVSTORE_TABLE, KVCTL_NAMESPACE)"
