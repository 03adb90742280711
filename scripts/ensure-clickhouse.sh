#!/usr/bin/env bash
# ensure-clickhouse.sh [DATABASE]
#
# Makes sure a ClickHouse server of the project's own answers on the native
# port 127.0.0.1:19000 (HTTP on 18123): installs Debian's clickhouse-server
# and clickhouse-client if missing, writes a small config under its data
# directory (data, logs and ports are the project's, never the package's
# /var/lib/clickhouse or 9000/8123) and starts it with --daemon (no init
# system needed). With an argument, also creates that database if it does
# not exist. Idempotent: a server already answering is left alone. Tests
# and `make run` share the server; tests use databases of their own.
#
# ESKV_CLICKHOUSE_DIR        data directory [/var/tmp/eskv-clickhouse]:
#                            config.xml, users.xml, server.pid, data/, log/
# ESKV_CLICKHOUSE_PORT       native (TCP) port [19000]
# ESKV_CLICKHOUSE_HTTP_PORT  HTTP port [18123]
# ESKV_CLICKHOUSE_WAIT       seconds to wait for the server [60]
#
# Stop it with: kill "$(cat /var/tmp/eskv-clickhouse/server.pid)"
set -euo pipefail

db=${1:-}
dir=${ESKV_CLICKHOUSE_DIR:-/var/tmp/eskv-clickhouse}
port=${ESKV_CLICKHOUSE_PORT:-19000}
http_port=${ESKV_CLICKHOUSE_HTTP_PORT:-18123}
wait_s=${ESKV_CLICKHOUSE_WAIT:-60}

log() { printf 'ensure-clickhouse: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ -n $db && ! $db =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
	die "database name '$db' must match [A-Za-z_][A-Za-z0-9_]*"
fi

server=/usr/sbin/clickhouse-server
# running PID: the process exists and is not a zombie.
running() {
	local state
	[[ -r /proc/$1/stat ]] || return 1
	state=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z ]]
}
client() { clickhouse-client --host 127.0.0.1 --port "$port" "$@"; }
ready() { client -q 'SELECT 1' >/dev/null 2>&1; }

if ! [[ -x $server ]] || ! command -v clickhouse-client >/dev/null; then
	[[ $(id -u) -eq 0 ]] || die "ClickHouse is not installed and this is not root: apt-get install clickhouse-server clickhouse-client"
	log "installing clickhouse-server and clickhouse-client"
	export DEBIAN_FRONTEND=noninteractive
	# The package's own service start fails without an init system (or is
	# blocked by policy-rc.d): the install still succeeds.
	apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
	apt-get -o DPkg::Lock::Timeout=300 install -y -qq clickhouse-server clickhouse-client >&2
fi

if ! ready; then
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		die "127.0.0.1:$port is taken by something that does not answer as ClickHouse"
	fi
	mkdir -p "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/format_schemas" "$dir/log"
	dir=$(cd "$dir" && pwd)
	# Rewritten every start, so a changed port or path takes effect.
	cat >"$dir/config.xml" <<EOF
<?xml version="1.0"?>
<!-- Written by scripts/ensure-clickhouse.sh; changes are overwritten. -->
<yandex>
    <logger>
        <level>warning</level>
        <log>$dir/log/clickhouse-server.log</log>
        <errorlog>$dir/log/clickhouse-server.err.log</errorlog>
        <size>100M</size>
        <count>3</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>$port</tcp_port>
    <http_port>$http_port</http_port>
    <max_connections>1024</max_connections>
    <keep_alive_timeout>3</keep_alive_timeout>
    <max_concurrent_queries>100</max_concurrent_queries>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <mark_cache_size>268435456</mark_cache_size>
    <path>$dir/data/</path>
    <tmp_path>$dir/tmp/</tmp_path>
    <user_files_path>$dir/user_files/</user_files_path>
    <format_schema_path>$dir/format_schemas/</format_schema_path>
    <users_config>$dir/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mlock_executable>false</mlock_executable>
    <max_session_timeout>3600</max_session_timeout>
    <default_session_timeout>60</default_session_timeout>
</yandex>
EOF
	cat >"$dir/users.xml" <<'EOF'
<?xml version="1.0"?>
<!-- Written by scripts/ensure-clickhouse.sh: user default, no password, loopback only. -->
<yandex>
    <profiles>
        <default>
            <max_memory_usage>4000000000</max_memory_usage>
            <use_uncompressed_cache>0</use_uncompressed_cache>
            <load_balancing>random</load_balancing>
        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks>
                <ip>127.0.0.1</ip>
                <ip>::1</ip>
            </networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
EOF
	# A stale pid file from a killed server makes --daemon refuse, also when
	# the pid is a zombie nobody reaped (no init system here).
	if [[ -s $dir/server.pid ]] && ! running "$(<"$dir/server.pid")"; then
		rm -f "$dir/server.pid"
	fi
	log "starting ClickHouse on 127.0.0.1:$port (data $dir)"
	(cd "$dir" && "$server" --config-file="$dir/config.xml" --pid-file="$dir/server.pid" --daemon) >&2 ||
		log "clickhouse-server --daemon failed; waiting anyway"
fi

for ((i = 0; i < wait_s * 10; i++)); do
	ready && break
	sleep 0.1
done
if ! ready; then
	[[ -f $dir/log/clickhouse-server.err.log ]] && tail -n 20 "$dir/log/clickhouse-server.err.log" >&2
	die "ClickHouse did not answer on 127.0.0.1:$port within ${wait_s}s (log: $dir/log/)"
fi

[[ -n $db ]] || exit 0
client -q "CREATE DATABASE IF NOT EXISTS \`$db\`" || die "could not create database $db"
