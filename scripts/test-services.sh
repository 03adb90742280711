#!/usr/bin/env bash
# test-services.sh: starts what `go test` needs and is not in-process.
# Postgres on 127.0.0.1:5432, ClickHouse on 127.0.0.1:19000 (tests
# create and drop their own databases); Kafka is kfake, in-process.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/ensure-postgres.sh
bash scripts/ensure-clickhouse.sh
# chromium: the status page's browser tests (e2e/ui_test.go).
bash scripts/ensure-chromium.sh
# node and npm: make compat's kafkajs consumer (tools/foreign-consumer) and
# chDB runner (tools/chcheck), which make test runs too.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "test-services: installing nodejs and npm (apt-get)" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq nodejs npm >&2
fi
# redis-server: tools/eskvbench's peer lifecycle test (TestPeerRedis, figure
# 18) starts one on a free port. Installed here, not only by make bench's
# ensure-peers.sh, because make test runs that test on a clean machine.
if ! command -v redis-server >/dev/null; then
	echo "test-services: installing redis-server (apt-get)" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq redis-server >&2
fi
