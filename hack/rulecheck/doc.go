// Package rulecheck checks the PrometheusRule Torus ships
// (operator/monitoring) with Prometheus's own rule parser: the
// rule file format, every PromQL expression and every annotation template,
// and that the expressions name only metrics the operator exports. It is
// its own module so that the operator's does not carry Prometheus.
package rulecheck
