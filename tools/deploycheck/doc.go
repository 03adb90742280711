// Package deploycheck checks the Helm chart's renderings against what
// must stay equal to them elsewhere: the Secret keys the pods mount
// against the kubectl create secret commands of the docs, and the
// PrometheusRule against deploy/observability/alerts.yaml. It runs the
// helm binary make deploy-check installs (ESKV_HELM, else
// $(go env GOPATH)/bin/helm); without one its tests skip, and make
// deploy-check, which always has one, runs them. Its tests are all there
// is.
package deploycheck
