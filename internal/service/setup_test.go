package service_test

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/testenv"
)

// TestOpenProjectionWaitsForTheDatabase: a service started while its
// database does not answer (nothing listens at the URL's address yet)
// logs that it tries again and opens the projection once the database
// answers, instead of failing at once (a writer restarted into a network
// cut from Postgres exited ten times in ten seconds under make chaos).
func TestOpenProjectionWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	pg := testenv.MustPostgresDB(t)
	real, err := url.Parse(pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	via := *real
	via.Host = testenv.ForwardLater(t, real.Host, time.Second)

	var logs testenv.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := (&service.Postgres{URL: via.String()}).OpenProjection(ctx, nil, log)
	if err != nil {
		t.Fatalf("OpenProjection while the database came up a second later: %v", err)
	}
	pool.Close()
	if !strings.Contains(logs.String(), "the projection database does not answer; trying again") {
		t.Errorf("no warning while it waited; logs:\n%s", logs.String())
	}
}
