//go:build !unix

package loadtest

// RaiseFileLimit does nothing where there is no RLIMIT_NOFILE; the limit
// it returns, 0, means unknown.
func RaiseFileLimit() (uint64, error) { return 0, nil }
