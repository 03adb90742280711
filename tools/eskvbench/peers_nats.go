package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsTarget is NATS JetStream KV with file storage (one replica), the
// nats-server that `go install` built (scripts/ensure-peers.sh), else
// one on PATH. KeyValue.Update is its compare-and-swap on the key's
// revision.
type natsTarget struct {
	srv *peerServer
	nc  *nats.Conn
	kv  jetstream.KeyValue
}

func startNATSPeer(ctx context.Context, _ peerConfig) (system, error) {
	bin, err := findBinary(append(goBinaries("nats-server"), "nats-server")...)
	if err != nil {
		return system{}, err
	}
	srv, err := startServer(ctx, "nats", bin, 1, func(dir string, ports []int) []string {
		return []string{"-js", "-sd", filepath.Join(dir, "data"), "-a", "127.0.0.1", "-p", strconv.Itoa(ports[0])}
	})
	if err != nil {
		return system{}, err
	}
	t := &natsTarget{srv: srv}
	if err := t.connect(ctx); err != nil {
		t.close()
		return system{}, err
	}
	return system{name: "nats", version: binaryVersion(bin, "--version"), target: t, classify: serverClassifier("nats", srv)}, nil
}

// connect connects and creates the bucket.
func (t *natsTarget) connect(ctx context.Context) error {
	var err error
	if t.nc, err = nats.Connect("nats://"+t.srv.addr, nats.Timeout(10*time.Second)); err != nil {
		return fmt.Errorf("nats connect: %w", err)
	}
	js, err := jetstream.New(t.nc)
	if err != nil {
		return fmt.Errorf("nats jetstream: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if t.kv, err = js.CreateKeyValue(cctx, jetstream.KeyValueConfig{Bucket: "eskvbench", Storage: jetstream.FileStorage}); err != nil {
		return fmt.Errorf("nats create bucket: %w", err)
	}
	return nil
}

func (t *natsTarget) setup(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if _, err := t.kv.Create(ctx, k, []byte(`{"seq":0}`)); err != nil {
			return fmt.Errorf("nats create %s: %w", k, err)
		}
	}
	return nil
}

func (t *natsTarget) read(ctx context.Context, key string) ([]byte, int64, error) {
	e, err := t.kv.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	return e.Value(), int64(e.Revision()), nil
}

func (t *natsTarget) cas(ctx context.Context, key string, val []byte, rev int64) (bool, error) {
	_, err := t.kv.Update(ctx, key, val, uint64(rev))
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return false, nil
	}
	return err == nil, err
}

func (t *natsTarget) close() {
	if t.nc != nil {
		t.nc.Close()
	}
	t.srv.stop()
}
