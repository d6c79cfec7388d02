package wasmruntime

import (
	"errors"
	"fmt"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Sentinel errors that every *Error wraps as its Kind, so callers branch with
// errors.Is without parsing messages.
var (
	// ErrTimeout: the call, or the instantiation before it, ran past the
	// deadline and was stopped.
	ErrTimeout = errors.New("deadline exceeded")
	// ErrTrap: the guest trapped (unreachable, out-of-bounds access, a Go
	// panic that escaped, proc_exit, AssemblyScript abort).
	ErrTrap = errors.New("trap")
	// ErrOutOfMemory: the guest reached the memory limit (it trapped in a
	// call in which the host refused it a memory.grow, or with memory at
	// the limit), or could not allocate the request buffer.
	ErrOutOfMemory = errors.New("out of memory")
	// ErrInvalidOutput: the response broke a rule of sdk/ABI.md; Error.Rule
	// says which.
	ErrInvalidOutput = errors.New("invalid output")
	// ErrABIMismatch: the module does not speak this host's ABI (version,
	// exports, imports, or a malformed description).
	ErrABIMismatch = errors.New("ABI mismatch")
	// ErrNotWasm: the bytes are not a WebAssembly module wazero can compile.
	ErrNotWasm = errors.New("not a wasm module")
	// ErrModuleTooLarge: the module is larger than Limits.MaxModuleBytes.
	ErrModuleTooLarge = errors.New("module too large")
	// ErrAssignorFailed: the guest answered with an error response.
	ErrAssignorFailed = errors.New("assignor reported an error")
	// ErrUnknownAssignor: no loaded plugin provides the requested assignor.
	ErrUnknownAssignor = errors.New("unknown assignor")
	// ErrClosed: the plugin or host was closed.
	ErrClosed = errors.New("closed")
	// ErrOverloaded: the call waited for an instance longer than the
	// host's queue timeout (Config.WithQueueTimeout) and never ran. It is
	// the host's load, not the plugin's fault: callers should try the same
	// assignor again rather than count it as the plugin failing.
	ErrOverloaded = errors.New("overloaded")
)

// Rule names the validation rule an invalid response broke.
type Rule = abi.Rule

// The rules of sdk/ABI.md, section 5, as package abi names them.
const (
	RuleMalformed          = abi.RuleMalformed
	RuleOutputSize         = abi.RuleOutputSize
	RuleMemberIndex        = abi.RuleMemberIndex
	RuleDuplicateMember    = abi.RuleDuplicateMember
	RuleTopicIndex         = abi.RuleTopicIndex
	RuleNonexistentTopic   = abi.RuleNonexistentTopic
	RulePartitionRange     = abi.RulePartitionRange
	RuleDuplicatePartition = abi.RuleDuplicatePartition
	RuleUnsubscribed       = abi.RuleUnsubscribed
	RuleUnassigned         = abi.RuleUnassigned
)

// Error is the error type of this package. Its message reads like
// `plugin "rack.wasm" assignor "rack-sticky": deadline exceeded: 2s`.
type Error struct {
	// Plugin is the plugin's name: its file name, or builtin:NAME.
	Plugin string
	// Assignor is the assignor being called, when there was one.
	Assignor string
	// Kind is one of the sentinel errors above.
	Kind error
	// Rule is set when Kind is ErrInvalidOutput.
	Rule Rule
	// Detail says what happened, in words for an operator.
	Detail string
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("plugin %q", e.Plugin)
	if e.Assignor != "" {
		msg += fmt.Sprintf(" assignor %q", e.Assignor)
	}
	msg += ": " + e.Kind.Error()
	if e.Rule != "" {
		msg += ": " + string(e.Rule)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap lets errors.Is match both the Kind and the underlying error.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Reason is a short, stable label for Kind, for metrics: "timeout", "trap",
// "oom", "invalid", "abi", "not_wasm", "too_large", "assignor_error",
// "unknown_assignor", "closed" or "overloaded".
func (e *Error) Reason() string {
	switch e.Kind {
	case ErrTimeout:
		return "timeout"
	case ErrTrap:
		return "trap"
	case ErrOutOfMemory:
		return "oom"
	case ErrInvalidOutput:
		return "invalid"
	case ErrABIMismatch:
		return "abi"
	case ErrNotWasm:
		return "not_wasm"
	case ErrModuleTooLarge:
		return "too_large"
	case ErrAssignorFailed:
		return "assignor_error"
	case ErrUnknownAssignor:
		return "unknown_assignor"
	case ErrClosed:
		return "closed"
	case ErrOverloaded:
		return "overloaded"
	}
	return "unknown"
}
