#!/usr/bin/env bash
# deploy-check.sh (make deploy-check): the Helm chart and deploy/k8s as a
# cluster would take them, checked offline.
#   - helm lint on the chart, with its default values and with each
#     deploy/helm/eskv/ci/*.yaml (ci/extended-values.yaml turns every
#     extension point on: Ingress with TLS, ServiceMonitor, PrometheusRule,
#     extraEnv, extra volumes; ci/writer-tls-values.yaml, the writers
#     over HTTPS);
#   - helm template (the same values) and deploy/k8s (kubectl kustomize)
#     validated by kubeconform -strict against schemas generated from the
#     Kubernetes OpenAPI document that the k8s.io/kubernetes module
#     carries, and, for ServiceMonitor and PrometheusRule, from the
#     Prometheus Operator's CRDs in its Go module (both fetched through the
#     Go module proxy: kubeconform's default schema location, GitHub, is
#     not reachable here); a kind without a schema is an error, not skipped;
#   - kube-score on the same: any finding (critical or warning) fails;
#   - the chart refuses an unpinned image tag, SASL or writer TLS without
#     a secret and any value its values.schema.json does not know;
#   - tools/deploycheck: the docs' kubectl create secret commands create
#     every Secret key a pod mounts, and the PrometheusRule holds
#     deploy/observability/alerts.yaml's rules;
#   - deploy/k8s/eskv.yaml is the chart's rendering and the chart's copy of
#     the alert rules is deploy/observability/alerts.yaml
#     (scripts/render-k8s.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v go >/dev/null || export PATH=$PATH:/usr/local/go/bin

# The Kubernetes version whose API the manifests are checked against, and
# the Prometheus Operator whose CRDs (monitoring.coreos.com/v1) the
# ServiceMonitor and PrometheusRule are checked against.
K8S_VERSION=v1.34.2
PROMETHEUS_OPERATOR_VERSION=v0.85.0

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
crdSchemas=${ESKV_CRD_SCHEMAS:-${XDG_CACHE_HOME:-$HOME/.cache}/eskv/crd-schemas/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION}
if [[ ! -s $crdSchemas/servicemonitor-monitoring-v1.json ]]; then
	echo "deploy-check: generating kubeconform schemas for the Prometheus Operator $PROMETHEUS_OPERATOR_VERSION CRDs into $crdSchemas" >&2
	moddir=$(cd tools && go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[[ -n $moddir ]] || { echo "deploy-check: could not download the Prometheus Operator $PROMETHEUS_OPERATOR_VERSION" >&2; exit 1; }
	crds=$moddir/example/prometheus-operator-crd
	(cd tools && go run ./k8sschema -crd "$crds/monitoring.coreos.com_servicemonitors.yaml,$crds/monitoring.coreos.com_prometheusrules.yaml" -out "$crdSchemas")
fi

"$bin/helm" lint --strict "$chart"
"$bin/helm" template eskv "$chart" >"$work/default.yaml"
for f in "$chart"/ci/*.yaml; do
	"$bin/helm" lint --strict "$chart" -f "$f"
	"$bin/helm" template eskv "$chart" -f "$f" >"$work/ci-$(basename "$f")"
done
kubectl kustomize deploy/k8s >"$work/k8s.yaml"

status=0
# Values the chart must refuse: an unpinned image, SASL without a secret,
# writer TLS without a secret, keys values.schema.json does not know (at
# the top, in a component, in an extension point), an extraEnv entry that
# is not an EnvVar, and one that sets a variable the chart sets itself.
for bad in image.tag=latest image.tag= kafka.sasl.mechanism=plain notAValue=1 writer.replicaz=2 \
	ingress.tlss=x metrics.serviceMonitor.intervall=1m 'extraEnv[0].nam=X' \
	'writer.extraEnv[0].name=ESKV_TOKENS_POLL,writer.extraEnv[0].value=1s' \
	writer.tls.enabled=true writer.tls.certKeyy=x \
	'writer.tls.enabled=true,writer.tls.secretName=t,writer.extraEnv[0].name=ESKV_TLS_CERT_FILE'; do
	if "$bin/helm" template eskv "$chart" --set "$bad" >/dev/null 2>&1; then
		echo "deploy-check: helm template accepted --set $bad" >&2
		status=1
	fi
done
if "$bin/helm" lint --strict "$chart" --set notAValue=1 >/dev/null 2>&1; then
	echo "deploy-check: helm lint accepted --set notAValue=1" >&2
	status=1
fi

for f in "$work"/*.yaml; do
	echo "== $(basename "$f")"
	"$bin/kubeconform" -strict -summary -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
		-schema-location "$crdSchemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$f" || status=1
	# kube-score exits 1 on CRITICAL findings (and not on warnings); a
	# warning fails the check too.
	"$bin/kube-score" score --output-format ci "$f" >"$f.score" || status=1
	grep -E '^\[(CRITICAL|WARNING)\]' "$f.score" || true
	echo "kube-score: $(grep -c '^\[CRITICAL\]' "$f.score" || true) critical, $(grep -c '^\[WARNING\]' "$f.score" || true) warnings"
	if grep -q '^\[WARNING\]' "$f.score"; then
		status=1
	fi
done

ESKV_HELM=$bin/helm bash -c 'cd tools && go test -count=1 ./deploycheck/' || status=1

if ! bash scripts/render-k8s.sh --check; then
	status=1
fi
exit $status
