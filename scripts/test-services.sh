#!/usr/bin/env bash
# test-services.sh: starts what `go test` needs and is not in-process.
# Postgres on 127.0.0.1:5432 and ClickHouse on 127.0.0.1:19000 (tests
# create and drop their own databases); Kafka is kfake, in-process.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/ensure-postgres.sh
bash scripts/ensure-clickhouse.sh
