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
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/changelog"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal stops gracefully; a second one exits at once.
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return
	}
	fmt.Fprintln(os.Stderr, "auditor:", err)
	if _, ok := errors.AsType[*discrepancyError](err); ok {
		os.Exit(exitDiscrepancy)
	}
	os.Exit(1)
}

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

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], getenv, stdout, stderr)
	case "report":
		return report(ctx, args[1:], getenv, stdout, stderr)
	case "verify":
		return verify(ctx, args[1:], getenv, stdout, stderr)
	case "prove":
		return prove(ctx, args[1:], getenv, stdout, stderr)
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
	brokers        string
	topic          string
	conflictsTopic string
	partitions     int
	chAddr         string
	chDatabase     string
	chUser         string
	chPassword     string
	keyFile        string
	keyID          string
	insecureDevKey bool
	logLevel       string

	getenv func(string) string
}

// env returns getenv(name), or def when it is empty.
func env(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

func commonFlags(fs *flag.FlagSet, getenv func(string) string) *common {
	c := &common{getenv: getenv}
	fs.StringVar(&c.brokers, "brokers", env(getenv, "ESKV_BROKERS", "127.0.0.1:19092"), "Kafka seed brokers, comma-separated (ESKV_BROKERS)")
	fs.StringVar(&c.topic, "topic", env(getenv, "ESKV_TOPIC", changelog.DefaultChangesTopic), "changes topic (ESKV_TOPIC)")
	fs.StringVar(&c.conflictsTopic, "conflicts-topic", env(getenv, "ESKV_CONFLICTS_TOPIC", changelog.DefaultConflictsTopic), "conflicts topic (ESKV_CONFLICTS_TOPIC)")
	partitions, err := strconv.Atoi(env(getenv, "ESKV_PARTITIONS", strconv.Itoa(changelog.DefaultPartitions)))
	if err != nil {
		partitions = -1 // reported by check
	}
	fs.IntVar(&c.partitions, "partitions", partitions, "partition count the changes topic must have (ESKV_PARTITIONS)")
	fs.StringVar(&c.chAddr, "clickhouse-addr", env(getenv, "ESKV_CLICKHOUSE_ADDR", audit.DefaultClickHouseAddr), "ClickHouse native-protocol address (ESKV_CLICKHOUSE_ADDR)")
	fs.StringVar(&c.chDatabase, "clickhouse-database", env(getenv, "ESKV_CLICKHOUSE_DATABASE", audit.DefaultDatabase), "ClickHouse database of the audit trail, created when missing (ESKV_CLICKHOUSE_DATABASE)")
	fs.StringVar(&c.chUser, "clickhouse-user", env(getenv, "ESKV_CLICKHOUSE_USER", "default"), "ClickHouse user (ESKV_CLICKHOUSE_USER); the password is read from ESKV_CLICKHOUSE_PASSWORD only")
	c.chPassword = getenv("ESKV_CLICKHOUSE_PASSWORD")
	fs.StringVar(&c.keyFile, "key-file", env(getenv, "ESKV_AUDIT_KEY_FILE", ""),
		"audit key file: one key per line, id:key (hex or base64), current key first, older keys after it; "+
			"default "+DefaultKeyFile+" when it exists and ESKV_AUDIT_KEY is unset (ESKV_AUDIT_KEY_FILE)")
	fs.StringVar(&c.keyID, "key-id", env(getenv, "ESKV_AUDIT_KEY_ID", ""),
		"id of the key in ESKV_AUDIT_KEY (hex or base64, at least 32 bytes; read from the environment only), stored with every hash; "+
			"default fp-<first 12 hex digits of its SHA-256> (ESKV_AUDIT_KEY_ID). ESKV_AUDIT_OLD_KEYS lists keys of earlier rotations as id:key,...")
	fs.BoolVar(&c.insecureDevKey, "insecure-dev-key", env(getenv, "ESKV_AUDIT_INSECURE_DEV_KEY", "") == "true",
		"with no key configured, use a publicly known key (id "+audit.InsecureDevKeyID+"): its hashes protect nothing; for throwaway experiments only (ESKV_AUDIT_INSECURE_DEV_KEY)")
	fs.StringVar(&c.logLevel, "log-level", env(getenv, "ESKV_LOG_LEVEL", "info"), "debug, info, warn or error (ESKV_LOG_LEVEL)")
	return c
}

func (c *common) check() error {
	if c.partitions < 1 {
		return errors.New("partitions must be a positive integer (ESKV_PARTITIONS)")
	}
	return nil
}

func (c *common) topics() changelog.Topics {
	return changelog.Topics{Changes: c.topic, Conflicts: c.conflictsTopic, Partitions: int32(c.partitions)}
}

func (c *common) brokerList() []string { return strings.Split(c.brokers, ",") }

func (c *common) logger(stderr io.Writer, service string) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})).With("service", service), nil
}

// open connects to ClickHouse; log (nil: none) receives the driver's
// warnings.
func (c *common) open(ctx context.Context, log *slog.Logger) (*audit.Store, error) {
	if log != nil {
		log = log.With("component", "clickhouse-client")
	}
	return audit.Open(ctx, audit.Options{
		Addr: c.chAddr, Database: c.chDatabase, Username: c.chUser, Password: c.chPassword, Log: log,
	})
}

// errNoKey is the refusal to run without an audit key.
var errNoKey = errors.New("no audit key configured: set ESKV_AUDIT_KEY (and ESKV_AUDIT_KEY_ID), or a key file with -key-file / ESKV_AUDIT_KEY_FILE " +
	"(make run keeps one in " + DefaultKeyFile + "); -insecure-dev-key uses a publicly known key for throwaway experiments")

// keyring returns the configured keys and where they came from. The key
// material is never logged.
func (c *common) keyring() (*audit.Keyring, string, error) {
	var older []audit.Key
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
		kr, err := audit.NewKeyring(audit.Key{ID: id, Secret: secret}, older...)
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
