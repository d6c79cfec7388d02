module github.com/wasmassign/wasmassign

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/tetratelabs/wazero v1.12.0
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	github.com/wasmassign/wasmassign/sdk/go v0.0.0
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	golang.org/x/sys v0.44.0 // indirect
)

replace github.com/wasmassign/wasmassign/sdk/go => ./sdk/go
