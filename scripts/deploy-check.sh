#!/usr/bin/env bash
# deploy-check.sh (make deploy-check): the Helm chart and deploy/k8s as a
# cluster would take them, checked offline.
#   - helm lint on the chart;
#   - helm template (default values and each deploy/helm/eskv/ci/*.yaml)
#     and deploy/k8s (kubectl kustomize) validated by kubeconform -strict
#     against schemas generated from the Kubernetes OpenAPI document that
#     the k8s.io/kubernetes module carries (fetched through the Go module
#     proxy: kubeconform's default schema location, GitHub, is not
#     reachable here); a kind without a schema is an error, not skipped;
#   - kube-score on the same: any CRITICAL finding fails;
#   - the chart refuses an unpinned image tag and SASL without a secret;
#   - deploy/k8s/eskv.yaml is the chart's rendering (scripts/render-k8s.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v go >/dev/null || export PATH=$PATH:/usr/local/go/bin

# The Kubernetes version whose API the manifests are checked against.
K8S_VERSION=v1.34.2

bash scripts/ensure-deploy-tools.sh
bin=$(go env GOPATH)/bin
chart=deploy/helm/eskv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

schemas=${ESKV_K8S_SCHEMAS:-${XDG_CACHE_HOME:-$HOME/.cache}/eskv/k8s-schemas/$K8S_VERSION}
if [[ ! -s $schemas/statefulset-apps-v1.json ]]; then
	echo "deploy-check: generating kubeconform schemas for Kubernetes $K8S_VERSION into $schemas" >&2
	moddir=$(cd tools && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[[ -n $moddir ]] || { echo "deploy-check: could not download k8s.io/kubernetes@$K8S_VERSION" >&2; exit 1; }
	(cd tools && go run ./k8sschema -in "$moddir/api/openapi-spec/swagger.json" -out "$schemas")
fi

"$bin/helm" lint --strict "$chart"
"$bin/helm" template eskv "$chart" >"$work/default.yaml"
for f in "$chart"/ci/*.yaml; do
	"$bin/helm" template eskv "$chart" -f "$f" >"$work/ci-$(basename "$f")"
done
kubectl kustomize deploy/k8s >"$work/k8s.yaml"

status=0
# Values the chart must refuse: an unpinned image, SASL without a secret.
for bad in image.tag=latest image.tag= kafka.sasl.mechanism=plain; do
	if "$bin/helm" template eskv "$chart" --set "$bad" >/dev/null 2>&1; then
		echo "deploy-check: helm template accepted --set $bad" >&2
		status=1
	fi
done

for f in "$work"/*.yaml; do
	echo "== $(basename "$f")"
	"$bin/kubeconform" -strict -summary -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$f" || status=1
	# kube-score exits 1 on CRITICAL findings (and not on warnings).
	"$bin/kube-score" score --output-format ci "$f" >"$f.score" || status=1
	grep -E '^\[CRITICAL\]' "$f.score" || true
	echo "kube-score: $(grep -c '^\[CRITICAL\]' "$f.score" || true) critical, $(grep -c '^\[WARNING\]' "$f.score" || true) warnings"
done

if ! bash scripts/render-k8s.sh --check; then
	status=1
fi
exit $status
