# local-state.sh: sourced by run-local.sh (make run) and clean-local.sh
# (make clean), from the repository root. What names the local stack's
# state, which lives under .eskv/:
#
#   .eskv/stack-id  a random id, generated once; the stack's Postgres and
#                   ClickHouse databases are both named eskv_<id>, so every
#                   clone has its own and make clean can drop them
#   .eskv/run.pid   the pid of the running make run, removed when it stops
#   .eskv/env       the ESKV_* settings of the last make run, for `. .eskv/env`
#
# shellcheck shell=bash

state=.eskv

# stack_db create|read: prints eskv_<stack-id>. When .eskv/stack-id is
# missing, create generates the id and read fails.
stack_db() {
	local id=
	[[ -s $state/stack-id ]] && id=$(<"$state/stack-id")
	if [[ -z $id && $1 == create ]]; then
		mkdir -p "$state"
		id=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
		printf '%s\n' "$id" >"$state/stack-id"
	fi
	[[ -n $id ]] || return 1
	[[ $id =~ ^[a-z0-9_]{1,40}$ ]] || {
		printf 'local-state: %s/stack-id holds %q, not [a-z0-9_]{1,40}\n' "$state" "$id" >&2
		return 1
	}
	printf 'eskv_%s\n' "$id"
}

# running_stack: prints the pid of a make run (scripts/run-local.sh) of this
# clone that is still running; fails when there is none.
running_stack() {
	local pid
	[[ -s $state/run.pid ]] || return 1
	pid=$(<"$state/run.pid")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'run-local\.sh' || return 1
	[[ $(readlink "/proc/$pid/cwd" 2>/dev/null) == "$PWD" ]] || return 1
	printf '%s\n' "$pid"
}
