package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/eskv/eskv/api/client"
	"github.com/eskv/eskv/events"
)

// A nightly job that runs only while it holds its lock: the lease is
// renewed in the background, and the job's context ends if it is lost.
// (Compiled, not run: it needs a running stack; TestKeepLockStack runs the
// same calls against an in-process one.)
func ExampleClient_KeepLock() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	ctx := context.Background()
	host, _ := os.Hostname()
	lease, err := c.KeepLock(ctx, client.LockRequest{
		Key:    "tenant/acme/project/demo/locks/nightly",
		Holder: fmt.Sprintf("%s/%d", host, os.Getpid()),
		TTL:    30 * time.Second, // renewed every 10 s
	})
	if events.ErrorCode(err) == events.ELockHeld {
		fmt.Println("another run holds it")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.WithoutCancel(ctx))

	// Hand the fencing token to what the lock protects, and stop when
	// the lease's context ends.
	err = nightly(lease.Context(), lease.Token())
	switch {
	case errors.Is(lease.Err(), client.ErrLeaseLost):
		fmt.Println("lost the lock while the job ran:", lease.Err())
	case err != nil:
		fmt.Println("the job failed:", err)
	}
}

func nightly(ctx context.Context, token int64) error {
	fmt.Println("working with fencing token", token)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
		return nil
	}
}
