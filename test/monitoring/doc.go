// Package monitoring holds the tests of what an on-call engineer is shown:
// the chart's alert rules, evaluated by Prometheus's rule engine against
// synthetic series, and the contract that every metric an alert or the
// dashboard queries is one the binaries register.
package monitoring
