// Package service runs one of eskv's background services (projector,
// auditor) next to its HTTP endpoints (/healthz, /readyz, /metrics), and
// stops both in the right order.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"
)

// Serve listens on addr (writing the bound address to addrFile when it is
// set, for tools that start the service on port 0), serves h there, and
// runs run until ctx ends or run returns. Then it stops run first (the
// service leaves its consumer group; a batch in flight finishes or rolls
// back) and the HTTP server after it. run returning early is an error:
// the service is meant to run until stopped.
func Serve(ctx context.Context, log *slog.Logger, name, addr, addrFile string, h http.Handler, run func(context.Context) error) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Info("listening", "addr", ln.Addr().String())
	if addrFile != "" {
		if err := os.WriteFile(addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			ln.Close()
			return err
		}
	}

	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	rerr := make(chan error, 1)
	go func() { rerr <- run(rctx) }()
	herr := make(chan error, 1)
	go func() { herr <- hs.Serve(ln) }()

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-rerr:
		rerr = nil
		if runErr == nil {
			runErr = errors.New(name + " stopped unexpectedly")
		}
	case runErr = <-herr:
	}
	rcancel()
	if rerr != nil {
		if err := <-rerr; err != nil && runErr == nil {
			runErr = err
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	if runErr != nil && !errors.Is(runErr, http.ErrServerClosed) {
		return runErr
	}
	log.Info("stopped")
	return nil
}
