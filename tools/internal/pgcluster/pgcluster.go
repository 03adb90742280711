// Package pgcluster starts a Postgres cluster of a tool's own, configured
// as production runs Postgres (autovacuum on, pg_stat_statements loaded),
// in a temporary directory on a free port, and removes it on Close. The
// machine's shared cluster may run with autovacuum off (a CI image does):
// a benchmark of sustained writes on it measures bloat no production
// database accumulates, and must not change the settings other databases
// of that cluster live with.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/internal/proc"
)

// Settings are the cluster's postgresql.conf beyond initdb's defaults: a
// small production server's (PGTune's figures for 4 GiB and SSD storage),
// with every durability setting at its default (fsync, synchronous_commit
// and full_page_writes on).
var Settings = []string{
	"listen_addresses = '127.0.0.1'",
	"max_connections = 200",
	"shared_buffers = 1GB",
	"effective_cache_size = 3GB",
	"maintenance_work_mem = 256MB",
	"work_mem = 8MB",
	"wal_buffers = 16MB",
	"min_wal_size = 1GB",
	"max_wal_size = 4GB",
	"checkpoint_completion_target = 0.9",
	"random_page_cost = 1.1",
	"effective_io_concurrency = 200",
	"autovacuum = on",
	"shared_preload_libraries = 'pg_stat_statements'",
	"pg_stat_statements.track = all",
	"log_min_messages = warning",
	"logging_collector = off",
}

// Cluster is a running cluster.
type Cluster struct {
	Dir      string // data directory's parent: data/, the log, the socket
	Port     int
	AdminURL string // superuser postgres, database postgres
	bin      string
	owner    *user.User // the user the server runs as when started by root
}

// Bin finds Postgres' server binaries (initdb, pg_ctl): PG_BIN, else the
// newest /usr/lib/postgresql/*/bin (Debian's layout), else PATH.
func Bin() (string, error) {
	if d := os.Getenv("PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("pgcluster: no initdb found (set PG_BIN, or install postgresql)")
}

// Start creates a cluster in a new temporary directory and starts it.
func Start(ctx context.Context, tool string) (_ *Cluster, err error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	ports, err := proc.FreePorts(1)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", tool+"-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Port: ports[0], bin: bin}
	c.AdminURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port)
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if os.Geteuid() == 0 { // initdb refuses root
		if c.owner, err = user.Lookup("postgres"); err != nil {
			return nil, fmt.Errorf("pgcluster: running as root needs a postgres user: %w", err)
		}
		if err := chown(dir, c.owner); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := c.command(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgcluster: initdb: %w\n%s", err, out)
	}
	conf := append([]string{"port = " + strconv.Itoa(c.Port), "unix_socket_directories = '" + dir + "'"}, Settings...)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString("\n# pgcluster\n" + strings.Join(conf, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if out, err := c.command(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(dir, "postgres.log"), "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
		return nil, fmt.Errorf("pgcluster: pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	conn, err := pgx.Connect(ctx, strings.Replace(c.AdminURL, "/postgres?", "/template1?", 1))
	if err != nil {
		return nil, fmt.Errorf("pgcluster: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// In template1, so every database created from it has the view.
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return nil, fmt.Errorf("pgcluster: pg_stat_statements: %w", err)
	}
	return c, nil
}

// command runs a Postgres binary as the cluster's owner.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bin, name)
	if c.owner == nil {
		return exec.CommandContext(ctx, path, args...)
	}
	return exec.CommandContext(ctx, "runuser", append([]string{"-u", c.owner.Username, "--", path}, args...)...)
}

// Close stops the server (fast shutdown) and removes the directory.
func (c *Cluster) Close() {
	if _, err := os.Stat(filepath.Join(c.Dir, "data", "postmaster.pid")); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_ = c.command(ctx, "pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-m", "fast", "-w", "stop").Run()
		cancel()
	}
	_ = os.RemoveAll(c.Dir)
}

func chown(dir string, u *user.User) error {
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return err
	}
	return os.Chown(dir, uid, gid)
}
