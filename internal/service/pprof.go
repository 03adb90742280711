package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// pprofWriteTimeout is the pprof server's shortest write timeout: a CPU
// profile answers after the seconds it samples.
const pprofWriteTimeout = 5 * time.Minute

// PprofAddrEnv is the environment variable every service reads its pprof
// address from; empty disables it.
const PprofAddrEnv = "ESKV_PPROF_ADDR"

// BindPprof defines -pprof-addr (default from ESKV_PPROF_ADDR) on f.
func BindPprof(f *Flags, addr *string) {
	f.StringVar(addr, "pprof-addr", "", "serve net/http/pprof on this address (port 0 picks a free one, logged at info); empty disables it")
}

// Pprof listens on addr and returns the part that serves net/http/pprof
// there until its context ends, with limits except a write timeout long
// enough for a profile of a few minutes. An empty addr returns nil: no
// part to run.
func Pprof(addr string, limits HTTPLimits, log *slog.Logger) (func(context.Context) error, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("pprof %w", err)
	}
	log.Info("pprof listening", "addr", ln.Addr().String())
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	// An execution trace (?seconds=N) shows where a request waits, which
	// a CPU profile does not: go tool trace.
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	limits.WriteTimeout = max(limits.WriteTimeout, pprofWriteTimeout)
	return servePart(limits.Server(mux), ln), nil
}

// servePart returns the part that serves hs on ln until its context ends.
func servePart(hs *http.Server, ln net.Listener) func(context.Context) error {
	return func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			hs.Close()
		}()
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// WithPprof returns parts with, when addr is set, the part serving pprof
// on it appended (see Pprof).
func WithPprof(addr string, limits HTTPLimits, log *slog.Logger, parts ...func(context.Context) error) ([]func(context.Context) error, error) {
	p, err := Pprof(addr, limits, log)
	if err != nil || p == nil {
		return parts, err
	}
	return append(parts, p), nil
}
