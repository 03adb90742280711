#!/usr/bin/env bash
# test-docs.sh (make test-docs, also run by make test-scripts): the README
# and the guide under docs/ say only what runs.
#
#   1. Links: every relative link of README.md, CONTRIBUTING.md and
#      docs/**/*.md names a file or folder of the repository, and its
#      #anchor a heading (or an <a id>) of the page it names.
#   2. Commands: a clone of this repository (its working tree's changes
#      included) starts its stack the way `make run` does
#      (scripts/run-local.sh, on free ports from ESKV_TEST_PORT_BASE
#      [18580]); then every page's blocks fenced as ```sh run, in the
#      page's order, in one `bash -e -o pipefail` per page, from the
#      clone's root: README.md first, then docs/ and CONTRIBUTING.md. A
#      command that exits non-zero fails the test, naming the page and the
#      line of its block. Blocks fenced ```text (or another language) are
#      not run: `make run` itself, commands that need a real Kafka
#      cluster, Kubernetes or a terminal, and output.
#
# The pages run in a shell that has loaded the stack's settings
# (`. .eskv/env`, as a reader's shell after the README's tour; none of this
# shell's ESKV_* or KVCTL_* settings) with the clone's bin/ first on PATH,
# where the README's tour builds kvctl (built there before the first page,
# so that one page can run alone).
#
# Environment:
#   ESKV_TEST_DOCS_PAGES  pages to run (paths from the repository root,
#                         space-separated) [all]; links are always checked
#   ESKV_TEST_DOCS_STACK  a clone whose make run is up: run the pages there
#                         instead of starting a stack (a quicker loop while
#                         writing docs); nothing is stopped or cleaned
#   ESKV_TEST_READY_WAIT  seconds to wait for the stack [300]
#   ESKV_TEST_PAGE_WAIT   seconds one page may take [300]
#   ESKV_TEST_DOCS_VERBOSE  1: print what every page's commands printed
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
command -v go >/dev/null || export PATH=$PATH:/usr/local/go/bin
ready_wait=${ESKV_TEST_READY_WAIT:-300}
page_wait=${ESKV_TEST_PAGE_WAIT:-300}
next_port=${ESKV_TEST_PORT_BASE:-18580}

log() { printf 'test-docs: %s\n' "$*" >&2; }

# pages: the documents, README.md first.
pages() {
	printf '%s\n' README.md
	find docs -name '*.md' | LC_ALL=C sort
	printf '%s\n' CONTRIBUTING.md
}

# anchors FILE: the #anchors of a Markdown file, one a line: its headings
# outside code blocks as GitHub spells them (lower case, punctuation
# dropped, spaces as hyphens, -1, -2 … on repeats) and its <a id>/<a name>.
anchors() {
	gawk '
	/^```/ { fence = !fence; next }
	fence { next }
	/^#+ / {
		s = $0; sub(/^#+ +/, "", s); s = tolower(s)
		gsub(/[^[:alnum:] _-]/, "", s); gsub(/ /, "-", s)
		n = seen[s]++; print (n ? s "-" n : s)
	}
	{ while (match($0, /<a (id|name)="[^"]+"/)) { a = substr($0, RSTART, RLENGTH); sub(/^<a (id|name)="/, "", a); sub(/"$/, "", a); print a; $0 = substr($0, RSTART + RLENGTH) } }
	' "$1"
}

# links FILE: LINE<TAB>TARGET for each relative link outside code blocks.
links() {
	gawk '
	/^```/ { fence = !fence; next }
	fence { next }
	{
		line = $0; gsub(/`[^`]*`/, "", line)
		while (match(line, /\]\([^) ]+\)/)) {
			t = substr(line, RSTART + 2, RLENGTH - 3); line = substr(line, RSTART + RLENGTH)
			if (t !~ /^[a-z]+:/) print FNR "\t" t
		}
	}' "$1"
}

check_links() {
	local page dir line target path anchor file bad=0 n=0
	while IFS= read -r page; do
		dir=$(dirname "$page")
		while IFS=$'\t' read -r line target; do
			((++n))
			path=${target%%#*} anchor=
			[[ $target == *'#'* ]] && anchor=${target#*#}
			if [[ -z $path ]]; then file=$page; else file=$dir/$path; fi
			if [[ ! -e $file ]]; then
				log "$page:$line: link to $target: no such file ($file)"
				bad=1
				continue
			fi
			if [[ -n $anchor && $file == *.md ]] && ! anchors "$file" | grep -qxF -- "$anchor"; then
				log "$page:$line: link to $target: no heading #$anchor in $file"
				bad=1
			fi
		done < <(links "$page")
	done < <(pages)
	((bad == 0)) || return 1
	log "links: $n relative links resolve"
}

# script PAGE: the page's sh blocks (also those indented in a list item,
# their indentation removed) as one script; _at names the block's first
# line for the failure message.
script() {
	gawk -v page="$1" '
	/^ *```sh[[:space:]]*$/ { inblock = 1; indent = index($0, "`") - 1; printf "_at=%s:%d\n", page, FNR + 1; next }
	inblock && /^ *```/ { inblock = 0; next }
	inblock { line = $0; for (i = 0; i < indent && substr(line, 1, 1) == " "; i++) line = substr(line, 2); print line }
	' "$1"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
take_port() {
	while ! port_free "$next_port"; do ((next_port++)); done
	printf -v "$1" '%s' "$next_port"
	((++next_port))
}

tmp= run_pid= stack=
cleanup() {
	local rc=$? p exe i
	set +e
	trap - EXIT INT TERM
	if [[ -n $run_pid ]]; then
		kill -TERM -- "-$run_pid" 2>/dev/null
		for ((i = 0; i < 900; i++)); do
			kill -0 -- "-$run_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL -- "-$run_pid" 2>/dev/null
	fi
	if [[ -n $tmp ]]; then
		for p in /proc/[0-9]*; do
			exe=$(readlink "$p/exe" 2>/dev/null) || continue
			[[ $exe == "$tmp"/* ]] && kill -KILL "${p#/proc/}" 2>/dev/null
		done
		[[ -d $stack/.eskv ]] && (cd "$stack" && bash scripts/clean-local.sh >/dev/null 2>&1)
		rm -rf "$tmp"
	fi
	if ((rc == 0)); then log "PASS (${SECONDS}s)"; else log "FAILED (exit $rc, ${SECONDS}s)"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_stack: a clone in $tmp/eskv, its make run in a session of its own
# (stopped by SIGTERM to its process group), ready when it prints its banner.
start_stack() {
	local f http broker projector auditor t0=$SECONDS
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/eskv-docs-test.XXXXXX")
	stack=$tmp/eskv
	git clone -q "$root" "$stack"
	git ls-files -m -o --exclude-standard | while IFS= read -r f; do
		if [[ -e $f ]]; then
			mkdir -p "$(dirname "$stack/$f")" && cp -p "$f" "$stack/$f"
		else
			rm -f "$stack/$f"
		fi
	done
	take_port http
	take_port broker
	take_port projector
	take_port auditor
	(
		cd "$stack"
		for v in $(compgen -e); do
			case $v in
			ESKV_POSTGRES_ADMIN_URL | ESKV_CLICKHOUSE_ADDR | ESKV_CLICKHOUSE_PORT | ESKV_CLICKHOUSE_USER | ESKV_CLICKHOUSE_PASSWORD) ;;
			ESKV_* | KVCTL_*) unset "$v" ;;
			esac
		done
		export ESKV_HTTP_ADDR=127.0.0.1:$http ESKV_BROKER_PORT=$broker
		export ESKV_PROJECTOR_ADDR=127.0.0.1:$projector ESKV_AUDITOR_ADDR=127.0.0.1:$auditor
		exec setsid bash scripts/run-local.sh
	) >"$tmp/run.out" 2>&1 </dev/null &
	run_pid=$!
	log "stack: scripts/run-local.sh in $stack (pid $run_pid, http $http)"
	until grep -q '^eskv is running at' "$tmp/run.out" 2>/dev/null; do
		if ! kill -0 "$run_pid" 2>/dev/null || ((SECONDS - t0 >= ready_wait)); then
			log "stack did not start within ${ready_wait}s:"
			tail -n 40 "$tmp/run.out" >&2
			return 1
		fi
		sleep 0.5
	done
	log "stack: ready in $((SECONDS - t0))s"
}

# run_page PAGE: its sh blocks from the stack's root; fails on the first
# command that fails.
run_page() {
	local page=$1 out t0=$SECONDS
	[[ -n $(script "$page") ]] || return 0
	out=$(mktemp)
	if ! (
		cd "$stack"
		for v in $(compgen -e); do
			case $v in ESKV_* | KVCTL_*) unset "$v" ;; esac
		done
		# shellcheck source=/dev/null # written by make run
		. .eskv/env
		export PATH=$stack/bin:$PATH
		{
			echo "trap 'echo \"test-docs: \$_at (the block starting there): \\\"\$BASH_COMMAND\\\" exited \$?\" >&2' ERR"
			script "$root/$page" | sed "s#^_at=$root/#_at=#"
		} >"$out.sh"
		timeout "$page_wait" bash -e -o pipefail "$out.sh" </dev/null
	) >"$out" 2>&1; then
		tail -n 40 "$out" >&2
		log "FAIL: $page"
		rm -f "$out" "$out.sh"
		return 1
	fi
	[[ ${ESKV_TEST_DOCS_VERBOSE:-} == 1 ]] && sed "s#^#$page: #" "$out" >&2
	rm -f "$out" "$out.sh"
	log "$page: $(script "$page" | grep -c '^_at=') blocks ran ($((SECONDS - t0))s)"
}

check_links
if [[ -n ${ESKV_TEST_DOCS_STACK:-} ]]; then
	stack=$(cd "$ESKV_TEST_DOCS_STACK" && pwd)
else
	start_stack
fi
(cd "$stack" && go build -o bin/ ./cmd/kvctl)
for page in ${ESKV_TEST_DOCS_PAGES:-$(pages)}; do
	run_page "$page"
done
