package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/eskv/eskv/api/client"
	"github.com/eskv/eskv/events"
)

// A sweeper: jobs not updated for five minutes, found by an index on
// updated_at (RFC 3339 in UTC, so strings compare as instants); the state
// is checked on the few entries returned.
func ExampleClient_ScanAll() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	cutoff := time.Now().UTC().Add(-5 * time.Minute).Format(time.RFC3339)
	stale := client.ScanOptions{
		Prefix: "tenant/acme/project/demo/jobs/",
		Filter: client.Filter{Field: "updated_at", Op: events.FilterLt, Value: cutoff},
		Limit:  100,
	}
	for e, err := range c.ScanAll(context.Background(), stale) {
		if err != nil {
			log.Fatal(err)
		}
		var job struct {
			State string `json:"state"`
		}
		if json.Unmarshal(e.Value, &job) == nil && job.State != "done" && job.State != "failed" {
			fmt.Println("stuck:", e.Key, job.State)
		}
	}
}
