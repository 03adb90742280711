#!/usr/bin/env bash
# test-local-stack.sh (make test-scripts): make run and make clean as a new
# user meets them, from temporary clones of this repository (its working
# tree's changes included) on free ports from ESKV_TEST_PORT_BASE [18480]:
#
#   1. make clean with the servers unreachable, and with nothing to clean:
#      exit 0, saying what it could not drop
#   2. clone a: make run → ready; PUT and GET a key with the dev token;
#      auditor verify with .eskv/env finds the clone's trail; make clean is
#      refused while it runs; Ctrl-C (SIGINT); the databases eskv_<id> exist
#   3. clone a: make clean → .eskv/ and both databases gone
#   4. clone a: make run → ready on empty state (the key is new again)
#   5. clone b beside it: make run → both ready, each with its own data
#   6. Ctrl-C both
#   7. clone a: ESKV_TEST_STOPS [10] times each, make run → ready → SIGTERM,
#      then SIGINT, to make run's process group (what a supervisor or CI
#      sends; make forwards a SIGTERM of its own); every second time the
#      signal comes again 0.2 to 1 s later, as when Ctrl-C is pressed twice
#      or a supervisor repeats it: every time make run's process group ends
#      and no process of the stack (a binary under .eskv/bin/) is left
#   8. clone a: make run, kill -9 of the writer → make run starts it again
#      and its /readyz answers 200 within 60 s
#   9. make clean both → databases gone
# It ends with a summary: SIGTERM stops 10/10 clean, SIGINT stops 10/10
# clean, killed writer back in 3.1s.
#
# Everything it starts (processes, databases, the clones under $TMPDIR) is
# removed on exit, also on failure. ESKV_TEST_READY_WAIT [300] bounds each
# make run's start (the first one builds four commands).
set -euo pipefail
# Job control: each make run gets a process group of its own that takes
# SIGINT, as it does in a terminal (a plain background job ignores it).
set -m
# A SIGINT ignored when this script started (it was launched as a
# background job of a non-interactive shell, `nohup … &`) stays ignored in
# every make run it starts, which then cannot stop on Ctrl-C: say so
# rather than fail 60 s later on "did not stop".
if [[ $(trap -p INT) == "trap -- '' SIGINT" ]]; then
	echo "test-local-stack: error: SIGINT is ignored in this shell (started in the background by a non-interactive shell?): run it in the foreground or from a shell with job control (set -m)" >&2
	exit 1
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v go >/dev/null || export PATH=$PATH:/usr/local/go/bin
ready_wait=${ESKV_TEST_READY_WAIT:-300}
next_port=${ESKV_TEST_PORT_BASE:-18480}
stops=${ESKV_TEST_STOPS:-10}
admin_url=${ESKV_POSTGRES_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
ch_addr=${ESKV_CLICKHOUSE_ADDR:-127.0.0.1:${ESKV_CLICKHOUSE_PORT:-19000}}

# The stack's settings come from make run, not from this shell (a sourced
# .eskv/env would point the clones at another stack's databases).
for v in $(compgen -e); do
	case $v in
	ESKV_POSTGRES_ADMIN_URL | ESKV_CLICKHOUSE_ADDR | ESKV_CLICKHOUSE_PORT | ESKV_CLICKHOUSE_USER | ESKV_CLICKHOUSE_PASSWORD) ;;
	ESKV_* | KVCTL_*) unset "$v" ;;
	esac
done

log() { printf 'test-local-stack: %s\n' "$*" >&2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/eskv-stack-test.XXXXXX")
declare -A runs=() http=() broker=() projector=() auditor=()

# dump NAME: the end of NAME's make run output and service logs.
dump() {
	local f
	for f in "$tmp/$1.out" "$tmp/$1"/.eskv/logs/*.log; do
		[[ -f $f ]] || continue
		printf '\n==> %s (last 30 lines) <==\n' "${f#"$tmp"/}" >&2
		tail -n 30 "$f" >&2
	done
}

fail() {
	log "FAIL: $1"
	[[ -n ${2:-} ]] && dump "$2"
	exit 1
}

cleanup() {
	local rc=$? name p exe dir
	set +e
	trap - EXIT INT TERM
	for name in "${!runs[@]}"; do
		kill -INT -- "-${runs[$name]}" 2>/dev/null
	done
	for name in "${!runs[@]}"; do
		wait_exit "${runs[$name]}" 30 || kill -KILL -- "-${runs[$name]}" 2>/dev/null
	done
	# Services of a make run killed before it could stop them: their
	# binaries are in the clones.
	for p in /proc/[0-9]*; do
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		[[ $exe == "$tmp"/* ]] && kill -KILL "${p#/proc/}" 2>/dev/null
	done
	for dir in "$tmp"/*/; do
		[[ -d $dir/.eskv ]] && (cd "$dir" && bash scripts/clean-local.sh >/dev/null 2>&1)
	done
	rm -rf "$tmp"
	if ((rc == 0)); then log "PASS (${SECONDS}s)"; else log "FAILED (exit $rc, ${SECONDS}s)"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# take_port VAR: sets VAR to the next free port from next_port on.
take_port() {
	while ! port_free "$next_port"; do ((next_port++)); done
	printf -v "$1" '%s' "$next_port"
	((++next_port))
}

# clone NAME: a clone of the repository in $tmp/NAME, with the working
# tree's modified and new files copied over it; four free ports for its stack.
clone() {
	local name=$1 dir=$tmp/$1 f
	git clone -q "$root" "$dir"
	(cd "$root" && git ls-files -m -o --exclude-standard) | while IFS= read -r f; do
		if [[ -e $root/$f ]]; then
			mkdir -p "$(dirname "$dir/$f")" && cp -p "$root/$f" "$dir/$f"
		else
			rm -f "$dir/$f"
		fi
	done
	take_port "http[$name]"
	take_port "broker[$name]"
	take_port "projector[$name]"
	take_port "auditor[$name]"
}

# micros: the time in microseconds.
micros() { echo "${EPOCHREALTIME/[.,]/}"; }

# wait_exit PID SECONDS: whether PID (-PGID: every process of the group)
# ended within SECONDS.
wait_exit() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 -- "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

# start NAME: make run in clone NAME, in the background, on its ports; its
# output in $tmp/NAME.out, emptied first (ready must not find the previous
# run's banner there before the background job gets to open it).
start() {
	local name=$1
	: >"$tmp/$name.out"
	(
		cd "$tmp/$name"
		export ESKV_HTTP_ADDR=127.0.0.1:${http[$name]} ESKV_BROKER_PORT=${broker[$name]}
		export ESKV_PROJECTOR_ADDR=127.0.0.1:${projector[$name]} ESKV_AUDITOR_ADDR=127.0.0.1:${auditor[$name]}
		exec make run
	) >>"$tmp/$name.out" 2>&1 </dev/null &
	runs[$name]=$!
	disown "$!" # no job notices; bash still reaps it, and wait_exit polls
	log "$name: make run (pid $!, http ${http[$name]}, broker ${broker[$name]})"
}

# ready NAME: waits for make run's banner, printed once writer and auditor
# answer /readyz.
ready() {
	local name=$1 pid=${runs[$1]} t0=$SECONDS
	until grep -q '^eskv is running at' "$tmp/$name.out" 2>/dev/null; do
		kill -0 "$pid" 2>/dev/null || fail "$name: make run exited before it was ready" "$name"
		((SECONDS - t0 < ready_wait)) || fail "$name: make run not ready within ${ready_wait}s" "$name"
		sleep 0.5
	done
	log "$name: ready in $((SECONDS - t0))s"
}

# stack_pids NAME [BINARY]: the processes running a binary of clone NAME's
# .eskv/bin/ (BINARY only, when given), one pid a line.
stack_pids() {
	local p arg0 exe
	for p in /proc/[0-9]*; do
		# The services' argv[0] is .eskv/bin/NAME: read without a fork,
		# it spares a readlink for most processes.
		arg0=
		read -r -d '' arg0 2>/dev/null <"$p/cmdline" || :
		[[ $arg0 == *bin/* ]] || continue
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		[[ $exe == "$tmp/$1/.eskv/bin/${2:-}"* ]] && printf '%s\n' "${p#/proc/}"
	done
	return 0
}

# stop NAME [SIGNAL [AGAIN]]: SIGNAL [INT: Ctrl-C, as a terminal sends it]
# to make run's process group, and again AGAIN seconds later when given;
# the group (make, run-local.sh) must end within 90 s (the services have
# 20 s a stage to stop) having stopped every service. Fails when a check
# fails; returns 1, after killing them, when processes of the stack are left.
stop() {
	local name=$1 sig=${2:-INT} again=${3:-} pid=${runs[$1]} left i
	kill "-$sig" -- "-$pid"
	if [[ -n $again ]]; then
		sleep "$again"
		kill "-$sig" -- "-$pid" 2>/dev/null
	fi
	wait_exit "-$pid" 90 || fail "$name: make run did not stop within 90s of SIG$sig" "$name"
	unset "runs[$name]"
	left=$(stack_pids "$name")
	if [[ -n $left ]]; then
		log "$name: after SIG$sig, processes of the stack left running: $(ps -o pid=,args= -p "${left//$'\n'/,}" | tr '\n' ';')"
		# shellcheck disable=SC2086 # one pid a word
		kill -KILL $left 2>/dev/null
		# Gone (their ports free) before the next make run.
		for ((i = 0; i < 50; i++)); do
			[[ -z $(stack_pids "$name") ]] && break
			sleep 0.1
		done
		return 1
	fi
	[[ ! -e $tmp/$name/.eskv/run.pid ]] || fail "$name: .eskv/run.pid left after the stop" "$name"
	grep -q 'run-local: stopping' "$tmp/$name.out" || fail "$name: make run did not stop its services" "$name"
	log "$name: stopped (SIG$sig${again:+, again after ${again}s})"
}

# clean NAME [ENV...]: make clean in clone NAME; its output in $tmp/NAME.clean.
clean() {
	local name=$1
	shift
	(cd "$tmp/$name" && env "$@" make clean) >"$tmp/$name.clean" 2>&1 ||
		fail "$name: make clean failed: $(cat "$tmp/$name.clean")"
	[[ ! -e $tmp/$name/.eskv ]] || fail "$name: .eskv/ left after make clean"
}

# put_get NAME WANT_VERSION: creates the quickstart's key (expectedVersion 0)
# and reads it back.
put_get() {
	local name=$1 want=$2 url token body code
	url=http://127.0.0.1:${http[$name]}/v1/kv/tenant/acme/project/demo/checkpoint
	token=$(<"$tmp/$name/.eskv/dev-token")
	body=$(curl -sS -w '\n%{http_code}' -X PUT "$url" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
		-d '{"value":{"cursor":42},"expectedVersion":0,"semantics":{"purpose":"checkpoint","producer":"test-local-stack"}}') ||
		fail "$name: PUT $url failed" "$name"
	code=${body##*$'\n'}
	[[ $code == 200 && $body == *"\"version\":$want"* ]] || fail "$name: PUT answered $code: ${body%$'\n'*}" "$name"
	body=$(curl -sS -w '\n%{http_code}' "$url" -H "Authorization: Bearer $token") || fail "$name: GET $url failed" "$name"
	code=${body##*$'\n'}
	[[ $code == 200 && $body == *'"cursor":42'* ]] || fail "$name: GET answered $code: ${body%$'\n'*}" "$name"
	log "$name: PUT and GET ok"
}

# databases NAME present|absent: checks eskv_<stack-id> in Postgres and
# ClickHouse; the id is remembered in $tmp/NAME.db, as make clean deletes it.
databases() {
	local name=$1 want=$2 db pg ch
	[[ -s $tmp/$name/.eskv/stack-id ]] && printf 'eskv_%s\n' "$(<"$tmp/$name/.eskv/stack-id")" >"$tmp/$name.db"
	db=$(<"$tmp/$name.db")
	pg=$(psql "$admin_url" -XAt -c "SELECT count(*) FROM pg_database WHERE datname = '$db'")
	ch=$(clickhouse-client --host "${ch_addr%:*}" --port "${ch_addr##*:}" -q "SELECT count() FROM system.databases WHERE name = '$db'")
	case $want in
	present) [[ $pg == 1 && $ch == 1 ]] || fail "$name: database $db: Postgres $pg, ClickHouse $ch, want both" ;;
	absent) [[ $pg == 0 && $ch == 0 ]] || fail "$name: database $db: Postgres $pg, ClickHouse $ch, want neither" ;;
	esac
	log "$name: databases $db $want"
}

# audit_verify NAME: auditor verify, with the clone's .eskv/env, finds the
# clone's trail: at least one row checked and no discrepancy.
audit_verify() {
	local name=$1 out
	# shellcheck source=/dev/null # written by make run
	out=$(cd "$tmp/$name" && . .eskv/env && .eskv/bin/auditor verify -json 2>&1) ||
		fail "$name: auditor verify: $out" "$name"
	log "$name: auditor verify: $out"
}

clone a
clone b

log "1. make clean with nothing to clean, and with the servers unreachable"
clean b
mkdir -p "$tmp/b/.eskv" && echo 0badc0de >"$tmp/b/.eskv/stack-id"
closed=
take_port closed
clean b ESKV_POSTGRES_ADMIN_URL="postgres://postgres@127.0.0.1:$closed/postgres?sslmode=disable" ESKV_CLICKHOUSE_ADDR="127.0.0.1:$closed"
for want in 'could not drop Postgres database eskv_0badc0de' 'could not drop ClickHouse database eskv_0badc0de'; do
	grep -q "$want" "$tmp/b.clean" || fail "b: make clean did not say '$want': $(cat "$tmp/b.clean")"
done

log "2. a: make run, PUT/GET, auditor verify, Ctrl-C"
start a
ready a
put_get a 1
audit_verify a
if (cd "$tmp/a" && make clean) >"$tmp/a.clean" 2>&1; then
	fail "a: make clean succeeded while make run was running"
fi
grep -q 'make run is running in this clone' "$tmp/a.clean" || fail "a: make clean's refusal: $(cat "$tmp/a.clean")"
stop a
databases a present

log "3. a: make clean"
clean a
databases a absent

log "4. a: make run again, on empty state"
old_db=$(<"$tmp/a.db")
start a
ready a
put_get a 1
databases a present
[[ $(<"$tmp/a.db") != "$old_db" ]] || fail "a: make clean && make run kept the stack id ($old_db)"

log "5. b: make run beside a"
start b
ready b
put_get b 1
databases b present
[[ $(<"$tmp/a.db") != $(<"$tmp/b.db") ]] || fail "a and b share the database $(<"$tmp/a.db")"

log "6. stop both"
stop a || fail "a: Ctrl-C left processes running" a
stop b || fail "b: Ctrl-C left processes running" b

summary=() unclean=0
for sig in TERM INT; do
	log "7. a: make run, then SIG$sig to its process group, $stops times"
	clean_stops=0
	for ((k = 1; k <= stops; k++)); do
		start a
		ready a
		again=
		if ((k % 2 == 0)); then
			again=0.$((k % 10))
			[[ $again == 0.0 ]] && again=1
		fi
		if stop a "$sig" $again; then ((++clean_stops)); else ((++unclean)); fi
	done
	summary+=("SIG$sig stops $clean_stops/$stops clean")
	log "a: ${summary[-1]}"
done
((unclean == 0)) || fail "a: stops left processes running: ${summary[0]}, ${summary[1]}"

log "8. a: kill -9 of the writer; make run starts it again"
start a
ready a
writer=$(stack_pids a writer)
[[ $writer =~ ^[0-9]+$ ]] || fail "a: not one writer process: ${writer//$'\n'/ }" a
kill -KILL "$writer"
t0=$(micros)
readyz=http://127.0.0.1:${http[a]}/readyz
until new=$(stack_pids a writer) && [[ $new =~ ^[0-9]+$ && $new != "$writer" ]] &&
	curl -fsS -o /dev/null --max-time 2 "$readyz" 2>/dev/null; do
	kill -0 "${runs[a]}" 2>/dev/null || fail "a: make run exited after its writer was killed" a
	(($(micros) - t0 < 60000000)) || fail "a: the killed writer was not back (/readyz 200) within 60s" a
	sleep 0.1
done
back=$((($(micros) - t0) / 100000))
back=$((back / 10)).$((back % 10))
grep -q 'run-local: writer exited (status 137, SIGKILL); restarting in 1s (restart 1)' "$tmp/a.out" ||
	fail "a: make run did not say it restarts the writer" a
summary+=("killed writer back in ${back}s")
log "a: killed writer back in ${back}s"
stop a || fail "a: Ctrl-C after the writer's restart left processes running" a

log "9. clean both"
clean a
clean b
databases a absent
databases b absent
printf -v line '%s, ' "${summary[@]}"
log "${line%, }"
