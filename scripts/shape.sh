#!/usr/bin/env bash
# shape.sh (make shape): the code-shape figures of issue P1, for the product
# module and the tools/ module: repeated code (the workplace's `duplicates`
# command, when it is on PATH), the core's figures (writer/'s size, long
# parameter lists, the contract's exports, hand-written JSON scanners, the
# length of README and docs/performance.md), the client module's
# dependencies, and per module: non-test functions over 80 lines, packages
# without a doc comment, the share of non-test lines under cmd/, and
# whether `go mod tidy` would change its go.mod.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v go >/dev/null || export PATH=$PATH:/usr/local/go/bin

echo "== duplicates (whole tree)"
if command -v duplicates >/dev/null; then
	# Into a file first: `tee | head -1` would kill tee with SIGPIPE (exit 141
	# under pipefail) as soon as head has its line.
	duplicates --seconds 120 --most 200 >/tmp/eskv-shape-dups.$$
	head -1 /tmp/eskv-shape-dups.$$
	(cd tools && go run ./shape -duplicates -root .. </tmp/eskv-shape-dups.$$)
	rm -f /tmp/eskv-shape-dups.$$
else
	echo "duplicates: not on PATH (a workplace tool); skipped"
fi
echo "== core"
(cd tools && go run ./shape -core -root ..)
if [[ -f client/go.mod ]]; then
	echo "== go list -m all (client module: a user's build needs only these)"
	(cd client && go list -m all) | sed 's/^/  /'
	if (cd client && go list -m all) | grep -Eq 'pgx|clickhouse|labstack/echo|franz-go'; then
		echo "client module: requires a server dependency"
		exit 1
	fi
fi
for m in . contract client tools; do
	[[ -f $m/go.mod ]] || continue
	echo "== module $m"
	(cd tools && go run ./shape -root "../$m")
	if (cd "$m" && go mod tidy -diff >/dev/null 2>&1); then
		echo "go mod tidy -diff: clean"
	else
		echo "go mod tidy -diff: NOT clean"
	fi
done
