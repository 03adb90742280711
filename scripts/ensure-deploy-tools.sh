#!/usr/bin/env bash
# ensure-deploy-tools.sh: installs the pinned deploy checkers (helm,
# kubeconform, kube-score) into $(go env GOPATH)/bin with `go install` from
# the Go module proxy if they are missing or at another version, so
# `make deploy-check` needs nothing but Go. Idempotent; the first run
# compiles helm (a few minutes on two cores).
set -euo pipefail

HELM_VERSION=v3.21.4
KUBECONFORM_VERSION=v0.7.0
KUBE_SCORE_VERSION=v1.20.0

command -v go >/dev/null || export PATH=$PATH:/usr/local/go/bin
bin=$(go env GOPATH)/bin

# install <binary> <package@version> <version string the binary prints> [ldflags]
install() {
	local name=$1 pkg=$2 want=$3 ldflags=${4:-} flag=version
	[[ $name == kubeconform ]] && flag=-v
	if "$bin/$name" $flag 2>/dev/null | grep -qF -- "$want"; then
		return
	fi
	echo "ensure-deploy-tools: installing $pkg into $bin" >&2
	GOBIN=$bin go install -ldflags "$ldflags" "$pkg"
}

# The three print their version only when it is stamped at link time (as
# their release builds do); without it the check would never match and
# every run would reinstall.
install helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "$HELM_VERSION" \
	"-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
install kubeconform "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION" "$KUBECONFORM_VERSION" \
	"-X main.version=$KUBECONFORM_VERSION"
install kube-score "github.com/zegl/kube-score/cmd/kube-score@$KUBE_SCORE_VERSION" "${KUBE_SCORE_VERSION#v}" \
	"-X main.version=${KUBE_SCORE_VERSION#v}"
