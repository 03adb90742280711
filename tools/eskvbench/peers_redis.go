package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisCAS compares a hash's field ver with ARGV[2] and, when equal,
// sets the value and the next version at once: Redis runs a script
// atomically, so this is the compare-and-swap a Redis user writes.
const redisCAS = `if redis.call('HGET', KEYS[1], 'ver') == ARGV[2] then
  redis.call('HSET', KEYS[1], 'v', ARGV[1], 'ver', ARGV[3])
  return 1
end
return 0`

// redisTarget is Redis (Debian's redis-server 7) with AOF on and fsync
// every second, its default durable setting, and no RDB snapshots.
type redisTarget struct {
	srv    *peerServer
	rdb    *redis.Client
	script *redis.Script
}

func startRedisPeer(ctx context.Context, pc peerConfig) (system, error) {
	bin, err := findBinary("redis-server")
	if err != nil {
		return system{}, err
	}
	srv, err := startServer(ctx, "redis", bin, 1, func(dir string, ports []int) []string {
		return []string{"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--dir", dir, "--appendonly", "yes",
			"--appendfsync", "everysec", "--save", "", "--daemonize", "no", "--loglevel", "warning"}
	})
	if err != nil {
		return system{}, err
	}
	t := &redisTarget{srv: srv, script: redis.NewScript(redisCAS),
		rdb: redis.NewClient(&redis.Options{Addr: srv.addr, PoolSize: pc.clients, Protocol: 2, DisableIdentity: true})}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := t.rdb.Ping(pingCtx).Err(); err != nil {
		t.close()
		return system{}, fmt.Errorf("redis ping: %w", err)
	}
	return system{name: "redis", version: binaryVersion(bin, "--version"), target: t, classify: serverClassifier("redis", srv)}, nil
}

func (t *redisTarget) setup(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := t.rdb.HSet(ctx, k, "v", `{"seq":0}`, "ver", 1).Err(); err != nil {
			return fmt.Errorf("redis HSET %s: %w", k, err)
		}
	}
	return nil
}

func (t *redisTarget) read(ctx context.Context, key string) ([]byte, int64, error) {
	vals, err := t.rdb.HMGet(ctx, key, "v", "ver").Result()
	if err != nil {
		return nil, 0, err
	}
	v, _ := vals[0].(string)
	ver, _ := vals[1].(string)
	rev, err := strconv.ParseInt(ver, 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("redis %s: version %q: %w", key, ver, err)
	}
	return []byte(v), rev, nil
}

func (t *redisTarget) cas(ctx context.Context, key string, val []byte, rev int64) (bool, error) {
	n, err := t.script.Run(ctx, t.rdb, []string{key}, val, strconv.FormatInt(rev, 10), strconv.FormatInt(rev+1, 10)).Int()
	return n == 1, err
}

func (t *redisTarget) close() {
	t.rdb.Close()
	t.srv.stop()
}
