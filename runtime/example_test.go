package wasmruntime_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Load a plugin and run one assignment. The C guest in testdata implements
// Kafka's round-robin assignor; `make build` builds it.
func ExampleHost_LoadFile() {
	ctx := context.Background()
	limits := wasmruntime.DefaultLimits().WithTimeout(time.Second).WithMemoryLimitMB(64)
	host, err := wasmruntime.NewHost(ctx, wasmruntime.NewConfig().WithLimits(limits))
	if err != nil {
		panic(err)
	}
	defer host.Close(ctx)

	plugin, err := host.LoadFile(ctx, "../testdata/guests/c/roundrobin.wasm")
	if err != nil {
		panic(err)
	}
	req := &abi.Request{
		GroupID: "orders",
		Topics:  []abi.Topic{{Name: "t", Exists: true, PartitionCount: 3}},
		Members: []abi.Member{
			{MemberID: "a", Topics: []int32{0}, OwnedGeneration: -1},
			{MemberID: "b", Topics: []int32{0}, OwnedGeneration: -1},
		},
	}
	resp, err := plugin.Assign(ctx, "c-roundrobin", req)
	if err != nil {
		panic(err)
	}
	for _, ma := range resp.Members {
		fmt.Println(req.Members[ma.Member].MemberID, ma.Partitions[0].Partitions)
	}
	// Output:
	// a [0 2]
	// b [1]
}

// Every failure is an *Error whose Kind says what went wrong, so a caller
// can fall back, count or alert without parsing messages.
func ExampleError() {
	ctx := context.Background()
	host, err := wasmruntime.NewHost(ctx, wasmruntime.NewConfig())
	if err != nil {
		panic(err)
	}
	defer host.Close(ctx)

	_, err = host.LoadFile(ctx, "../testdata/hostile/not-wasm.wasm")
	var e *wasmruntime.Error
	if errors.As(err, &e) {
		fmt.Println(errors.Is(err, wasmruntime.ErrNotWasm), e.Reason())
	}
	// Output:
	// true not_wasm
}
