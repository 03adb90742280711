// Package kvcli is eskv's command-line client, built as two commands:
// kvctl (cmd/kvctl, eskv's own conventions) and kvstore (cmd/kvstore, the
// kvstore CLI specification's defaults and output shapes, see seed.go).
// Both run the same command tree through Run.
//
// kvctl is eskv's command-line client, speaking the kvstore
// seed's command set (short keys in a namespace, see namespace.go): keys (get, set, delete,
// exists, list), counters (inc, dec), fields of object values (field),
// read-modify-write by a command (update), locks (lock, including lock
// run), leader election (leader) and transactions of several keys of one
// project (transaction), through
// the HTTP API (module github.com/eskv/eskv/client). Data goes to stdout
// in the --format asked for, messages and errors to stderr; the exit code
// says what happened (see docs/kvctl.md).
package kvcli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/buildinfo"
)

// Flavor is what differs between the commands built from this package.
type Flavor struct {
	// Name is the root command's name: kvctl or kvstore.
	Name string
	// Seed selects the kvstore CLI specification's conventions: json
	// output by default, its table names and default table, its output
	// shapes for get, lock check and leader check (see seed.go).
	Seed bool
	// Build is the command's build, which --version and version print.
	Build contract.BuildInfo
}

// Stdio is a process's standard input, output and error.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// Main runs the command of flavor f as a process: os.Args, the
// environment, the standard streams; SIGINT and SIGTERM cancel it.
func Main(f Flavor) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Getenv, Stdio{os.Stdin, os.Stdout, os.Stderr}, f)
	stop()
	os.Exit(code)
}

// Defaults that reach the local stack of make run.
const (
	defaultURL     = "http://127.0.0.1:8080"
	devTokenFile   = ".eskv/dev-token"
	defaultTimeout = 30 * time.Second
)

// Output formats.
const (
	formatText  = "text"
	formatJSON  = "json"
	formatValue = "value"
	formatKeys  = "keys" // list only: one key per line
)

// app is one invocation of kvctl: what it got from outside and what it
// resolved from flags.
type app struct {
	flavor Flavor
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	// Global flags.
	url     string
	token   string
	cacert  string
	format  string
	timeout time.Duration
	table   string // --table: the namespace (see namespace.go)
	project string // --project: the same, transaction's first spelling
	quiet   bool   // --quiet: nothing on stdout
	verbose bool   // --verbose: each request and retry on stderr
	// directive is --directive: the directive writes are made for
	// (Eskv-Directive), "" for none.
	directive string

	// kvstore's global flags (Flavor.Seed) and the profile they chose.
	profileName string
	region      string
	prof        *profile
	tableName   string // the table as named, before seedTable mapped it
	nsErr       error  // why kvstore has no table (no tenant): the error of a short key

	// Resolved by setup.
	client      *client.Client
	tokenSource string // where the token came from, for error solutions
	cancel      context.CancelFunc
	running     bool      // arguments were accepted; errors now come from the call
	ns          namespace // what relative keys are paths in

	// What the command works on, for error solutions.
	cmdPath      string
	kind         string        // cmdPath as kvctl spells it ("kvctl lock acquire"), for dispatch on the command
	subject      string        // key or prefix
	right        string        // read or write
	createOnly   bool          // set --expected-version 0
	holder       string        // lock holder or leader candidate
	holderSource string        // where holder came from
	waited       time.Duration // --wait that ran out
	field        string        // field get/cas: the field
	expected     string        // field cas: the EXPECTED value, as JSON
	deadLetter   string        // update --dead-letter: the queue's key
}

// stdio is a process's standard input, output and error.
type stdio struct {
	in          io.Reader
	out, errOut io.Writer
}

// run executes kvctl with args and returns its exit code.
func run(ctx context.Context, args []string, getenv func(string) string, std stdio) int {
	return Run(ctx, args, getenv, Stdio{std.in, std.out, std.errOut}, Flavor{Name: "kvctl"})
}

// Run executes the command of flavor f with args and returns its exit
// code.
func Run(ctx context.Context, args []string, getenv func(string) string, std Stdio, f Flavor) int {
	stdin, stdout, stderr := std.In, std.Out, std.Err
	a := &app{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr, cmdPath: f.Name, flavor: f}
	root := a.rootCommand()
	if len(args) == 1 && args[0] == "-version" { // as the services spell it
		args = []string{"--version"}
	}
	root.SetArgs(negativeIndexes(args))
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if a.cancel != nil {
		a.cancel()
	}
	if err == nil {
		return exitOK
	}
	return a.fail(err)
}

func (a *app) rootCommand() *cobra.Command {
	if a.flavor.Name == "" {
		a.flavor.Name = "kvctl" // an app built without a flavor is kvctl
	}
	root := &cobra.Command{
		Use:   a.flavor.Name,
		Short: "Command-line client of eskv, the event-sourced key-value store",
		Long: `kvctl reads and writes eskv keys through its HTTP API.

Keys look like tenant/<tenant>/project/<project>/<path>, or are the
kvstore seed's short keys (config/api-key): paths in the namespace
--table tenant/<t>/project/<p> (KVSTORE_TABLE, KVCTL_NAMESPACE,
KVCTL_PROJECT; none by default, so keys are full); paths may hold ':'
(user:alice) but never end in a verb name (:increment). A VALUE is JSON
when it is valid JSON, else text stored as a JSON string (--json requires
JSON, --string forces a string).
Besides reading and writing values, kvctl counts (inc, dec), changes
fields of object values (field), changes a value with a command and
retries on conflict (update), takes locks (lock, and lock run for a
command), elects leaders (leader) and changes several keys of one project
atomically (transaction).

Data goes to stdout (--format text, json or value; without --format,
KVCTL_FORMAT, else json when stdout is not a terminal and text on one),
messages and errors to stderr (-q: nothing on stdout; -V: requests and
retries on stderr). Exit codes: 0 success; 1 failed condition (not found,
already exists, version conflict, field mismatch, a --min/--max bound, no
lock or leader); 2 invalid arguments; 3 server or network error; 4 lock
unavailable, not leader or queue empty.

Defaults from the environment: KVSTORE_DEFAULT_TTL (set's --ttl),
KVSTORE_LOCK_TTL (lock acquire and extend's --ttl).

Configuration: --url (KVCTL_URL, default ` + defaultURL + `) and --token
(KVCTL_TOKEN, else ESKV_DEV_TOKEN, else the file ` + devTokenFile + ` that
'make run' writes, read from the current directory).`,
		Example: `  kvctl set tenant/acme/project/demo/greeting '{"hello":"world"}'
  KVSTORE_TABLE=tenant/acme/project/demo kvctl dec rate-limit/api-key-123 --min 0 || echo "Rate limit exceeded"
  kvctl get tenant/acme/project/demo/greeting --format value
  kvctl list tenant/acme/project/demo/ --all
  kvctl inc tenant/acme/project/demo/visits --create
  kvctl lock run tenant/acme/project/demo/locks/nightly --wait 1m -- ./nightly.sh`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		PersistentPreRunE: a.setup,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{msg: err.Error(), cmd: c.CommandPath()}
	})
	f := root.PersistentFlags()
	f.StringVar(&a.url, "url", envOr(a.getenv, "KVCTL_URL", defaultURL), "eskv API base URL (KVCTL_URL)")
	f.StringVar(&a.token, "token", "", "bearer token (KVCTL_TOKEN; else ESKV_DEV_TOKEN; else ./"+devTokenFile+")")
	f.StringVarP(&a.format, "format", "o", "", "output format: text, json or value; list also keys (default KVCTL_FORMAT, else json when stdout is not a terminal, text on one)")
	f.BoolVarP(&a.quiet, "quiet", "q", false, "print nothing on stdout (errors still go to stderr; the exit code is unchanged)")
	f.BoolVarP(&a.verbose, "verbose", "V", false, "say each request, its answer's status and time, and each retry on stderr (never a value)")
	a.addNamespaceFlags(root)
	if a.flavor.Seed {
		a.seedRoot(root)
	}
	a.addCallFlags(f)
	_ = root.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{formatText, formatJSON, formatValue, formatKeys}, cobra.ShellCompDirectiveNoFileComp))

	root.AddCommand(a.getCommand(), a.mgetCommand(), a.setCommand(), a.deleteCommand(), a.existsCommand(), a.listCommand(), a.projectsCommand(),
		a.incCommand(), a.decCommand(), a.getCounterCommand(), a.fieldCommand(), a.updateCommand(), a.lockCommand(), a.leaderCommand(),
		a.transactionCommand(), a.saddCommand(), a.sremCommand(), a.sismemberCommand(), a.smembersCommand(), a.scardCommand(),
		a.lpushCommand(), a.rpushCommand(), a.lpopCommand(), a.rpopCommand(), a.lrangeCommand(), a.ltrimCommand(), a.llenCommand(),
		a.queueCommand(), a.historyCommand(), a.watchCommand(), a.touchCommand(), a.cleanupExpiredCommand(), a.sessionCommand(), a.indexesCommand(), a.versionCommand())
	root.Version = buildinfo.Line(a.flavor.Name, a.flavor.Build)
	root.SetVersionTemplate("{{.Version}}\n")
	root.InitDefaultCompletionCmd()
	if a.flavor.Seed {
		defer renameHelp(root, a.flavor.Name)
	}
	completionExample(root)
	return root
}

// completionExample gives root's completion command its example.
func completionExample(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Example = `  kvctl completion bash > /etc/bash_completion.d/kvctl  # every new bash
  kvctl completion zsh > "${fpath[1]}/_kvctl"           # every new zsh
  source <(kvctl completion bash)                       # this shell only`
		}
	}
}

// apiAnnotation marks commands that call the API, so setup resolves the
// client for them (and not for help or completion); --timeout bounds the
// whole command (plus --wait, for commands that have it).
var apiAnnotation = map[string]string{"api": "true"}

// perCallAnnotation marks API commands that run for as long as they must
// (lock run): --timeout bounds each call instead of the whole command.
var perCallAnnotation = map[string]string{"api": "true", "timeout": "per-call"}

// setup validates the global flags and builds the client; it runs after
// cobra accepted the command's arguments.
func (a *app) setup(cmd *cobra.Command, _ []string) error {
	a.cmdPath = cmd.CommandPath()
	a.kind = "kvctl" + strings.TrimPrefix(a.cmdPath, a.flavor.Name)
	if a.quiet {
		a.stdout = io.Discard
	}
	if cmd.Annotations["api"] == "" {
		return nil
	}
	if err := a.resolve(cmd); err != nil {
		return err
	}
	a.running = true
	if cmd.Annotations["timeout"] == "per-call" {
		return nil
	}
	timeout := a.timeout
	if wait, err := cmd.Flags().GetDuration("wait"); err == nil && wait > 0 {
		timeout += wait
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	a.cancel = cancel
	cmd.SetContext(ctx)
	return nil
}

// resolve checks the global flags and builds the client.
func (a *app) resolve(cmd *cobra.Command) error {
	if err := a.resolveFormat(cmd); err != nil {
		return err
	}
	if a.flavor.Seed {
		p, err := a.loadProfile(cmd)
		if err != nil {
			return err
		}
		a.prof = p
	} else if err := a.resolveNamespace(cmd); err != nil {
		return err
	}
	if a.prof != nil && a.prof.URL != "" && !cmd.Flags().Changed("url") {
		a.url = a.prof.URL
	}
	if a.timeout <= 0 {
		return &usageError{msg: fmt.Sprintf("--timeout %v is not positive", a.timeout), solution: "give a duration such as --timeout 30s", cmd: cmd.CommandPath()}
	}
	u, err := url.Parse(a.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &usageError{msg: fmt.Sprintf("--url %q is not an http(s) URL", a.url),
			solution: "give the writer's base URL, e.g. --url " + defaultURL + " (or set KVCTL_URL)", cmd: cmd.CommandPath()}
	}
	token, source := a.token, "--token"
	if !cmd.Flags().Changed("token") {
		token, source = a.defaultToken()
		if a.prof != nil {
			t, err := a.prof.token()
			if err != nil {
				return err
			}
			if t != "" {
				token, source = t, "profile "+a.prof.name
			}
		}
	}
	a.tokenSource = source
	if err := a.checkDirective(cmd); err != nil {
		return err
	}
	// The seed's retry policy as the client's defaults, every try of
	// every command bounded by client.DefaultAttemptTimeout (or
	// --timeout when shorter): a try whose answer is lost is retried (a
	// write with its --request-id) within what --timeout leaves.
	policy := client.RetryPolicy{OnRetry: a.noteRetry, AttemptTimeout: min(a.timeout, client.DefaultAttemptTimeout)}
	opts := []client.Option{client.WithUserAgent(a.flavor.Name), client.WithRetryPolicy(policy), client.WithDirective(a.directive)}
	rt, err := a.transport(cmd)
	if err != nil {
		return err
	}
	if a.verbose {
		rt = &verboseTransport{next: rt, w: a.stderr}
	}
	if rt != http.DefaultTransport {
		opts = append(opts, client.WithHTTPClient(&http.Client{Transport: rt}))
	}
	a.client = client.New(a.url, token, opts...)
	if a.flavor.Seed {
		return a.resolveSeedNamespace(cmd)
	}
	return nil
}

// resolveFormat checks --format, or picks the default: KVCTL_FORMAT, else
// json when stdout is not a terminal (the seed's default, for | jq) and
// text on a terminal, for people.
func (a *app) resolveFormat(cmd *cobra.Command) error {
	source := "--format"
	if !cmd.Flags().Changed("format") && a.flavor.Seed {
		a.format = formatJSON // the specification's default, terminal or not
	} else if !cmd.Flags().Changed("format") {
		a.format, source = a.getenv("KVCTL_FORMAT"), "KVCTL_FORMAT"
		if a.format == "" {
			a.format = formatJSON
			if isTerminal(a.stdout) {
				a.format = formatText
			}
		}
	}
	switch a.format {
	case formatText, formatJSON, formatValue:
		return nil
	case formatKeys:
		if a.kind == "kvctl list" {
			return nil
		}
	}
	return &usageError{msg: fmt.Sprintf("unknown %s %q for %s", source, a.format, cmd.CommandPath()), solution: "use --format text, json or value (list also takes keys)", cmd: cmd.CommandPath()}
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// defaultToken returns the token from the environment or the local
// stack's token file, and where it came from ("" when there is none).
func (a *app) defaultToken() (token, source string) {
	for _, name := range []string{"KVCTL_TOKEN", "ESKV_DEV_TOKEN"} {
		if v := a.getenv(name); v != "" {
			return v, name
		}
	}
	if b, err := os.ReadFile(filepath.FromSlash(devTokenFile)); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, "./" + devTokenFile
		}
	}
	return "", ""
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

// groupCommand completes a command that only groups subcommands: alone it
// prints its help; with an unknown subcommand it is a usage error (exit 2).
func (a *app) groupCommand(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return &usageError{msg: fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath()), cmd: cmd.CommandPath()}
		}
		return cmd.Help()
	}
	return cmd
}
