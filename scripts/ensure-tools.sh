#!/usr/bin/env bash
# ensure-tools.sh: installs the pinned lint tools into $(go env GOPATH)/bin
# if they are missing or at another version. Idempotent.
set -euo pipefail

# staticcheck 2026.2.2. 2026.1 (v0.7.0) cannot load Go 1.26's standard
# library; the 2025.x tags are not served by the module proxy.
STATICCHECK_VERSION=v0.8.2

command -v go >/dev/null || export PATH=$PATH:/usr/local/go/bin
bin=$(go env GOPATH)/bin

if ! "$bin/staticcheck" -version 2>/dev/null | grep -qF "${STATICCHECK_VERSION#v})"; then
	echo "ensure-tools: installing staticcheck $STATICCHECK_VERSION into $bin" >&2
	GOBIN=$bin go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
