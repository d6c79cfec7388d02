module github.com/wasmassign/wasmassign

go 1.26.8

require github.com/wasmassign/wasmassign/sdk/go v0.0.0

require (
	github.com/tetratelabs/wazero v1.12.0 // indirect
	github.com/twmb/franz-go v1.22.3 // indirect
	golang.org/x/sys v0.44.0 // indirect
)

replace github.com/wasmassign/wasmassign/sdk/go => ./sdk/go
