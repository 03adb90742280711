package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/eskv/eskv/api/client"
	"github.com/eskv/eskv/events"
)

// These examples need a running stack (make run), so they are compiled but
// not run; TestClient exercises the same calls against an in-process one.

func ExampleClient_Put() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	ctx := context.Background()
	res, err := c.Put(ctx, client.PutRequest{
		Key:             "tenant/acme/project/demo/checkpoint",
		Value:           json.RawMessage(`{"cursor":42}`),
		ExpectedVersion: new(int64(0)), // create only if absent
		Semantics:       events.Semantics{Purpose: "checkpoint", Producer: "example"},
		RequestID:       "example-1", // safe to retry
	})
	var e *events.Error
	switch {
	case errors.As(err, &e) && e.Code == events.EConflict && e.Current != nil:
		fmt.Println("already at version", e.Current.Version)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("created at version", res.Entry.Version)
	}
}

func ExampleClient_Get() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	e, err := c.Get(context.Background(), "tenant/acme/project/demo/checkpoint")
	if events.ErrorCode(err) == events.ENotFound {
		fmt.Println("no checkpoint yet")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("version %d: %s\n", e.Version, e.Value)
}

func ExampleClient_ListAll() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	for e, err := range c.ListAll(context.Background(), client.ListOptions{Prefix: "tenant/acme/project/demo/", Limit: 500}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Key, e.Version)
	}
}
