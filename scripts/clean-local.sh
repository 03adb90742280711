#!/usr/bin/env bash
# clean-local.sh (make clean): deletes the local stack's state, so the next
# make run starts empty: .eskv/ (broker log, logs, token, audit key, ...)
# and the Postgres and ClickHouse databases eskv_<stack-id> that make run
# created for this clone (see scripts/local-state.sh). Databases named by
# ESKV_POSTGRES_URL or ESKV_CLICKHOUSE_DATABASE are never dropped.
#
# Best effort: when a server is down, its client is missing or the database
# is already gone, it says so (with the command to drop it later) and goes
# on; it neither installs nor starts anything. It refuses only while make
# run is running in this clone.
#
# Environment (defaults in brackets), the same servers make run used:
#   ESKV_POSTGRES_ADMIN_URL  [postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable]
#   ESKV_CLICKHOUSE_ADDR     [127.0.0.1:${ESKV_CLICKHOUSE_PORT:-19000}]
#   ESKV_CLICKHOUSE_USER, ESKV_CLICKHOUSE_PASSWORD [default, none]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/local-state.sh
. scripts/local-state.sh

log() { printf 'clean-local: %s\n' "$*" >&2; }

if pid=$(running_stack); then
	log "error: make run is running in this clone (pid $pid): stop it (Ctrl-C) first"
	exit 1
fi

drop_postgres() {
	local db=$1 url=${ESKV_POSTGRES_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable} err
	local sql="DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)"
	if ! command -v psql >/dev/null; then
		log "psql not found: Postgres database $db not dropped (later: psql '$url' -c '$sql')"
		return 0
	fi
	if err=$(PGCONNECT_TIMEOUT=5 psql "$url" -XqAt -v ON_ERROR_STOP=1 -c "$sql" 2>&1); then
		log "dropped Postgres database $db (if it existed)"
	else
		log "could not drop Postgres database $db: ${err%%$'\n'*}"
		log "  drop it later with: psql '$url' -c '$sql'"
	fi
}

drop_clickhouse() {
	local db=$1 addr=${ESKV_CLICKHOUSE_ADDR:-127.0.0.1:${ESKV_CLICKHOUSE_PORT:-19000}} err
	local sql="DROP DATABASE IF EXISTS \`$db\`"
	local args=(--host "${addr%:*}" --port "${addr##*:}" --user "${ESKV_CLICKHOUSE_USER:-default}" --connect_timeout 5)
	[[ -n ${ESKV_CLICKHOUSE_PASSWORD:-} ]] && args+=(--password "$ESKV_CLICKHOUSE_PASSWORD")
	if ! command -v clickhouse-client >/dev/null; then
		log "clickhouse-client not found: ClickHouse database $db not dropped (later: $sql on $addr)"
		return 0
	fi
	if err=$(clickhouse-client "${args[@]}" -q "$sql" 2>&1); then
		log "dropped ClickHouse database $db on $addr (if it existed)"
	else
		log "could not drop ClickHouse database $db on $addr: ${err%%$'\n'*}"
		log "  drop it later with: clickhouse-client --host ${addr%:*} --port ${addr##*:} -q '$sql'"
	fi
}

if db=$(stack_db read); then
	drop_postgres "$db"
	drop_clickhouse "$db"
elif [[ -d $state ]]; then
	log "no $state/stack-id: no databases of this clone to drop"
fi
rm -rf "$state"
log "removed $state/"
