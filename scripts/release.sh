#!/usr/bin/env bash
# release.sh (make release): the release artifacts of this checkout, in
# dist/<version>/ (docs/release.md):
#   - eskv-<cmd>_<version>_<os>_<arch>.tar.gz of writer, projector,
#     auditor, kvctl and kvstore for linux and darwin, amd64 and arm64:
#     the static binary (CGO_ENABLED=0, -trimpath, version and revision
#     stamped), LICENSE, README.md and CHANGELOG.md;
#   - eskv-<cmd>_<version>.oci.tar: an OCI image archive of each command
#     for linux/amd64 and linux/arm64 (tools/release image: scratch, the
#     CA certificates, /etc/passwd, user 65532, OCI labels), built without
#     a daemon or a registry, then read back and checked (release verify);
#   - eskv-<cmd>_<version>.cdx.json: a CycloneDX SBOM of each command
#     (cyclonedx-gomod, pinned, through the Go module proxy);
#   - SHA256SUMS of all of them, checked with sha256sum -c.
# The version is $VERSION, else git describe --tags --always --dirty. A
# release version (v1.2.3, v1.2.0-rc.1 on a clean checkout) must be the
# Helm chart's version, appVersion and default image tag: the script
# refuses otherwise; `scripts/release.sh set-version v1.2.3` sets them.
# Any other version (a commit between tags, a dirty tree) is a snapshot:
# built the same, the chart not checked.
# RELEASE_FAST=1 builds linux/amd64 alone and runs the same checks (CI).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v go >/dev/null || export PATH=$PATH:/usr/local/go/bin

CYCLONEDX=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
CMDS=(writer projector auditor kvctl kvstore)
CHART=deploy/helm/eskv
SOURCE=${RELEASE_SOURCE:-https://github.com/eskv/eskv}

reltool() { (cd tools && go run ./release "$@"); }

if [[ ${1:-} == set-version ]]; then
	[[ $# == 2 ]] || { echo "usage: scripts/release.sh set-version v1.2.3" >&2; exit 2; }
	reltool chart -dir "../$CHART" -version "$2" -set
	exit
fi
if [[ ${RELEASE_FAST:-} == 1 ]]; then
	PLATFORMS=(linux/amd64)
else
	PLATFORMS=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
fi
pkgs=()
for c in "${CMDS[@]}"; do pkgs+=("./cmd/$c"); done
# sbomtool runs cyclonedx-gomod, built as the binaries are (-trimpath, no
# cgo), so that it shares their compiled standard library.
sbomtool() { CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go run -trimpath "$CYCLONEDX" "$@"; }

# warm: compile what a release compiles, into the build cache, and make
# nothing (CI runs it at the lowest priority beside make test).
if [[ ${1:-} == warm ]]; then
	for p in "${PLATFORMS[@]}"; do
		CGO_ENABLED=0 GOOS=${p%/*} GOARCH=${p#*/} go build -trimpath "${pkgs[@]}"
	done
	(cd tools && go build -o /dev/null ./release)
	sbomtool version >/dev/null
	exit
fi
[[ $# == 0 ]] || { echo "usage: scripts/release.sh [set-version VERSION | warm]" >&2; exit 2; }

{ read -r VERSION; read -r REVISION; read -r STAMP; } < <(bash scripts/version.sh)
if [[ $VERSION =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-(alpha|beta|rc)\.[0-9]+)?$ && $REVISION != *-dirty ]]; then
	reltool chart -dir "../$CHART" -version "$VERSION"
else
	echo "release: $VERSION is a snapshot, not a release version (v1.2.3 on a clean checkout): the chart is not checked" >&2
fi
[[ $VERSION != */* && $VERSION != *" "* ]] || { echo "release: version $VERSION: no / or spaces" >&2; exit 2; }

COMMIT=$(git rev-parse HEAD)
EPOCH=$(git log -1 --format=%ct "$COMMIT")
OUT=dist/$VERSION
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
rm -rf "$OUT"
mkdir -p "$OUT"

# Binaries and archives, one go build per platform.
for p in "${PLATFORMS[@]}"; do
	os=${p%/*} arch=${p#*/}
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-s -w $STAMP" -o "$BUILD/$os-$arch/" "${pkgs[@]}"
	for c in "${CMDS[@]}"; do
		name=eskv-${c}_${VERSION}_${os}_${arch}
		mkdir -p "$BUILD/$name"
		cp "$BUILD/$os-$arch/$c" LICENSE README.md CHANGELOG.md "$BUILD/$name/"
		tar -C "$BUILD" --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner -cf - "$name" | gzip -9n > "$OUT/$name.tar.gz"
	done
done

# Images: linux binaries of every platform built, then read back.
arches=()
for p in "${PLATFORMS[@]}"; do [[ $p == linux/* ]] && arches+=("${p#linux/}"); done
(cd tools && go build -o "$BUILD/release" ./release)
for c in "${CMDS[@]}"; do
	bins=()
	for a in "${arches[@]}"; do bins+=(-bin "$a=$BUILD/linux-$a/$c"); done
	"$BUILD/release" image -name "$c" -version "$VERSION" -revision "$REVISION" -source "$SOURCE" -created "$EPOCH" \
		"${bins[@]}" -out "$OUT/eskv-${c}_$VERSION.oci.tar"
	"$BUILD/release" verify -name "$c" -version "$VERSION" -revision "$REVISION" -arch "$(IFS=,; echo "${arches[*]}")" "$OUT/eskv-${c}_$VERSION.oci.tar"
done

# SBOMs, from a clone of the commit (cyclonedx-gomod reads the version
# from git, and cannot read a linked worktree's).
src=$BUILD/src
git clone --quiet --no-checkout . "$src"
git -C "$src" checkout --quiet --detach "$COMMIT"
for c in "${CMDS[@]}"; do
	(cd "$src" && sbomtool app -json -licenses=false -noserial \
		-main "cmd/$c" -output "$OLDPWD/$OUT/eskv-${c}_$VERSION.cdx.json" . 2>"$BUILD/sbom.log") ||
		{ cat "$BUILD/sbom.log" >&2; exit 1; }
	grep -q '"bomFormat": "CycloneDX"' "$OUT/eskv-${c}_$VERSION.cdx.json"
done

(cd "$OUT" && sha256sum -- *.tar.gz *.oci.tar *.cdx.json > SHA256SUMS && sha256sum --quiet -c SHA256SUMS)
echo "release: $OUT ($VERSION, revision $REVISION): $(ls "$OUT" | wc -l) files, each checked against SHA256SUMS"
while read -r sum name; do
	printf '  %-48s %10s  sha256:%s\n' "$name" "$(stat -c %s "$OUT/$name")" "$sum"
done < "$OUT/SHA256SUMS"
