package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/internal/service"
)

// serve runs the auditor: kv.changes and kv.conflicts into ClickHouse,
// conflict-rate alerts, and /healthz, /readyz and /metrics.
func serve(ctx context.Context, args []string, getenv func(string) string, _, stderr io.Writer) error {
	envDur := func(name string, def time.Duration) time.Duration {
		if d, err := time.ParseDuration(getenv(name)); err == nil {
			return d
		}
		return def
	}
	envFloat := func(name string, def float64) float64 {
		if f, err := strconv.ParseFloat(getenv(name), 64); err == nil {
			return f
		}
		return def
	}
	envInt := func(name string, def int) int {
		if n, err := strconv.Atoi(getenv(name)); err == nil {
			return n
		}
		return def
	}
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("auditor serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := commonFlags(fs, getenv)
	addr := fs.String("addr", env(getenv, "ESKV_AUDITOR_ADDR", "127.0.0.1:8082"), "listen address of /healthz, /readyz and /metrics (ESKV_AUDITOR_ADDR)")
	addrFile := fs.String("addr-file", env(getenv, "ESKV_AUDITOR_ADDR_FILE", ""), "write the bound address to this file once listening (ESKV_AUDITOR_ADDR_FILE)")
	maxBatch := fs.Int("max-batch", envInt("ESKV_AUDITOR_MAX_BATCH", audit.DefaultMaxBatch), "records per ClickHouse insert at most (ESKV_AUDITOR_MAX_BATCH)")
	linger := fs.Duration("linger", envDur("ESKV_AUDITOR_LINGER", audit.DefaultLinger), "how long a batch gathers records once the first arrived (ESKV_AUDITOR_LINGER)")
	window := fs.Duration("alert-window", envDur("ESKV_ALERT_WINDOW", audit.DefaultAlertWindow),
		"conflict-rate alert window, whole minutes: the rate must be above the threshold in every minute of it; 0 disables alerts (ESKV_ALERT_WINDOW)")
	threshold := fs.Float64("alert-threshold", envFloat("ESKV_ALERT_THRESHOLD", audit.DefaultAlertThreshold), "conflict rate above which a window alerts (ESKV_ALERT_THRESHOLD)")
	minAttempts := fs.Int("alert-min-attempts", envInt("ESKV_ALERT_MIN_ATTEMPTS", audit.DefaultAlertMinAttempts), "attempts (writes plus conflicts) a window needs before it can alert (ESKV_ALERT_MIN_ATTEMPTS)")
	interval := fs.Duration("alert-interval", envDur("ESKV_ALERT_INTERVAL", audit.DefaultAlertInterval), "time between alert evaluations (ESKV_ALERT_INTERVAL)")
	group := fs.String("group", env(getenv, "ESKV_AUDITOR_GROUP", audit.Group), "consumer group; its committed offsets say what the trail holds (ESKV_AUDITOR_GROUP)")
	instance := fs.String("instance-id", env(getenv, "ESKV_AUDITOR_ID", "auditor-"+host),
		"static member id in the consumer group (a restart gets its partitions back at once) and name in the alerts table; unique per auditor (ESKV_AUDITOR_ID)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err := c.check(); err != nil {
		return err
	}
	if *minAttempts < 0 {
		return errors.New("alert-min-attempts must not be negative")
	}
	log, err := c.logger(stderr, "auditor")
	if err != nil {
		return err
	}
	keys, source, err := c.keyring()
	if err != nil {
		return err
	}
	if keys.Current.ID == audit.InsecureDevKeyID {
		log.Warn("hashing with the publicly known insecure development key: these hashes protect nothing")
	}
	log.Info("audit key loaded", "key_id", keys.Current.ID, "from", source, "older_keys", len(keys.Others()))

	store, err := c.open(ctx, log)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a, err := audit.New(audit.Config{
		Brokers:    c.brokerList(),
		Topics:     c.topics(),
		Group:      *group,
		InstanceID: *instance,
		MaxBatch:   *maxBatch,
		Linger:     *linger,
		Alerts: audit.AlertConfig{
			Window: *window, Threshold: *threshold, MinAttempts: uint64(*minAttempts),
			Interval: *interval, Instance: *instance,
		},
	}, store, keys, log, reg)
	if err != nil {
		return err
	}

	return service.Serve(ctx, log, "auditor", *addr, *addrFile, handler(a, store, reg), a.Run)
}

// handler serves /healthz (the process is up), /readyz (consuming, and
// ClickHouse answers) and /metrics.
func handler(a *audit.Auditor, store *audit.Store, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !a.Ready() {
			http.Error(w, "not consuming yet", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := store.Ping(ctx); err != nil {
			http.Error(w, "clickhouse unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}
