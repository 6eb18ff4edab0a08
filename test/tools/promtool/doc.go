// Package promtool holds promtool (Prometheus' rule checker, a Go tool of
// this module, kept apart from test/tools so that Prometheus' dependencies
// do not move the modules the Kubernetes test binaries are built with) and
// the tests of the hub chart's monitoring files: the PrometheusRule's rules
// under `promtool check rules` and `promtool test rules`, and the Grafana
// dashboard's JSON and queries. Both may use only metrics a real hub
// exports: testdata/metric-names.txt lists them, and test/e2e checks the
// list against a running hub's /metrics.
package promtool
