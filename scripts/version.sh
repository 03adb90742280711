#!/usr/bin/env bash
# version.sh: the version and revision make build and scripts/release.sh
# stamp into the binaries (internal/buildinfo), and the linker flags that
# stamp them. Prints, one a line:
#   VERSION   $VERSION, else git describe --tags --always --dirty
#   REVISION  the commit, suffixed -dirty when the work tree has changes
#   LDFLAGS   -X flags for go build -ldflags
# "unknown" for what git cannot tell (no checkout).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo unknown)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ $revision != unknown && -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
	revision+=-dirty
fi
pkg=github.com/eskv/eskv/internal/buildinfo
echo "$version"
echo "$revision"
echo "-X $pkg.version=$version -X $pkg.revision=$revision"
