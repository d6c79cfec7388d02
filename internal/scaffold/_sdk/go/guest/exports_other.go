//go:build !wasip1

package guest

// hostLog writes to standard error when the package runs natively, as in its
// own tests; the wasm build sends lines to the host instead.
func hostLog(level Level, msg string) {
	println(msg)
}
