#!/usr/bin/env bash
# ensure-postgres.sh [DATABASE]
#
# Makes sure PostgreSQL answers on 127.0.0.1:5432: installs the Debian package
# if it is missing and starts the cluster (no init system needed). With an
# argument, also creates that database if it does not exist. Idempotent.
#
# ESKV_POSTGRES_ADMIN_URL  superuser connection used to check readiness and
#                          create the database (default:
#                          postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable).
#                          When set, this script does not install or start a
#                          local server: the URL's server is yours.
# ESKV_POSTGRES_WAIT       seconds to wait for the server (default 60).
set -euo pipefail

db=${1:-}
admin_url=${ESKV_POSTGRES_ADMIN_URL:-}
wait_s=${ESKV_POSTGRES_WAIT:-60}

log() { printf 'ensure-postgres: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ -n $db && ! $db =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
	die "database name '$db' must match [A-Za-z_][A-Za-z0-9_]*"
fi

port_open() { (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }

# Loopback trust auth, so the project's default URLs
# (postgres://postgres@127.0.0.1:5432/...) work on a server we installed.
trust_loopback() {
	local hba
	for hba in /etc/postgresql/*/main/pg_hba.conf; do
		grep -q '^# eskv: loopback trust' "$hba" && continue
		log "allowing trust auth from 127.0.0.1 and ::1 in $hba (development machine)"
		{
			echo '# eskv: loopback trust for local development (scripts/ensure-postgres.sh)'
			echo 'host all all 127.0.0.1/32 trust'
			echo 'host all all ::1/128 trust'
			cat "$hba"
		} >"$hba.eskv.tmp"
		chown --reference="$hba" "$hba.eskv.tmp" && chmod --reference="$hba" "$hba.eskv.tmp"
		mv "$hba.eskv.tmp" "$hba"
	done
}

if [[ -z $admin_url ]]; then
	admin_url='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'
	if ! port_open; then
		installed=0
		if ! compgen -G '/etc/postgresql/*/main' >/dev/null || ! command -v pg_ctlcluster >/dev/null; then
			[[ $(id -u) -eq 0 ]] || die "PostgreSQL is not installed and this is not root: install the 'postgresql' package"
			log "installing postgresql"
			export DEBIAN_FRONTEND=noninteractive
			apt-get update -qq >&2
			apt-get install -y -qq postgresql >&2
			installed=1
		fi
		# shellcheck disable=SC2012 # version directories are plain numbers
		version=$(ls /etc/postgresql | sort -V | tail -n 1)
		[[ -n $version ]] || die "no cluster under /etc/postgresql after install"
		((installed)) && trust_loopback
		if pg_ctlcluster --skip-systemctl-redirect "$version" main status >/dev/null 2>&1; then
			# Running but not on 127.0.0.1:5432 yet, or just started by the
			# package: pick up the pg_hba.conf change.
			pg_ctlcluster --skip-systemctl-redirect "$version" main reload >&2 || true
		else
			log "starting PostgreSQL $version/main"
			pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 ||
				log "pg_ctlcluster start failed; waiting anyway"
		fi
	fi
fi

command -v pg_isready >/dev/null || die "pg_isready not found: install postgresql-client"

for ((i = 0; i < wait_s * 4; i++)); do
	pg_isready -q -d "$admin_url" && break
	sleep 0.25
done
pg_isready -q -d "$admin_url" ||
	die "PostgreSQL did not accept connections within ${wait_s}s ($(pg_isready -d "$admin_url" 2>&1 || true))"

[[ -n $db ]] || exit 0

q() { psql "$admin_url" -XqAt -v ON_ERROR_STOP=1 -c "$1"; }
exists() { [[ $(q "SELECT 1 FROM pg_database WHERE datname = '$db'") == 1 ]]; }

err=$(q 'SELECT 1' 2>&1 >/dev/null) ||
	die "cannot connect as superuser with $admin_url: ${err%%$'\n'*} (set ESKV_POSTGRES_ADMIN_URL)"
exists && exit 0
log "creating database $db"
# A concurrent run may create it first: only a database still missing is an error.
err=$(q "CREATE DATABASE \"$db\"" 2>&1 >/dev/null) || exists ||
	die "could not create database $db: ${err%%$'\n'*}"
