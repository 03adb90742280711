#!/usr/bin/env bash
# shape.sh (make shape): the code-shape figures of issue P1, for each module
# (the product, contract/, client/, tools/): repeated code (the workplace's
# `duplicates` command, when it is on PATH), non-test functions over 80
# lines, packages without a doc comment, the share of non-test lines under
# cmd/, and whether `go mod tidy` would change a go.mod.
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
for m in . contract client tools; do
	echo "== module $m"
	(cd tools && go run ./shape -root "../$m")
	if (cd "$m" && go mod tidy -diff >/dev/null 2>&1); then
		echo "go mod tidy -diff: clean"
	else
		echo "go mod tidy -diff: NOT clean"
	fi
done
