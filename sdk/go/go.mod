module github.com/wasmassign/wasmassign/sdk/go

go 1.26.8
