// Command auditor keeps eskv's audit trail in ClickHouse and answers for
// it:
//
//	auditor serve    consume kv.changes and kv.conflicts into ClickHouse
//	auditor report   conflict rates (and top conflicting keys) as a table or JSON
//	auditor verify   recompute the hash chains and match rows to the log
//	auditor prove    show that a value was the value of a key at a version
//
// Every setting is a flag whose default comes from an ESKV_ environment
// variable; the defaults reach the local stack of `make run`.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/internal/secure"
	"github.com/eskv/eskv/internal/service"
)

func main() { service.Main("auditor", run) }

// Exit codes: 0 success; 1 an error (bad flags, a service unreachable);
// 2 verify found a discrepancy in the trail, or prove could not prove.
const exitDiscrepancy = 2

const usage = `usage: auditor <command> [flags]

Commands:
  serve    consume kv.changes and kv.conflicts (read_committed) into ClickHouse
  report   conflict rates per tenant, project and purpose, as a table or JSON
  verify   recompute the hash chains, match every row to its event in kv.changes;
           exits 2 naming the first discrepancy
  prove    prove "value X was the value of key K at version N" from the trail
           (needs the audit key); exits 2 when it cannot

Run 'auditor <command> -h' for its flags. Every flag defaults to an ESKV_
environment variable; the defaults reach the local stack of 'make run'.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "report":
		return report(ctx, args[1:], stdout, stderr)
	case "verify":
		return verify(ctx, args[1:], stdout, stderr)
	case "prove":
		return prove(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

// DefaultKeyFile is where `make run` keeps its generated audit key.
const DefaultKeyFile = ".eskv/audit-key"

// common is the configuration every command shares.
type common struct {
	kafka          service.Kafka
	logLevel       *slog.Level
	chAddr         string
	chDatabase     string
	chUser         string
	chPassword     string
	chPassFile     string
	chTLS          secure.TLS
	chInsecureDev  bool
	chTLSConfig    *tls.Config
	keyFile        string
	keyID          string
	insecureDevKey bool

	getenv func(string) string // the variables that are no flags: secrets
}

// newFlags returns the flags of command with the shared ones bound.
func newFlags(command string, stderr io.Writer) (*service.Flags, *common) {
	f := service.NewFlags("auditor "+command, stderr)
	c := &common{getenv: os.Getenv}
	c.kafka.Bind(f)
	c.kafka.BindConflicts(f)
	f.StringVar(&c.chAddr, "clickhouse-addr", audit.DefaultClickHouseAddr, "ClickHouse native-protocol address")
	f.StringVar(&c.chDatabase, "clickhouse-database", audit.DefaultDatabase, "ClickHouse database of the audit trail, created when missing")
	f.StringVar(&c.chUser, "clickhouse-user", "default", "ClickHouse user; the password is read from ESKV_CLICKHOUSE_PASSWORD only, or from -clickhouse-password-file")
	f.StringVar(&c.chPassFile, "clickhouse-password-file", "", "file holding the ClickHouse password (a mounted secret)")
	service.BindTLS(f, "clickhouse", &c.chTLS)
	f.BoolVar(&c.chInsecureDev, "clickhouse-insecure-dev", false, "allow -clickhouse-tls-insecure-skip-verify, for a developer's machine only")
	// The audit key's settings read ESKV_AUDIT_…, as ESKV_AUDIT_KEY does.
	key := f.Scope("ESKV_AUDIT")
	key.StringVar(&c.keyFile, "key-file", "",
		"audit key file: one key per line, id:key (hex or base64), current key first, older keys after it; "+
			"default "+DefaultKeyFile+" when it exists and ESKV_AUDIT_KEY is unset")
	key.StringVar(&c.keyID, "key-id", "",
		"id of the key in ESKV_AUDIT_KEY (hex or base64, at least 32 bytes; read from the environment only), stored with every hash; "+
			"default fp-<first 12 hex digits of its SHA-256>; ESKV_AUDIT_OLD_KEYS lists keys of earlier rotations as id:key,...")
	key.BoolVar(&c.insecureDevKey, "insecure-dev-key", false,
		"with no key configured, use a publicly known key (id "+audit.InsecureDevKeyID+"): its hashes protect nothing; for throwaway experiments only")
	c.logLevel = service.LogLevel(f, slog.LevelInfo)
	return f, c
}

// parse parses args into f, checks the shared flags and reads the
// ClickHouse password.
func (c *common) parse(f *service.Flags, args []string) error {
	if err := f.Parse(args); err != nil {
		return err
	}
	c.kafka.Getenv = c.getenv
	return errors.Join(f.Positive("partitions"), c.kafka.Check(), c.checkClickHouse())
}

// checkClickHouse reads the ClickHouse password and builds the TLS
// configuration; errors name the setting.
func (c *common) checkClickHouse() error {
	name := secure.Prefixed("clickhouse")
	var err error
	c.chPassword, err = secure.Secret(c.getenv("ESKV_CLICKHOUSE_PASSWORD"), c.chPassFile, "ESKV_CLICKHOUSE_PASSWORD", name("password-file"))
	if err != nil {
		return err
	}
	c.chTLSConfig, err = c.chTLS.Config(name, c.chInsecureDev, name("insecure-dev"))
	return err
}

// groupFlag defines -group (ESKV_AUDITOR_GROUP): the auditor's consumer
// group.
func groupFlag(f *service.Flags) *string {
	return f.Scope(auditorScope).String("group", audit.Group, "the auditor's consumer group, whose committed offsets say what the trail holds")
}

// auditorScope prefixes the variables of the auditor's own settings:
// -addr and -addr-file are the projector's too.
const auditorScope = "ESKV_AUDITOR"

// waitFlag defines -wait of verify and prove, an argument of one run.
func waitFlag(f *flag.FlagSet) *time.Duration {
	return f.Duration("wait", 10*time.Second, "wait up to this long for the auditor to commit up to the end of the topics")
}

// open connects to ClickHouse and migrates the trail (a trail not
// started yet is an empty one); log (nil: none) receives the driver's
// warnings.
func (c *common) open(ctx context.Context, log *slog.Logger) (*audit.Store, error) {
	if log != nil {
		log = log.With("component", "clickhouse-client")
	}
	store, err := audit.Open(ctx, audit.Options{
		Addr: c.chAddr, Database: c.chDatabase, Username: c.chUser, Password: c.chPassword, TLS: c.chTLSConfig, Log: log,
	})
	if err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx); err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

// openTrail returns the configured keys and the trail (for verify and
// prove).
func (c *common) openTrail(ctx context.Context) (*audit.Keyring, *audit.Store, error) {
	keys, _, err := c.keyring()
	if err != nil {
		return nil, nil, err
	}
	store, err := c.open(ctx, nil)
	return keys, store, err
}

// errNoKey is the refusal to run without an audit key.
var errNoKey = errors.New("no audit key configured: set ESKV_AUDIT_KEY (and ESKV_AUDIT_KEY_ID), or a key file with -key-file / ESKV_AUDIT_KEY_FILE " +
	"(make run keeps one in " + DefaultKeyFile + "); -insecure-dev-key uses a publicly known key for throwaway experiments")

// keyring returns the configured keys and where they came from. The key
// material is never logged.
func (c *common) keyring() (*audit.Keyring, string, error) {
	var older []audit.HMACKey
	if s := c.getenv("ESKV_AUDIT_OLD_KEYS"); s != "" {
		ks, err := audit.ParseKeys(s)
		if err != nil {
			return nil, "", fmt.Errorf("ESKV_AUDIT_OLD_KEYS: %w", err)
		}
		older = ks
	}
	if s := c.getenv("ESKV_AUDIT_KEY"); s != "" {
		secret, err := audit.ParseSecret(s)
		if err != nil {
			return nil, "", fmt.Errorf("ESKV_AUDIT_KEY: %w", err)
		}
		id := c.keyID
		if id == "" {
			id = audit.FingerprintID(secret)
		}
		kr, err := audit.NewKeyring(audit.HMACKey{ID: id, Secret: secret}, older...)
		if err != nil {
			return nil, "", fmt.Errorf("ESKV_AUDIT_KEY: %w", err)
		}
		return kr, "ESKV_AUDIT_KEY", nil
	}
	path := c.keyFile
	if path == "" {
		if _, err := os.Stat(DefaultKeyFile); err == nil {
			path = DefaultKeyFile
		}
	}
	if path != "" {
		kr, err := audit.LoadKeyFile(path)
		if err != nil {
			return nil, "", err
		}
		if len(older) > 0 {
			if kr, err = audit.NewKeyring(kr.Current, append(kr.Others(), older...)...); err != nil {
				return nil, "", err
			}
		}
		return kr, path, nil
	}
	if c.insecureDevKey {
		kr, err := audit.NewKeyring(audit.InsecureDevKey(), older...)
		return kr, "-insecure-dev-key", err
	}
	return nil, "", errNoKey
}
