//go:build darwin || freebsd

package linmem

const mapNoReserve = 0
