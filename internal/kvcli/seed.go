package kvcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// The kvstore command (Flavor.Seed) follows the kvstore CLI
// specification where it speaks: output is json unless --format says
// otherwise; a table is a project (see seedTable); get, lock check and
// leader check print the specification's shapes (below); exit codes are
// kvctl's, which are the specification's (0 done, 1 failed condition, 2
// invalid arguments, 3 server or network, 4 lock, leader or queue
// unavailable).

// defaultSeedTable is the table of kvstore without --table, KVSTORE_TABLE
// or a profile's table.
const defaultSeedTable = "aws-primitives-tool-kvstore"

// seedEntry is kvstore get's json: the specification's fields, times in
// unix seconds, ttl the expiry (null when the key does not expire).
type seedEntry struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	Type      string          `json:"type"`
	TTL       *int64          `json:"ttl"`
	CreatedAt int64           `json:"created_at"`
	UpdatedAt int64           `json:"updated_at"`
}

// seedLock is kvstore lock check's json.
type seedLock struct {
	Lock       string `json:"lock"`
	Owner      string `json:"owner"`
	TTL        *int64 `json:"ttl"`
	AcquiredAt int64  `json:"acquired_at"`
}

// seedLeader is kvstore leader check's json.
type seedLeader struct {
	Pool      string `json:"pool"`
	Leader    string `json:"leader"`
	TTL       *int64 `json:"ttl"`
	ElectedAt int64  `json:"elected_at"`
}

// unix is t in unix seconds; nil for nil.
func unixPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	s := t.Unix()
	return &s
}

// short is key as the user named it: relative to the table when it lies
// in it, else the full key.
func (a *app) short(key string) string {
	if a.ns.project != "" {
		if rest, ok := strings.CutPrefix(key, a.ns.project+"/"); ok {
			return rest
		}
	}
	return key
}

// seedType is the specification's item type of an entry: its purpose
// when that is one of the specification's types, else kv.
func seedType(e contract.Entry) string {
	switch p := e.Semantics.Purpose; p {
	case "counter", contract.PurposeLock, contract.PurposeLeader, contract.PurposeQueue, contract.PurposeSet, contract.PurposeList:
		return p
	}
	return "kv"
}

// writeSeedEntry prints get's answer as kvstore json.
func (a *app) writeSeedEntry(e contract.Entry) error {
	return a.writeJSON(seedEntry{Key: a.short(e.Key), Value: e.Value, Type: seedType(e), TTL: unixPtr(e.ExpiresAt),
		CreatedAt: e.CreatedAt.Unix(), UpdatedAt: e.UpdatedAt.Unix()})
}

// writeSeedCheck prints lock check's or leader check's answer as kvstore
// json (who is "leader" for leader check).
func (a *app) writeSeedCheck(l client.Lock, who string) error {
	if who == "leader" {
		return a.writeJSON(seedLeader{Pool: a.short(l.Key), Leader: l.Holder, TTL: unixPtr(l.ExpiresAt), ElectedAt: l.AcquiredAt.Unix()})
	}
	return a.writeJSON(seedLock{Lock: a.short(l.Key), Owner: l.Holder, TTL: unixPtr(l.ExpiresAt), AcquiredAt: l.AcquiredAt.Unix()})
}

// seedTable maps a table name to the project it is (a namespace
// tenant/<t>/project/<p>), by one rule:
//
//   - a name that is already tenant/<t>/project/<p> is that project;
//   - any other name is the project of that name in the tenant: the
//     profile's tenant, else KVSTORE_TENANT, else the only tenant whose
//     projects the token lists (GET /v1/projects).
//
// A table name must be a valid project name (a-z 0-9 - _ ., not . or
// ..), as eskv keys are lowercase: my-custom-table, test-kvstore and
// aws-primitives-tool-kvstore are.
func (a *app) seedTable(name, tenant string) (string, error) {
	if strings.HasPrefix(name, "tenant/") {
		return checkNamespace(name)
	}
	if strings.Contains(name, "/") || name == "." || name == ".." || checkChars(name) != "" {
		return "", fmt.Errorf("table %q is not a project name (a-z, 0-9, '-', '_', '.') nor tenant/<tenant>/project/<project>", name)
	}
	if tenant == "" {
		return "", errNoTenant
	}
	return checkNamespace("tenant/" + tenant + "/project/" + name)
}

var errNoTenant = errors.New("no tenant")

// checkChars is contract's character rule for a key, on a table name.
func checkChars(s string) string {
	if err := contract.ValidatePrefix("tenant/t/project/p/" + s); err != nil {
		return err.Error()
	}
	return ""
}

// resolveSeedNamespace sets a.ns from kvstore's table: --table (or
// --project), else KVSTORE_TABLE, else the profile's table, else
// defaultSeedTable; a table that is no project is a usage error.
func (a *app) resolveSeedNamespace(cmd *cobra.Command) error {
	ns := namespace{project: defaultSeedTable, source: "the default table"}
	switch {
	case cmd.Flags().Changed("table"):
		ns = namespace{project: a.table, source: "--table"}
	case cmd.Flags().Changed("project"):
		ns = namespace{project: a.project, source: "--project"}
	case a.getenv("KVSTORE_TABLE") != "":
		ns = namespace{project: a.getenv("KVSTORE_TABLE"), source: "KVSTORE_TABLE"}
	case a.prof != nil && a.prof.Table != "":
		ns = namespace{project: a.prof.Table, source: "profile " + a.prof.name}
	}
	tenant := ""
	if !strings.HasPrefix(ns.project, "tenant/") {
		var err error
		if tenant, err = a.seedTenant(cmd); err != nil {
			// full keys need no table: the error waits for a short key
			a.nsErr, a.tableName = err, ns.project
			return nil
		}
	}
	p, err := a.seedTable(ns.project, tenant)
	if err != nil {
		return &usageError{msg: fmt.Sprintf("%s %q: %v", ns.source, ns.project, err),
			solution: "name a table such as my-store (a project of your tenant) or tenant/<tenant>/project/<project>", cmd: a.cmdPath}
	}
	a.ns = namespace{project: p, source: ns.source}
	a.tableName = ns.project
	return nil
}

// seedTenant is the tenant table names are projects of: the profile's,
// else KVSTORE_TENANT, else the only tenant whose projects the token
// lists.
func (a *app) seedTenant(cmd *cobra.Command) (string, error) {
	if a.prof != nil && a.prof.Tenant != "" {
		return a.prof.Tenant, nil
	}
	if t := a.getenv("KVSTORE_TENANT"); t != "" {
		return t, nil
	}
	tenants := map[string]bool{}
	res, err := a.client.Projects(cmd.Context(), client.ProjectsOptions{Limit: contract.MaxProjectsLimit})
	if err == nil {
		for _, p := range res.Items {
			tenants[p.Tenant] = true
		}
	}
	if len(tenants) == 1 && !res.Truncated {
		for t := range tenants {
			return t, nil
		}
	}
	return "", &usageError{msg: fmt.Sprintf("no tenant for table names: the token reads projects of %d tenants", len(tenants)),
		solution: "say the tenant with KVSTORE_TENANT=<tenant> or \"tenant\" in a profile (--profile), or give --table tenant/<tenant>/project/<project>", cmd: a.cmdPath}
}

// seedRoot makes root the kvstore command: its help, --profile and
// --region, and create-table.
func (a *app) seedRoot(root *cobra.Command) {
	root.Short = "eskv's client with the kvstore CLI specification's defaults"
	root.Long = `kvstore reads and writes eskv keys through its HTTP API, with the kvstore
CLI specification's commands, defaults and output: the same commands as
kvctl, JSON output unless --format says otherwise, and tables.

A table is an eskv project: --table, else KVSTORE_TABLE, else the
profile's table, else ` + defaultSeedTable + `. A table named
tenant/<t>/project/<p> is that project; any other name (my-store,
test-kvstore) is the project of that name in the tenant: the profile's
"tenant", else KVSTORE_TENANT, else the only tenant the token lists
projects of. create-table makes a table visible (idempotent).

Keys are paths in the table: a-z 0-9 - _ . / and ':' (user:alice,
config/api-key), or full keys tenant/<t>/project/<p>/<path>.

` + valueRuleHelp + `

Profiles (--profile, KVSTORE_PROFILE) live in $KVSTORE_CONFIG, else
~/.config/eskv/kvstore.json: {"profiles": {"NAME": {"url", "regions":
{"REGION": "URL"}, "region", "token_file", "tenant", "table"}}}; --region
(AWS_REGION) picks one of the profile's URLs. Without a profile: --url
(KVCTL_URL, default ` + defaultURL + `), --token (KVCTL_TOKEN, else
ESKV_DEV_TOKEN, else ./` + devTokenFile + `).

Exit codes: 0 success; 1 operation failed (not found, condition failed);
2 invalid arguments; 3 server or network error; 4 lock unavailable, not
leader or queue empty.`
	root.Example = `  kvstore set config/api-key "sk-abc123" --ttl 3600
  kvstore get config/api-key | jq '.value'
  kvstore inc api-requests --create --table my-store
  kvstore lock acquire deploy-prod --ttl 300 --owner agent-1
  kvstore create-table --table my-store --billing on-demand`
	a.addProfileFlags(root)
	root.PersistentFlags().Lookup("table").Usage = "table keys are paths in: a project name of the tenant (my-store) or tenant/<t>/project/<p> (KVSTORE_TABLE, else the profile's, else " + defaultSeedTable + ")"
	root.AddCommand(a.createTableCommand())
}

// renameHelp spells the commands of cmd's and its subcommands' help and
// examples with name (kvstore) instead of kvctl.
func renameHelp(cmd *cobra.Command, name string) {
	if cmd.HasParent() {
		cmd.Long = strings.ReplaceAll(cmd.Long, "kvctl ", name+" ")
		cmd.Example = strings.ReplaceAll(cmd.Example, "kvctl ", name+" ")
	}
	for _, c := range cmd.Commands() {
		renameHelp(c, name)
	}
}

// tableMarker is the key, in a table's project, that create-table writes:
// eskv makes a project exist when it holds a key, so the marker makes an
// empty table visible (GET /v1/projects, kvstore list) and create-table
// idempotent (written only when absent).
const tableMarker = ".kvstore/table"

// createdTable is create-table's json.
type createdTable struct {
	Table     string `json:"table"`
	Namespace string `json:"namespace"`
	Billing   string `json:"billing"`
	Created   bool   `json:"created"`
}

func (a *app) createTableCommand() *cobra.Command {
	var billing string
	cmd := &cobra.Command{
		Use:   "create-table",
		Short: "Create the table (an eskv project) if it does not exist",
		Long: `Make the table named by --table (KVSTORE_TABLE, the profile's, or the
default) exist: write its marker key ` + tableMarker + ` unless it is
there. Idempotent: a second run changes nothing ("created": false).
--billing (on-demand or provisioned) is recorded in the marker; eskv has
no capacity to provision. Prints {"table","namespace","billing","created"}.`,
		Example:     `  kvstore create-table --table my-store --billing on-demand`,
		Args:        args(),
		Annotations: apiAnnotation,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if billing != "on-demand" && billing != "provisioned" {
				return &usageError{msg: fmt.Sprintf("--billing %q is not on-demand or provisioned", billing), solution: "give --billing on-demand (or provisioned)", cmd: a.cmdPath}
			}
			if a.nsErr != nil {
				return a.nsErr
			}
			a.right = "write"
			key := a.ns.project + "/" + tableMarker
			a.subject = key
			v, _ := json.Marshal(map[string]string{"table": a.short(a.ns.project), "billing": billing})
			_, err := a.client.Put(cmd.Context(), client.PutRequest{Key: key, Value: v, ExpectedVersion: new(int64)})
			created := err == nil
			if contract.ErrorCode(err) == contract.EConflict {
				err = nil
			}
			if err != nil {
				return err
			}
			out := createdTable{Table: a.tableName, Namespace: a.ns.project, Billing: billing, Created: created}
			if a.format != formatJSON {
				_, err := fmt.Fprintln(a.stdout, a.ns.project)
				return err
			}
			return a.writeJSON(out)
		},
	}
	cmd.Flags().StringVar(&billing, "billing", "on-demand", "on-demand or provisioned (recorded; eskv has nothing to provision)")
	return cmd
}

// nameFields are the top-level fields of kvstore's json answers that
// name a key (the specification's "key", "queue", "list", "set", "lock",
// "pool"): kvstore prints them as the user named them, relative to the
// table (tasks, not tenant/<t>/project/<table>/tasks).
var nameFields = map[string]bool{"key": true, "queue": true, "list": true, "set": true, "lock": true, "pool": true}

// writeJSON writes v as one line of JSON; kvstore's names in nameFields
// are relative to the table. Other fields, and the order of fields, are
// as v encodes them.
func (a *app) writeJSON(v any) error {
	if !a.flavor.Seed || a.ns.project == "" {
		return writeJSON(a.stdout, v)
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, v); err != nil {
		return err
	}
	out, ok := shortenNames(buf.Bytes(), a.ns.project+"/")
	if !ok {
		out = buf.Bytes()
	}
	_, err := a.stdout.Write(out)
	return err
}

// shortenNames rewrites the top-level nameFields of the JSON object line
// b that start with prefix without it; ok is false when b is not an
// object (then it is printed as it is).
func shortenNames(b []byte, prefix string) (out []byte, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i := 0; dec.More(); i++ {
		t, err := dec.Token()
		name, isName := t.(string)
		var raw json.RawMessage
		if err != nil || !isName || dec.Decode(&raw) != nil {
			return nil, false
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(jsonString(name))
		buf.WriteByte(':')
		var s string
		if nameFields[name] && json.Unmarshal(raw, &s) == nil && strings.HasPrefix(s, prefix) {
			raw = jsonString(strings.TrimPrefix(s, prefix))
		}
		buf.Write(raw)
	}
	buf.WriteString("}\n")
	return buf.Bytes(), true
}
