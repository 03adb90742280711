package main

import (
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

// serveConfig is serve's configuration; every field is a flag
// (serveFlags).
type serveConfig struct {
	config
	addr, addrFile, instanceID string
	every, pace                time.Duration
	pprofAddr, metricsToken    string
	limits                     service.HTTPLimits
	format                     projection.HistoryFormat
	keep                       *projection.Retention
	retainEvery                *time.Duration
	// checkRetention and checkFormat check their settings once the
	// flags are parsed.
	checkRetention, checkFormat func() error
}

// flags returns serve's flags, bound to s.
func (s *serveConfig) flags(stderr io.Writer) *service.Flags {
	f := newFlags("serve", &s.config, slog.LevelInfo, stderr)
	// The projector's own settings read ESKV_PROJECTOR_…: -addr and
	// -addr-file are the auditor's too.
	own := f.Scope("ESKV_PROJECTOR")
	own.StringVar(&s.addr, "addr", "127.0.0.1:8081", "listen address of /healthz, /readyz and /metrics")
	own.StringVar(&s.addrFile, "addr-file", "", "write the bound address to this file once listening")
	own.DurationVar(&s.every, "check-interval", projector.DefaultCheckInterval,
		"how often a running projector re-checks that the topic was not recreated, truncated or repartitioned")
	own.DurationVar(&s.pace, "pace", projector.DefaultPace,
		"under load, apply at most about once per this interval, in larger batches (less Postgres CPU per event, up to this much more projection lag); 0 applies each batch at once")
	s.keep, s.retainEvery, s.checkRetention = historyRetention(f)
	s.checkFormat = historyFormat(f, &s.format)
	host, _ := os.Hostname()
	f.StringVar(&s.instanceID, "instance-id", "projector-"+host,
		"static consumer-group member id: a restarted projector takes its partitions back at once; unique per projector")
	f.Rename("instance-id", "ESKV_PROJECTOR_ID")
	s.limits.Bind(f)
	service.BindPprof(f, &s.pprofAddr)
	service.BindMetricsToken(f, &s.metricsToken)
	return f
}

// serve runs the projector until ctx ends: it migrates the projection,
// consumes kv.changes into it and serves /healthz, /readyz and /metrics.
func serve(ctx context.Context, args []string, stderr io.Writer) error {
	s := &serveConfig{}
	f := s.flags(stderr)
	if err := s.parse(f, args); err != nil {
		return err
	}
	if err := errors.Join(f.Check(s.every > 0, "check-interval", "must be a positive duration"), s.checkRetention(),
		f.Check(s.pace >= 0 && s.pace <= time.Second, "pace", "must be a duration from 0 to 1s"), s.checkFormat(), s.limits.Check(f)); err != nil {
		return err
	}
	log := s.logger(stderr)
	service.SetGCDefault(log)

	ln, err := service.Listen(s.addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	// Until the projection answers: /healthz 200, everything else 503.
	starting := service.Starting(log, service.HTTP{Listener: ln, AddrFile: s.addrFile, Limits: s.limits})
	defer starting()
	reg := service.NewRegistry()
	pool, err := s.postgres.OpenProjection(ctx, reg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := projection.New(pool)
	store.SetHistoryFormat(s.format)
	p, err := projector.New(s.projectorConfig(), store, log, reg)
	if err != nil {
		return err
	}
	// Ready while the projection's tables can be read (a lock held on
	// them stalls the projector as a dead server does) and a broker
	// answers: service.Handler bounds both by its ReadyTimeout.
	probe, err := s.kafka.Conn().NewClient("projector_probe", s.kafka.BrokerList())
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
	parts, err := service.WithPprof(s.pprofAddr, s.limits, log, p.Run)
	if err != nil {
		return err
	}
	return service.Serve(ctx, log, "projector", service.HTTP{Listener: starting(), AddrFile: s.addrFile, Handler: service.Handler(reg, ready, s.metricsToken), Limits: s.limits, Registerer: reg}, parts...)
}

// projectorConfig is the projector's configuration from the settings:
// -pace's 0 (no pacing) reaches projector.Config through service.Off.
func (s *serveConfig) projectorConfig() projector.Config {
	return projector.Config{
		Brokers:       s.kafka.BrokerList(),
		Kafka:         s.kafka.Conn(),
		Topic:         s.kafka.Topic,
		Partitions:    int32(s.kafka.Partitions),
		CheckInterval: s.every,
		Pace:          service.Off(s.pace),
		InstanceID:    s.instanceID,
		Retention:     *s.keep, RetentionInterval: *s.retainEvery,
	}
}

// historyRetention defines -history-retention and its interval on f; the
// returned check parses them once f is parsed, into keep and every.
func historyRetention(f *service.Flags) (keep *projection.Retention, every *time.Duration, check func() error) {
	var retention string
	keep, every = new(projection.Retention), new(time.Duration)
	f.StringVar(&retention, "history-retention", "",
		"how much of each key's history kv_history keeps: age=<duration> and/or versions=<n> (age=720h,versions=100); "+
			"empty keeps everything; a key's newest version is always kept")
	f.DurationVar(every, "history-retention-interval", projector.DefaultRetentionInterval,
		"how often the history retention runs")
	return keep, every, func() error {
		var err error
		*keep, err = projector.ParseRetention(retention)
		return errors.Join(f.Check(err == nil, "history-retention", fmt.Sprint(err)),
			f.Check(*every > 0, "history-retention-interval", "must be a positive duration"))
	}
}
