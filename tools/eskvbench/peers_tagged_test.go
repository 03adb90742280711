//go:build peers

package main

import "testing"

// etcd and NATS are installed by scripts/ensure-peers.sh (make bench), not
// by CI: go test -tags peers ./eskvbench runs these too.

func TestPeerEtcd(t *testing.T) { testPeer(t, "etcd") }
func TestPeerNATS(t *testing.T) { testPeer(t, "nats") }
