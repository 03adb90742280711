package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/buildinfo"
)

// Run is a command's run: everything from outside the process comes in
// as arguments, so that tests call it in-process.
type Run func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Main runs run with the process's arguments and a context that the first
// SIGINT or SIGTERM cancels (the command stops gracefully; a second signal
// kills the process at once), then exits with ExitCode. --version (or
// -version) as the only argument prints the build instead (Versioned).
func Main(name string, run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(ExitCode(name, Versioned(name, buildinfo.Get(), run)(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

// Versioned is run, but for the arguments --version and -version alone:
// those print the build b on stdout (buildinfo.Line) and run nothing.
func Versioned(name string, b contract.BuildInfo, run Run) Run {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
			_, err := fmt.Fprintln(stdout, buildinfo.Line(name, b))
			return err
		}
		return run(ctx, args, stdout, stderr)
	}
}

// exitCoder is an error with the process exit code it calls for.
type exitCoder interface {
	error
	ExitCode() int
}

// ExitCode prints err (unless nil or a help request) to stderr after
// name and returns the process exit code: 0 without error, the code of
// an error that has one (an ExitCode() int method), else 1.
func ExitCode(name string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if ce, ok := errors.AsType[exitCoder](err); ok {
		return ce.ExitCode()
	}
	return 1
}
