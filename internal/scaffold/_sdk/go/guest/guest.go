// Package guest turns a Go function into a wasmassign plugin. A plugin author
// writes one function from request to response, registers it from an init
// function of a main package, and builds with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o x.wasm .
//
// The package owns everything the ABI (sdk/ABI.md) asks of a module: the
// exports, the request and response buffers and their lifetimes, and the
// garbage collector's chances to run. It must never import os, net or
// anything that reaches for the host beyond the wasmassign log import.
//
// # Notes
//
//   - Register from init, not main: a reactor module's main is never run.
//   - Randomness must come from Request.Seed (for example math/rand/v2's
//     PCG seeded with it). The Go runtime seeds its own generators once per
//     instance, so the global math/rand would make a reused instance answer
//     differently from a fresh one.
//   - A panic in an assignor becomes an error response carrying the panic
//     message, and the host falls back to another assignor.
package guest

import (
	"fmt"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// AssignFunc computes an assignment. It may keep nothing from req after it
// returns: the next call reuses the memory.
type AssignFunc func(req *abi.Request) (*abi.Response, error)

// Level is the severity of a log line, with the values of Go's log/slog.
type Level int32

// Log levels understood by the host.
const (
	LevelDebug Level = -4
	LevelInfo  Level = 0
	LevelWarn  Level = 4
	LevelError Level = 8
)

type assignor struct {
	info abi.AssignorInfo
	fn   AssignFunc
}

// module is the state of this wasm instance. A plugin module is one process
// with one set of exports, so this is the one place where package-level state
// is the honest model; everything else reaches it through the functions below.
type module struct {
	assignors []assignor
	desc      []byte // encoded description, built on first describe
	out       []byte // the last response; valid until the next call

	// live keeps every buffer handed out by alloc reachable, so the garbage
	// collector cannot reclaim memory the host is still writing into.
	live map[uintptr][]byte
	// spare is a freed request buffer kept for the next alloc, so a guest
	// serving the same request size again does not grow its heap.
	spare []byte

	// gc paces the collections forced between calls (collect.go).
	gc collector
}

var mod = module{live: make(map[uintptr][]byte)}

// Register adds an assignor to this module. Call it from an init function.
// Registering two assignors with the same name panics, since the host could
// not tell them apart.
func Register(info abi.AssignorInfo, fn AssignFunc) {
	mod.register(info, fn)
}

func (m *module) register(info abi.AssignorInfo, fn AssignFunc) {
	for _, a := range m.assignors {
		if a.info.Name == info.Name {
			panic(fmt.Sprintf("guest: assignor %q registered twice", info.Name))
		}
	}
	m.assignors = append(m.assignors, assignor{info: info, fn: fn})
	m.desc = nil
}

// Logf writes one line to the host's log, attributed to this plugin.
func Logf(level Level, format string, args ...any) {
	hostLog(level, fmt.Sprintf(format, args...))
}

func (m *module) describe() []byte {
	if m.desc == nil {
		d := abi.Description{Assignors: make([]abi.AssignorInfo, len(m.assignors))}
		for i, a := range m.assignors {
			d.Assignors[i] = a.info
		}
		m.desc = abi.AppendDescription(nil, &d)
	}
	return m.desc
}

// assign decodes a request, runs the assignor it names and encodes the
// answer into the module's reusable output buffer.
func (m *module) assign(in []byte) []byte {
	resp := m.run(in)
	m.out = abi.AppendResponse(m.out[:0], resp)
	return m.out
}

// fail encodes an error response into the output buffer.
func (m *module) fail(msg string) []byte {
	m.out = abi.AppendResponse(m.out[:0], &abi.Response{Error: msg})
	return m.out
}

func (m *module) run(in []byte) (resp *abi.Response) {
	req, err := abi.DecodeRequest(in)
	if err != nil {
		return &abi.Response{Error: err.Error()}
	}
	a, err := m.lookup(req.Assignor)
	if err != nil {
		return &abi.Response{Error: err.Error()}
	}
	defer func() {
		if p := recover(); p != nil {
			resp = &abi.Response{Error: fmt.Sprintf("assignor %s: panic: %v", a.info.Name, p)}
		}
	}()
	resp, err = a.fn(req)
	switch {
	case err != nil:
		return &abi.Response{Error: fmt.Sprintf("assignor %s: %v", a.info.Name, err)}
	case resp == nil:
		return &abi.Response{Error: fmt.Sprintf("assignor %s: returned no response", a.info.Name)}
	case resp.Error != "":
		return &abi.Response{Error: resp.Error}
	}
	return resp
}

func (m *module) lookup(name string) (*assignor, error) {
	if name == "" && len(m.assignors) == 1 {
		return &m.assignors[0], nil
	}
	for i := range m.assignors {
		if m.assignors[i].info.Name == name {
			return &m.assignors[i], nil
		}
	}
	return nil, fmt.Errorf("this module has no assignor %q", name)
}

// alloc hands out a buffer of at least size bytes, reusing the spare one when
// it is large enough.
func (m *module) alloc(size int) []byte {
	var b []byte
	if cap(m.spare) >= size {
		b, m.spare = m.spare[:size], nil
	} else {
		b = make([]byte, size)
	}
	return b
}

// release takes back a buffer; the largest one released is kept as spare.
func (m *module) release(b []byte) {
	if cap(b) > cap(m.spare) {
		m.spare = b
	}
}
