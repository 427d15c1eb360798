// Package promtext holds a test of the daemon's Prometheus exposition
// against Prometheus's own Go code: prometheus/common's text parser reads
// it, and client_golang's standard collectors give the go_* and process_*
// families it must match. They are test-only dependencies of the tools
// module, kept out of the daemon's.
package promtext
