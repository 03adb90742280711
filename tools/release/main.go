// Command release builds and checks what scripts/release.sh publishes
// beside the archives (docs/release.md):
//
//	release image   an OCI image archive of one command, for linux/amd64
//	                and linux/arm64, built without a daemon or a registry
//	release verify  read an image archive back and check it
//	release chart   check (or, with -set, set) the Helm chart's appVersion,
//	                version and default image tag against a release version
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: release image|verify|chart [flags]; release <command> -h for its flags
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

func run(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "image":
		return imageCommand(args[1:], stdout, stderr)
	case "verify":
		return verifyCommand(args[1:], stdout, stderr)
	case "chart":
		return chartCommand(args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
