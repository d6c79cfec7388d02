package guest

import (
	"errors"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

func info(name string) abi.AssignorInfo {
	return abi.AssignorInfo{Name: name, Version: "1", Protocols: []string{name}, Modes: abi.ModeEager}
}

func request(assignor string) []byte {
	return abi.AppendRequest(nil, &abi.Request{
		Assignor: assignor,
		Topics:   []abi.Topic{{Name: "t", Exists: true, PartitionCount: 1}},
		Members:  []abi.Member{{MemberID: "m", Topics: []int32{0}}},
	})
}

func TestModule_Assign(t *testing.T) {
	give := func(r *abi.Request) (*abi.Response, error) {
		return &abi.Response{Members: []abi.MemberAssignment{{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0}}}}}}, nil
	}
	m := &module{live: map[uintptr][]byte{}}
	m.register(info("give"), give)
	m.register(info("fail"), func(*abi.Request) (*abi.Response, error) { return nil, errors.New("no capacity") })
	m.register(info("panic"), func(*abi.Request) (*abi.Response, error) { panic("boom") })
	m.register(info("nil"), func(*abi.Request) (*abi.Response, error) { return nil, nil })
	m.register(info("error-field"), func(*abi.Request) (*abi.Response, error) { return &abi.Response{Error: "said so"}, nil })

	tests := []struct {
		name  string
		in    []byte
		error string // empty: an ok response is expected
	}{
		{"ok", request("give"), ""},
		{"returned error", request("fail"), "assignor fail: no capacity"},
		{"panic", request("panic"), "assignor panic: panic: boom"},
		{"nil response", request("nil"), "returned no response"},
		{"error in response", request("error-field"), "said so"},
		{"unknown assignor", request("other"), `no assignor "other"`},
		{"no name with several assignors", request(""), `no assignor ""`},
		{"malformed request", request("give")[:7], "truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := abi.DecodeResponse(m.assign(tt.in))
			if err != nil {
				t.Fatalf("the module wrote an undecodable response: %v", err)
			}
			if tt.error == "" {
				if resp.Error != "" || len(resp.Members) != 1 {
					t.Fatalf("response %+v, want one assignment", resp)
				}
				return
			}
			if !strings.Contains(resp.Error, tt.error) {
				t.Fatalf("error %q, want it to contain %q", resp.Error, tt.error)
			}
		})
	}
}

func TestModule_SingleAssignorAnswersAnEmptyName(t *testing.T) {
	m := &module{live: map[uintptr][]byte{}}
	m.register(info("only"), func(*abi.Request) (*abi.Response, error) { return &abi.Response{}, nil })
	resp, err := abi.DecodeResponse(m.assign(request("")))
	if err != nil || resp.Error != "" {
		t.Fatalf("resp %+v, err %v", resp, err)
	}
}

func TestModule_DescribeListsAssignorsInOrder(t *testing.T) {
	m := &module{live: map[uintptr][]byte{}}
	m.register(info("b"), nil)
	m.register(info("a"), nil)
	d, err := abi.DecodeDescription(m.describe())
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Assignors) != 2 || d.Assignors[0].Name != "b" || d.Assignors[1].Name != "a" {
		t.Fatalf("description %+v", d)
	}
}

func TestModule_RegisterTwicePanics(t *testing.T) {
	m := &module{live: map[uintptr][]byte{}}
	m.register(info("a"), nil)
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "registered twice") {
			t.Fatalf("recover() = %v", p)
		}
	}()
	m.register(info("a"), nil)
}

// TestModule_AllocReusesTheLargestFreedBuffer is what keeps a guest's
// memory flat: the same request size never allocates twice.
func TestModule_AllocReusesTheLargestFreedBuffer(t *testing.T) {
	m := &module{live: map[uintptr][]byte{}}
	a := m.alloc(1000)
	m.release(a)
	b := m.alloc(600)
	if &a[0] != &b[0] || len(b) != 600 {
		t.Fatal("a smaller allocation did not reuse the freed buffer")
	}
	c := m.alloc(2000) // the spare is in use: a new buffer
	if &c[0] == &a[0] {
		t.Fatal("a buffer in use was handed out twice")
	}
	m.release(b)
	m.release(c)
	if cap(m.spare) != 2000 {
		t.Fatalf("spare has capacity %d, want the larger buffer (2000)", cap(m.spare))
	}
}

func TestModule_OutputBufferIsReused(t *testing.T) {
	m := &module{live: map[uintptr][]byte{}}
	m.register(info("e"), func(*abi.Request) (*abi.Response, error) { return &abi.Response{}, nil })
	first := m.assign(request("e"))
	second := m.assign(request("e"))
	if &first[0] != &second[0] {
		t.Fatal("each call allocated a new response buffer")
	}
}
