// Package obscheck checks the observability pack in deploy/observability
// against the code: the Prometheus alert rules parse and validate as
// promtool check rules does (its rulefmt library, without a binary to
// install), and every metric the rules and the Grafana dashboard query is
// one the components register. Its tests are all there is.
package obscheck
