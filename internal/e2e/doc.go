// Package e2e holds the end-to-end tests of `wasmassign serve`: the real
// daemon binary as a subprocess, and real clients (kgo, kcat/librdkafka,
// kafkajs) talking to it. It has no code outside its tests, and nothing may
// import it.
package e2e
