// Package observe is what an operator watches a running packrun with:
// Prometheus metrics (GET /metrics, on a registry of its own), liveness
// and readiness (GET /healthz, GET /readyz), and a log line per request
// and per task. An Observer implements host.Observer, so the dispatcher
// and the store's writer feed it through that interface; nothing else in
// packrun imports Prometheus.
package observe
