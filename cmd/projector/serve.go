package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
)

// serve runs the projector until ctx ends: it migrates the projection,
// consumes kv.changes into it and serves /healthz, /readyz and /metrics.
func serve(ctx context.Context, args []string, stderr io.Writer) error {
	var c config
	var addr, addrFile, instanceID string
	var every, pace time.Duration
	var pprofAddr, metricsToken string
	var limits service.HTTPLimits
	var format projection.HistoryFormat
	f := newFlags("serve", &c, slog.LevelInfo, stderr)
	f.StringVar(&addr, "addr", "127.0.0.1:8081", "listen address of /healthz, /readyz and /metrics")
	f.Env("addr", "ESKV_PROJECTOR_ADDR")
	f.StringVar(&addrFile, "addr-file", "", "write the bound address to this file once listening")
	f.Env("addr-file", "ESKV_PROJECTOR_ADDR_FILE")
	f.DurationVar(&every, "check-interval", projector.DefaultCheckInterval,
		"how often a running projector re-checks that the topic was not recreated, truncated or repartitioned")
	f.Env("check-interval", "ESKV_PROJECTOR_CHECK_INTERVAL")
	f.DurationVar(&pace, "pace", projector.DefaultPace,
		"under load, apply at most about once per this interval, in larger batches (less Postgres CPU per event, up to this much more projection lag); 0 applies each batch at once")
	f.Env("pace", "ESKV_PROJECTOR_PACE")
	keep, retainEvery, checkRetention := historyRetention(f)
	checkFormat := historyFormat(f, &format)
	host, _ := os.Hostname()
	f.StringVar(&instanceID, "instance-id", "projector-"+host,
		"static consumer-group member id: a restarted projector takes its partitions back at once; unique per projector")
	f.Env("instance-id", "ESKV_PROJECTOR_ID")
	limits.Bind(f)
	service.BindPprof(f, &pprofAddr)
	service.BindMetricsToken(f, &metricsToken)
	if err := c.parse(f, args); err != nil {
		return err
	}
	if err := errors.Join(f.Check(every > 0, "check-interval", "must be a positive duration"), checkRetention(),
		f.Check(pace >= 0 && pace <= time.Second, "pace", "must be a duration from 0 to 1s"), checkFormat(), limits.Check(f)); err != nil {
		return err
	}
	log := c.logger(stderr)
	service.SetGCDefault(log)

	ln, err := service.Listen(addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	reg := service.NewRegistry()
	pool, err := c.postgres.OpenProjection(ctx, reg)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := projection.New(pool)
	store.SetHistoryFormat(format)
	p, err := projector.New(projector.Config{
		Brokers:       c.kafka.BrokerList(),
		Kafka:         c.kafka.Conn(),
		Topic:         c.kafka.Topic,
		Partitions:    int32(c.kafka.Partitions),
		CheckInterval: every,
		Pace:          cmp.Or(pace, -1), // 0 on the command line: no pacing
		InstanceID:    instanceID,
		Retention:     *keep, RetentionInterval: *retainEvery,
	}, store, log, reg)
	if err != nil {
		return err
	}
	// Ready while the projection's tables can be read (a lock held on
	// them stalls the projector as a dead server does) and a broker
	// answers: service.Handler bounds both by its ReadyTimeout.
	probe, err := c.kafka.Conn().NewClient("projector_probe", c.kafka.BrokerList())
	if err != nil {
		return err
	}
	defer probe.Close()
	ready := func(ctx context.Context) error {
		if store.Ready(ctx) != nil {
			return errors.New("postgres unavailable")
		}
		if probe.Ping(ctx) != nil {
			return errors.New("the brokers do not answer")
		}
		return nil
	}
	parts, err := service.WithPprof(pprofAddr, limits, log, p.Run)
	if err != nil {
		return err
	}
	return service.Serve(ctx, log, "projector", service.HTTP{Listener: ln, AddrFile: addrFile, Handler: service.Handler(reg, ready, metricsToken), Limits: limits, Registerer: reg}, parts...)
}

// historyRetention defines -history-retention and its interval on f; the
// returned check parses them once f is parsed, into keep and every.
func historyRetention(f *service.Flags) (keep *projection.Retention, every *time.Duration, check func() error) {
	var retention string
	keep, every = new(projection.Retention), new(time.Duration)
	f.StringVar(&retention, "history-retention", "",
		"how much of each key's history kv_history keeps: age=<duration> and/or versions=<n> (age=720h,versions=100); "+
			"empty keeps everything; a key's newest version is always kept")
	f.Env("history-retention", "ESKV_HISTORY_RETENTION")
	f.DurationVar(every, "history-retention-interval", projector.DefaultRetentionInterval,
		"how often the history retention runs")
	f.Env("history-retention-interval", "ESKV_HISTORY_RETENTION_INTERVAL")
	return keep, every, func() error {
		var err error
		*keep, err = projector.ParseRetention(retention)
		return errors.Join(f.Check(err == nil, "history-retention", fmt.Sprint(err)),
			f.Check(*every > 0, "history-retention-interval", "must be a positive duration"))
	}
}
