#!/usr/bin/env bash
# run-local.sh (make run): the whole stack on this machine, in the foreground.
#
# Postgres (started or installed by ensure-postgres.sh), ClickHouse (started or
# installed by ensure-clickhouse.sh, on 127.0.0.1:19000, data under
# /var/tmp/eskv-clickhouse; it keeps running after Ctrl-C, like Postgres), the
# dev broker (kfake persisting to .eskv/broker), the projector, the writer and
# the auditor. State lives under .eskv/ (git-ignored) and survives restarts:
# bin/, broker/, logs/, dev-token, audit-key, stack-id, and env (the ESKV_*
# settings of this stack, for `. .eskv/env` in another shell). The
# projection and the audit trail are the Postgres and ClickHouse databases
# eskv_<stack-id>: the id is generated once into .eskv/stack-id, so each
# clone has databases of its own and `make clean` (scripts/clean-local.sh)
# drops them with the rest of the state.
# Ctrl-C, SIGTERM or SIGHUP stops them all (the writer, then projector and
# auditor, then the broker; SIGKILL to any still running after 20 s) and
# returns once they have exited. A service that dies on its own is started
# again, after 1 s, then 2, 4, ... up to 30 s when it keeps dying.
#
# Environment (defaults in brackets):
#   ESKV_HTTP_ADDR       writer API address [127.0.0.1:8080]
#   ESKV_DEV_TOKEN       bearer token [.eskv/dev-token, generated once]
#   ESKV_BROKER_PORT     dev broker port on 127.0.0.1 [19092]
#   ESKV_POSTGRES_URL    [postgres://postgres@127.0.0.1:5432/eskv_<stack-id>?sslmode=disable,
#                        created when missing]; when set, the database is yours:
#                        this script neither creates nor (make clean) drops it
#   ESKV_PROJECTOR_ADDR  projector health/metrics address [127.0.0.1:8081]
#   ESKV_AUDITOR_ADDR    auditor health/metrics address [127.0.0.1:8082]
#   ESKV_CLICKHOUSE_ADDR audit trail ClickHouse, native protocol [127.0.0.1:19000];
#                        when set to another server, this script does not start one
#   ESKV_CLICKHOUSE_DATABASE audit trail database [eskv_<stack-id>]; when set,
#                        make clean does not drop it
#   ESKV_AUDIT_KEY       audit HMAC key (hex or base64) [.eskv/audit-key, a dev
#                        key generated once; auditor verify/report find it there]
#   ESKV_READY_WAIT      seconds to wait for /readyz [60]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v go >/dev/null || export PATH=$PATH:/usr/local/go/bin

# shellcheck source=scripts/local-state.sh
. scripts/local-state.sh
mkdir -p "$state/bin" "$state/broker" "$state/logs"

log() { printf 'run-local: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if pid=$(running_stack); then
	die "make run is already running in this clone (pid $pid); a second one would share $state/"
fi
db=$(stack_db create) || die "cannot name the local databases"

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

export ESKV_BROKER_PORT=${ESKV_BROKER_PORT:-19092}
export ESKV_BROKER_DATA=$state/broker
export ESKV_BROKERS=127.0.0.1:$ESKV_BROKER_PORT
own_postgres_db=$db
if [[ -n ${ESKV_POSTGRES_URL:-} ]]; then
	own_postgres_db= # the user's database: neither created nor dropped here
else
	export ESKV_POSTGRES_URL="postgres://postgres@127.0.0.1:5432/$db?sslmode=disable"
fi
export ESKV_HTTP_ADDR=${ESKV_HTTP_ADDR:-127.0.0.1:8080}
export ESKV_PROJECTOR_ADDR=${ESKV_PROJECTOR_ADDR:-127.0.0.1:8081}
export ESKV_AUDITOR_ADDR=${ESKV_AUDITOR_ADDR:-127.0.0.1:8082}
export ESKV_CLICKHOUSE_DATABASE=${ESKV_CLICKHOUSE_DATABASE:-$db}
# Another clone's databases (its .eskv/env sourced in this shell) would meet
# this clone's broker log: the projector would refuse to start.
for v in ESKV_POSTGRES_URL ESKV_CLICKHOUSE_DATABASE; do
	if [[ ${!v} =~ (^|/)(eskv_[0-9a-f]{8})([?]|$) && ${BASH_REMATCH[2]} != "$db" ]]; then
		die "$v names ${BASH_REMATCH[2]}, another clone's database (this clone's is $db; its .eskv/env sourced here?): unset $v"
	fi
done
ready_wait=${ESKV_READY_WAIT:-60}

http_host=${ESKV_HTTP_ADDR%:*}
http_port=${ESKV_HTTP_ADDR##*:}
case $http_host in
"" | 0.0.0.0 | "[::]")
	http_host=127.0.0.1
	# A writer listening on every interface must be told the address to
	# advertise (it refuses to start otherwise): locally, this one.
	export ESKV_ADVERTISE_URL=${ESKV_ADVERTISE_URL:-http://$http_host:$http_port}
	;;
esac
addr=$http_host:$http_port

command -v curl >/dev/null || {
	log "installing curl"
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl; } >&2 ||
		die "curl is needed: apt-get install curl"
}

# Refuse to start a second stack over a running one.
port_open 127.0.0.1 "$ESKV_BROKER_PORT" &&
	die "127.0.0.1:$ESKV_BROKER_PORT is already in use (another make run?)"
port_open "$http_host" "$http_port" &&
	die "$addr is already in use (another make run?); set ESKV_HTTP_ADDR"

declare -A pids=()
stop_sig=

tail_logs() {
	local name
	for name in "$@"; do
		[[ -f $state/logs/$name.log ]] || continue
		printf '\n==> %s/logs/%s.log (last 20 lines) <==\n' "$state" "$name" >&2
		tail -n 20 "$state/logs/$name.log" >&2
	done
}

alive() { [[ -n ${pids[$1]:-} ]] && kill -0 "${pids[$1]}" 2>/dev/null; }

# clock: now_ms, the time in milliseconds.
clock() {
	local us=${EPOCHREALTIME/[.,]/}
	now_ms=$((us / 1000))
}

# stop_grace: seconds a service has to exit after SIGTERM before SIGKILL;
# more than the HTTP drain of the services (service.ShutdownTimeout, 15 s).
stop_grace=20

# stop NAME...: SIGTERM to each of the services NAME, up to stop_grace
# seconds for all of them to exit, SIGKILL to those left; returns once
# every one has exited and been reaped.
stop() {
	local name i left
	for name; do
		alive "$name" && kill -TERM "${pids[$name]}" 2>/dev/null
	done
	for ((i = 0; i < stop_grace * 10; i++)); do
		left=
		for name; do
			alive "$name" && left=1
		done
		[[ -n $left ]] || break
		sleep 0.1
	done
	for name; do
		[[ -n ${pids[$name]:-} ]] || continue
		if alive "$name"; then
			log "$name did not stop within ${stop_grace}s; killing it"
			kill -KILL "${pids[$name]}" 2>/dev/null
		fi
		wait "${pids[$name]}" 2>/dev/null
		unset "pids[$name]"
	done
}

# cleanup (the EXIT trap, run once): stops every service. Signals are
# ignored from its first command on, so a second SIGTERM (make's) can
# neither cut it short nor run it again.
cleanup() {
	local rc=$?
	trap '' INT TERM HUP PIPE
	trap - EXIT
	set +e
	[[ -n $stop_sig ]] && rc=0
	if ((${#pids[@]})); then
		log "stopping"
		stop writer
		stop projector auditor
		stop devbroker
	fi
	rm -f "$state/run.pid"
	exit "$rc"
}

printf '%s\n' "$$" >"$state/run.pid"

# Stopping. A stop comes as several signals at once: Ctrl-C or
# `kill -TERM -- -PGID` reaches make and this script, and make forwards a
# SIGTERM of its own. A trap that stopped the stack itself could be
# interrupted or run again by the next signal (bash runs traps between any
# two commands, traps included), or leave a service it was starting
# unrecorded. So the traps only note the request (stop_sig), which the
# script checks between its steps (stop_requested) and in its supervising
# loop; leaving through `exit` runs cleanup once, which ignores further
# signals, stops every service and waits for each to exit.
trap 'stop_sig=${stop_sig:-INT}' INT
trap 'stop_sig=${stop_sig:-TERM}' TERM
trap 'stop_sig=${stop_sig:-HUP}' HUP
# Output to a closed pipe (make run | tee, tee gone) stops the stack too:
# the write fails instead of killing this script. (Trapped, not ignored:
# the services do not inherit it.)
trap 'stop_sig=${stop_sig:-PIPE}' PIPE
trap cleanup EXIT

# stop_requested: exits (through cleanup) once a stop was asked for.
stop_requested() {
	[[ -z $stop_sig ]] || exit 0
}

bash scripts/ensure-postgres.sh ${own_postgres_db:+"$own_postgres_db"}
stop_requested
if [[ -z ${ESKV_CLICKHOUSE_ADDR:-} ]]; then
	bash scripts/ensure-clickhouse.sh "$ESKV_CLICKHOUSE_DATABASE"
	export ESKV_CLICKHOUSE_ADDR=127.0.0.1:${ESKV_CLICKHOUSE_PORT:-19000}
fi
stop_requested

# Build what exists of the commands (some are still being written); the
# broker and the writer are required.
pkgs=()
for c in devbroker writer projector auditor; do
	compgen -G "cmd/$c/*.go" >/dev/null && pkgs+=("./cmd/$c")
done
for c in devbroker writer; do
	[[ " ${pkgs[*]} " == *" ./cmd/$c "* ]] || die "cmd/$c does not exist yet"
done
log "building ${pkgs[*]}"
# Stamped as make build stamps them: /metrics' eskv_build_info and
# GET /version name this checkout's commit. -trimpath, as the release
# builds: no path of this checkout in the binaries, so that another
# clone's make run reuses what this one compiled (Go's build cache keys
# a package built without it by its directory).
go build -trimpath -ldflags "$(bash scripts/version.sh | sed -n 3p)" -o "$state/bin/" "${pkgs[@]}"
stop_requested

if [[ -n ${ESKV_DEV_TOKEN:-} ]]; then
	:
elif [[ -s $state/dev-token ]]; then
	ESKV_DEV_TOKEN=$(<"$state/dev-token")
else
	ESKV_DEV_TOKEN=dev-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	(umask 077 && printf '%s\n' "$ESKV_DEV_TOKEN" >"$state/dev-token")
fi
export ESKV_DEV_TOKEN

# The audit key: ESKV_AUDIT_KEY when given, else a development key generated
# once into .eskv/audit-key (id:hex), which `go run ./cmd/auditor verify`
# and `report` find there by default.
if [[ -z ${ESKV_AUDIT_KEY:-} ]]; then
	if [[ ! -s $state/audit-key ]]; then
		(umask 077 && printf 'dev-%s:%s\n' "$(date -u +%Y%m%d)" "$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" >"$state/audit-key")
		log "generated a development audit key in $state/audit-key"
	fi
	export ESKV_AUDIT_KEY_FILE=$PWD/$state/audit-key
fi

# .eskv/env: what `auditor verify`/`report`, the projector's commands and
# kvctl need to reach this stack from another shell (`. .eskv/env`); their
# defaults name the machine-wide database eskv, not this clone's. Secrets
# given in the environment (ESKV_AUDIT_KEY, ESKV_DEV_TOKEN) are not copied.
{
	echo "# Written by scripts/run-local.sh (make run): this clone's local stack."
	echo "# From the repository root, in another shell: . $state/env"
	for v in ESKV_BROKERS ESKV_POSTGRES_URL ESKV_CLICKHOUSE_ADDR ESKV_CLICKHOUSE_DATABASE ESKV_AUDIT_KEY_FILE; do
		[[ -n ${!v:-} ]] && printf 'export %s=%q\n' "$v" "${!v}"
	done
	printf 'export KVCTL_URL=%q\n' "http://$addr"
} >"$state/env"

# How a service outlives neither Ctrl-C nor this script:
#   - setsid: each service runs in a session (and process group) of its own,
#     so a Ctrl-C or a signal to make run's process group reaches only make
#     and this script, which stops the services in order (the broker last:
#     the others leave their consumer groups and transactions through it);
#   - setpriv --pdeathsig TERM (PR_SET_PDEATHSIG, util-linux): the kernel
#     sends the service SIGTERM when this script dies without stopping it
#     (kill -9, the OOM killer). The flag is set after the fork, so the
#     guard exits when this script died before (the service's parent is
#     then another process).
# Pid files alone would not do: nothing reads them once this script is
# killed, and a service left running holds the ports of the next make run.
pdeath=()
if setpriv --pdeathsig TERM true 2>/dev/null; then
	pdeath=(setpriv --pdeathsig TERM -- bash -c '((PPID == $1)) || exit 125; shift; exec "$@"' run-local "$$")
else
	log "setpriv --pdeathsig is missing (util-linux older than 2.33): a make run killed with SIGKILL leaves its services running"
fi

# start NAME: runs .eskv/bin/NAME in the background with its output in
# .eskv/logs/NAME.log: the previous run's log is kept as .1 at the first
# start, a restart appends.
declare -A restarts=() started=()
start() {
	local name=$1 logf=$state/logs/$1.log args=()
	stop_requested
	[[ $name == auditor ]] && args=(serve)
	if [[ -z ${restarts[$name]:-} ]]; then
		[[ -f $logf ]] && mv -f "$logf" "$logf.1"
		restarts[$name]=0
	fi
	setsid "${pdeath[@]}" "$state/bin/$name" "${args[@]}" >>"$logf" 2>&1 </dev/null &
	pids[$name]=$!
	clock
	started[$name]=$now_ms
	log "started $name (pid $!, log $logf)"
}

start devbroker
for ((i = 0; ; i++)); do
	stop_requested
	port_open 127.0.0.1 "$ESKV_BROKER_PORT" && break
	if ! alive devbroker || ((i >= 100)); then
		tail_logs devbroker
		die "the dev broker did not listen on 127.0.0.1:$ESKV_BROKER_PORT"
	fi
	sleep 0.1
done

services=(devbroker)
if [[ " ${pkgs[*]} " == *" ./cmd/projector "* ]]; then
	start projector
	services+=(projector)
else
	log "cmd/projector does not exist yet: running without it"
fi
start writer
services+=(writer)
auditor_host=${ESKV_AUDITOR_ADDR%:*}
case $auditor_host in "" | 0.0.0.0 | "[::]") auditor_host=127.0.0.1 ;; esac
auditor_addr=$auditor_host:${ESKV_AUDITOR_ADDR##*:}
if [[ " ${pkgs[*]} " == *" ./cmd/auditor "* ]]; then
	start auditor
	services+=(auditor)
else
	log "cmd/auditor does not exist yet: running without it"
fi

log "waiting up to ${ready_wait}s for http://$addr/readyz"
for ((i = 0; ; i++)); do
	stop_requested
	curl -fsS -o /dev/null --max-time 2 "http://$addr/readyz" 2>/dev/null && break
	for name in "${services[@]}"; do
		alive "$name" || {
			tail_logs "${services[@]}"
			die "$name exited during startup"
		}
	done
	if ((i >= ready_wait * 4)); then
		tail_logs "${services[@]}"
		die "http://$addr/readyz did not succeed within ${ready_wait}s"
	fi
	sleep 0.25
done
if [[ -n ${pids[auditor]:-} ]]; then
	log "waiting up to ${ready_wait}s for http://$auditor_addr/readyz"
	for ((i = 0; ; i++)); do
		stop_requested
		curl -fsS -o /dev/null --max-time 2 "http://$auditor_addr/readyz" 2>/dev/null && break
		alive auditor || {
			tail_logs auditor
			die "auditor exited during startup"
		}
		if ((i >= ready_wait * 4)); then
			tail_logs auditor
			die "http://$auditor_addr/readyz did not succeed within ${ready_wait}s"
		fi
		sleep 0.25
	done
fi

pg_db=${ESKV_POSTGRES_URL##*/}
pg_db=${pg_db%%\?*}
cat <<EOF

eskv is running at http://$addr
dev token: $ESKV_DEV_TOKEN   (saved in $state/dev-token unless it came from ESKV_DEV_TOKEN)
logs:      $state/logs/ ($(IFS=,; echo "${services[*]}"))

Try:
    ADDR=$addr
    TOKEN=$ESKV_DEV_TOKEN
    curl -sS -X PUT "http://\$ADDR/v1/kv/tenant/acme/project/demo/checkpoint" -H "Authorization: Bearer \$TOKEN" -H 'Content-Type: application/json' -d '{"value":{"cursor":42},"expectedVersion":0,"semantics":{"purpose":"checkpoint","producer":"quickstart"}}'
    curl -sS "http://\$ADDR/v1/kv/tenant/acme/project/demo/checkpoint" -H "Authorization: Bearer \$TOKEN"

Projection: Postgres database $pg_db
Audit trail (ClickHouse $ESKV_CLICKHOUSE_ADDR, database $ESKV_CLICKHOUSE_DATABASE; docs/audit.md),
from another shell in this directory, after loading this stack's settings:
    . $state/env                      # ESKV_* (databases, broker, audit key file) and KVCTL_URL
    go run ./cmd/auditor report       # conflict rates per tenant, project, purpose
    go run ./cmd/auditor verify       # hash chains and rows against kv.changes
    clickhouse-client --port ${ESKV_CLICKHOUSE_ADDR##*:} -d $ESKV_CLICKHOUSE_DATABASE -q 'SELECT key, version, op, after_hash FROM audit_events FINAL ORDER BY ts DESC LIMIT 10'

Ctrl-C stops the stack; data is kept for the next run (make clean deletes it, databases included).
A service that dies is started again, after 1 s, doubling up to 30 s while it keeps dying.
EOF

# Until a stop: a service that exits on its own (a crash, the OOM killer)
# is started again after a pause that doubles from 1 s up to 30 s while it
# keeps dying, and is back at 1 s once it stayed up for a minute. The
# pause is a due time, not a sleep: a stop is seen within half a second,
# and nothing is started once it was asked for (start checks).
declare -A backoff=() due=()
while :; do
	stop_requested
	clock
	for name in "${services[@]}"; do
		if [[ -n ${pids[$name]:-} ]]; then
			alive "$name" && continue
			status=0
			wait "${pids[$name]}" 2>/dev/null || status=$?
			unset "pids[$name]"
			how="status $status"
			((status > 128)) && how+=", SIG$(kill -l $((status - 128)) 2>/dev/null || echo $((status - 128)))"
			((now_ms - started[$name] < 60000)) || backoff[$name]=1
			delay=${backoff[$name]:-1}
			backoff[$name]=$((delay * 2 > 30 ? 30 : delay * 2))
			restarts[$name]=$((restarts[$name] + 1))
			due[$name]=$((now_ms + delay * 1000))
			log "$name exited ($how); restarting in ${delay}s (restart ${restarts[$name]})"
		elif ((now_ms >= due[$name])); then
			start "$name"
		fi
	done
	sleep 0.5 || :
done
