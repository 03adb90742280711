#!/usr/bin/env bash
# ensure-peers.sh
#
# Makes sure the peers eskvbench's figure 18 compares eskv with are
# installed: etcd 3.4 (Debian etcd-server), Redis 7 (Debian redis-server)
# and nats-server built from its Go module into `go env GOBIN` (or the
# first GOPATH's bin). Idempotent: installs only what is missing (or a
# nats-server older than ESKV_NATS_VERSION). The bench starts and stops
# each peer itself on free ports with a temporary data directory; nothing
# here starts a server. (On a machine with systemd, Debian's etcd-server
# package starts its own etcd on 2379; the bench does not use it.)
#
# A peer that cannot be installed is a warning, not an error: the bench
# prints it as "unavailable: <reason>" and goes on. Not called by CI.
#
# ESKV_NATS_VERSION  nats-server version to go install [v2.15.2]
set -uo pipefail

nats_version=${ESKV_NATS_VERSION:-v2.15.2}

log() { printf 'ensure-peers: %s\n' "$*" >&2; }

updated=
# apt_install PACKAGE: installs a Debian package as root.
apt_install() {
	if [[ $(id -u) -ne 0 ]]; then
		log "warning: $1 is missing and this is not root (apt-get install $1): figure 18 prints it as unavailable"
		return 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	if [[ -z $updated ]]; then
		apt-get -o DPkg::Lock::Timeout=300 update -qq >&2 || log "warning: apt-get update failed"
		updated=1
	fi
	log "installing $1"
	# The package's own service start fails without an init system (or is
	# blocked by policy-rc.d): the install still succeeds.
	apt-get -o DPkg::Lock::Timeout=300 install -y -qq "$1" >&2 || {
		log "warning: apt-get install $1 failed: figure 18 prints it as unavailable"
		return 1
	}
}

command -v etcd >/dev/null || apt_install etcd-server
command -v redis-server >/dev/null || apt_install redis-server

# nats-server: where eskvbench looks first (peers_nats.go).
if ! command -v go >/dev/null; then
	log "warning: no go on PATH: cannot build nats-server"
	exit 0
fi
gobin=$(go env GOBIN)
if [[ -z $gobin ]]; then
	gopath=$(go env GOPATH)
	gobin=${gopath%%:*}/bin
fi
want=${nats_version#v}
have=
if [[ -x $gobin/nats-server ]]; then
	have=$("$gobin/nats-server" --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -n1)
fi
if [[ -z $have || $(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n1) != "$want" ]]; then
	log "building nats-server $nats_version into $gobin (go install)"
	go install "github.com/nats-io/nats-server/v2@$nats_version" >&2 ||
		log "warning: go install nats-server@$nats_version failed: figure 18 prints nats as unavailable"
fi
exit 0
