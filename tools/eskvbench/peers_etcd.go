package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdTarget is a single-node etcd 3.4 (Debian's etcd-server), its
// compare-and-swap a transaction comparing the key's ModRevision.
type etcdTarget struct {
	srv *peerServer
	cli *clientv3.Client
}

func startEtcdPeer(ctx context.Context, _ peerConfig) (system, error) {
	bin, err := findBinary("etcd")
	if err != nil {
		return system{}, err
	}
	srv, err := startServer(ctx, "etcd", bin, 2, func(dir string, ports []int) []string {
		client, peer := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		return []string{"--name", "default", "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "default=" + peer,
			"--logger", "zap", "--log-level", "warn"}
	})
	if err != nil {
		return system{}, err
	}
	t := &etcdTarget{srv: srv}
	if t.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{srv.addr}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()}); err != nil {
		srv.stop()
		return system{}, fmt.Errorf("etcd client: %w", err)
	}
	// The port opens before the member is ready to serve: wait for a
	// read to succeed.
	err = waitUntil(ctx, 30*time.Second, func(ctx context.Context) error { _, err := t.cli.Get(ctx, "eskvbench-ready"); return err })
	if err != nil {
		t.close()
		return system{}, fmt.Errorf("etcd not ready: %w", err)
	}
	return system{name: "etcd", version: binaryVersion(bin, "--version"), target: t, classify: serverClassifier("etcd", srv)}, nil
}

func (t *etcdTarget) setup(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if _, err := t.cli.Put(ctx, k, `{"seq":0}`); err != nil {
			return fmt.Errorf("etcd put %s: %w", k, err)
		}
	}
	return nil
}

func (t *etcdTarget) read(ctx context.Context, key string) ([]byte, int64, error) {
	resp, err := t.cli.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, fmt.Errorf("etcd %s: no such key", key)
	}
	return resp.Kvs[0].Value, resp.Kvs[0].ModRevision, nil
}

func (t *etcdTarget) cas(ctx context.Context, key string, val []byte, rev int64) (bool, error) {
	resp, err := t.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(val))).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

func (t *etcdTarget) close() {
	t.cli.Close()
	t.srv.stop()
}

// waitUntil calls try (each call bounded to a second) until it succeeds
// or timeout passes; it returns the last error.
func waitUntil(ctx context.Context, timeout time.Duration, try func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		err := try(tctx)
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
