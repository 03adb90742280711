package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/internal/service"
)

// serveConfig is what serve adds to the shared configuration.
type serveConfig struct {
	addr, addrFile, instance string
	group                    *string
	cfg                      audit.Config
	minAttempts              int
	limits                   service.HTTPLimits
	pprofAddr                string
	metricsToken             string
}

// serveFlags defines serve's own flags on f.
func serveFlags(f *service.Flags) *serveConfig {
	s := &serveConfig{cfg: audit.Config{MaxBatch: audit.DefaultMaxBatch, Linger: audit.DefaultLinger}}
	host, _ := os.Hostname()
	own := f.Scope(auditorScope)
	own.StringVar(&s.addr, "addr", "127.0.0.1:8082", "listen address of /healthz, /readyz, /metrics and /verification")
	own.StringVar(&s.addrFile, "addr-file", "", "write the bound address to this file once listening")
	own.IntVar(&s.cfg.MaxBatch, "max-batch", audit.DefaultMaxBatch, "records per ClickHouse insert at most")
	own.DurationVar(&s.cfg.Linger, "linger", audit.DefaultLinger, "how long a batch gathers records once the first arrived")
	a := &s.cfg.Alerts
	f.DurationVar(&a.Window, "alert-window", audit.DefaultAlertWindow,
		"conflict-rate alert window, whole minutes: the rate must be above the threshold in every minute of it; 0 disables alerts")
	f.Float64Var(&a.Threshold, "alert-threshold", audit.DefaultAlertThreshold, "conflict rate above which a window alerts")
	f.IntVar(&s.minAttempts, "alert-min-attempts", audit.DefaultAlertMinAttempts, "attempts (writes plus conflicts) a window needs before it can alert (0: no minimum)")
	f.DurationVar(&a.Interval, "alert-interval", audit.DefaultAlertInterval, "time between alert evaluations")
	f.DurationVar(&s.cfg.VerifyInterval, "verify-interval", 0,
		"verify the whole trail against kv.changes this often (eskv_auditor_verify_* metrics; each run reads all of kv.changes and every row); 0 disables it")
	s.group = groupFlag(f)
	f.StringVar(&s.instance, "instance-id", "auditor-"+host,
		"static member id in the consumer group (a restart gets its partitions back at once) and name in the alerts table; unique per auditor")
	f.Rename("instance-id", "ESKV_AUDITOR_ID")
	s.limits.Bind(f)
	service.BindPprof(f, &s.pprofAddr)
	service.BindMetricsToken(f, &s.metricsToken)
	return s
}

// serve runs the auditor: kv.changes and kv.conflicts into ClickHouse,
// conflict-rate alerts, and /healthz, /readyz and /metrics.
func serve(ctx context.Context, args []string, _, stderr io.Writer) error {
	f, c := newFlags("serve", stderr)
	s := serveFlags(f)
	if err := c.parse(f, args); err != nil {
		return err
	}
	// audit.Config takes 0 for its default: a 0 here is refused, never
	// silently the default.
	if err := errors.Join(f.Positive("max-batch"), f.Check(s.cfg.Linger > 0, "linger", "must be a positive duration"),
		f.Check(s.cfg.Alerts.Interval > 0, "alert-interval", "must be a positive duration"),
		f.Check(s.minAttempts >= 0, "alert-min-attempts", "must not be negative"), s.limits.Check(f)); err != nil {
		return err
	}
	log := service.Logger(stderr, *c.logLevel, "auditor")
	service.SetGCDefault(log)
	keys, source, err := c.keyring()
	if err != nil {
		return err
	}
	if keys.Current.ID == audit.InsecureDevKeyID {
		log.Warn("hashing with the publicly known insecure development key: these hashes protect nothing")
	}
	log.Info("audit key loaded", "key_id", keys.Current.ID, "from", source, "older_keys", len(keys.Others()))

	ln, err := service.Listen(s.addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	// Started while ClickHouse does not answer (a partition, its
	// restart), the auditor waits for it rather than exit, answering
	// /healthz 200 and everything else 503 meanwhile.
	starting := service.Starting(log, service.HTTP{Listener: ln, AddrFile: s.addrFile, Limits: s.limits})
	defer starting()
	var store *audit.Store
	if err := service.Retry(ctx, log, "ClickHouse", audit.Unreachable, func(ctx context.Context) (err error) {
		store, err = c.open(ctx, log)
		return err
	}); err != nil {
		return err
	}
	defer store.Close()
	reg := service.NewRegistry()
	cfg := s.cfg
	cfg.Kafka = c.kafka.Conn()
	cfg.Brokers, cfg.Topics, cfg.Group, cfg.InstanceID = c.kafka.BrokerList(), c.kafka.Topics(), *s.group, s.instance
	cfg.Alerts.MinAttempts, cfg.Alerts.Instance = uint64(s.minAttempts), s.instance
	a, err := audit.New(cfg, store, keys, log, reg)
	if err != nil {
		return err
	}
	ready := func(ctx context.Context) error {
		if !a.Ready() {
			return errors.New("not consuming yet")
		}
		if store.Ping(ctx) != nil {
			return errors.New("clickhouse unavailable")
		}
		return nil
	}
	parts, err := service.WithPprof(s.pprofAddr, s.limits, log, a.Run)
	if err != nil {
		return err
	}
	return service.Serve(ctx, log, "auditor", service.HTTP{Listener: starting(), AddrFile: s.addrFile, Handler: handler(a, reg, ready, s.metricsToken), Limits: s.limits, Registerer: reg}, parts...)
}

// handler serves /healthz, /readyz and /metrics (service.Handler) and
// GET /verification: the last periodic verification as JSON
// (audit.VerificationStatus), which the writers' console shows;
// protected as /metrics is, by the metrics token when there is one.
func handler(a *audit.Auditor, reg *prometheus.Registry, ready func(context.Context) error, token string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", service.Handler(reg, ready, token))
	mux.Handle("GET /verification", service.RequireMetricsToken(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(a.Verification())
	}), token))
	return mux
}
