# wasmassign build. `make test` is the one command CI runs: it installs the
# toolchains it needs (Debian packages), builds every wasm artefact, then runs
# the Go tests of both modules. ./... stops at sdk/go, a module of its own,
# even in the go.work workspace: hence each Go target's second pass there.

SHELL    := /bin/bash
GO       ?= go
GOWASM   := GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath
BUILTINS := range roundrobin leaderrack sticky
BUILTIN_WASM := $(BUILTINS:%=plugins/builtin/wasm/%.wasm)
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS := wabt clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32
BENCHTIME ?= 1x
KAFKA_VERSION ?= 4.4.0

.PHONY: all build plugins testdata tools e2e-tools kafka-cache test vet bench bench-gateway bench-realkafka bench-loadtest bench-loadtest-kafka bench-loadtest-cluster test-cluster-realkafka run clean FORCE

all: build

include sdk/sdk.mk
include sdk/rust/rust.mk

# The C SDK's kit needs clang-14 and wasi-libc from Debian.
$(SDK_C_KIT): | tools

## build: the built-in plugins, then bin/wasmassign with them embedded.
build: plugins bin/wasmassign

plugins: $(BUILTIN_WASM)

# Every built-in is a Rust crate: their rules are in sdk/rust/rust.mk.

bin/wasmassign: plugins FORCE
	$(GO) build -trimpath -o $@ ./cmd/wasmassign

## tools: the Debian toolchains for test guests (wat2wasm, clang for wasm32-wasi).
tools:
	@if ! command -v wat2wasm >/dev/null || ! command -v clang-14 >/dev/null || ! command -v wasm-ld-14 >/dev/null \
	   || [ ! -e /usr/lib/wasm32-wasi/libc.a ]; then \
	  echo "installing $(APT_PKGS)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(APT_PKGS) >/dev/null; \
	fi

## testdata: test guests: the Go test guest, the Go sticky guest (the
## reference the Rust built-in is compared with), hostile WAT modules, the C guest.
testdata: tools
	$(GOWASM) -o testdata/guests/go/testguest.wasm ./testdata/guests/go
	$(GOWASM) -o testdata/guests/go/sticky-go.wasm ./plugins/sticky/wasm
	$(MAKE) -s -C testdata/hostile
	$(MAKE) -s -C testdata/guests/c
	$(MAKE) -s -f internal/pluginreload/testdata/Makefile

## e2e-tools: kcat and node for the end-to-end tests; kafkajs 2.2.4 from internal/e2e/js/package-lock.json.
# Only what is missing is installed: an image may carry its own Node.js
# (NodeSource's bundles npm, and Debian's npm package conflicts with it).
e2e-tools:
	@pkgs=""; \
	command -v kcat >/dev/null || pkgs="$$pkgs kcat"; \
	command -v node >/dev/null || pkgs="$$pkgs nodejs"; \
	command -v npm >/dev/null || pkgs="$$pkgs npm"; \
	if [ -n "$$pkgs" ]; then \
	  echo "installing$$pkgs"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$pkgs >/dev/null; fi
	@[ -e internal/e2e/js/node_modules/kafkajs/package.json ] || (cd internal/e2e/js && npm ci --no-audit --no-fund)

## python-clients: confluent-kafka and kafka-python in a virtualenv under .cache (internal/e2e/python.mk).
-include internal/e2e/python.mk
python-clients::

## kafka-cache: Apache Kafka's broker and Java client jars from Maven Central,
## for the tests against a real broker (kept in .cache/kafka; fetched once).
kafka-cache:
	KAFKA_VERSION=$(KAFKA_VERSION) bash internal/testutil/realkafka/fetch-kafka.sh

vet:
	$(GO) vet ./...
	cd sdk/go && $(GO) vet ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./plugins/... ./testdata/guests/go

## test: everything CI checks.
## The end-to-end tests record each client they ran (internal/testutil/matrix);
## the README's interop matrix is rewritten from that record after a green run.
MATRIX := $(CURDIR)/.cache/matrix.jsonl

test: build testdata sdk-kits sdk-test-artefacts rust vet kafka-cache e2e-tools python-clients
	@mkdir -p $(dir $(MATRIX)) && rm -f $(MATRIX)
	REALKAFKA_REQUIRED=1 WASMASSIGN_MATRIX=$(MATRIX) WASMASSIGN_BIN=$(CURDIR)/bin/wasmassign $(GO) test -count=1 -timeout 30m ./...
	cd sdk/go && $(GO) test -count=1 ./...
	$(GO) run ./internal/cmd/matrixgen -results $(MATRIX) -readme README.md

## bench: every Go benchmark once (BENCHTIME=5x for steadier numbers).
bench: build testdata
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -benchmem ./...
	cd sdk/go && $(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -benchmem ./...

## bench-gateway: the gateway benchmarks: rebalance latency, paused partitions and throughput, gateway vs kfake direct.
# The rebalance and throughput benchmarks take more iterations: rebalance
# figures move in steps of a heartbeat interval, so a median of 10 can land
# on either side of one (forming the group of 50 is judged by the mean of
# 100 samples a side, see BenchmarkGatewayRebalance), and a throughput pair lasts a tenth of a second
# and varies by a third from pair to pair (the side run second in a pair is
# about 6% slower, which alternating the order cancels): 120 pairs put the
# median within a few hundredths. Both run on the daemon's embedded cluster;
# the patterns also match GatewayThroughputUpstream and
# GatewayRebalanceUpstream, the same with the cluster outside the daemon.
bench-gateway: build
	WASMASSIGN_BIN=$(CURDIR)/bin/wasmassign $(GO) test -count=1 -run '^$$' -bench GatewayCooperativePause -benchtime 10x ./internal/e2e/
	WASMASSIGN_BIN=$(CURDIR)/bin/wasmassign $(GO) test -count=1 -run '^$$' -bench GatewayThroughput -benchtime 120x ./internal/e2e/
	WASMASSIGN_BIN=$(CURDIR)/bin/wasmassign $(GO) test -count=1 -timeout 30m -run '^$$' -bench GatewayRebalance -benchtime 25x ./internal/e2e/

## bench-realkafka: the gateway benchmarks with a real Kafka 4.4 broker as upstream, against the broker's own coordinator.
bench-realkafka: build kafka-cache
	REALKAFKA_REQUIRED=1 WASMASSIGN_BIN=$(CURDIR)/bin/wasmassign $(GO) test -count=1 -timeout 30m -run '^$$' -bench RealKafka -benchtime 5x ./internal/e2e/

## bench-loadtest-kafka: a loadtest load on kfake, the gateway in front of a real Kafka 4.4 broker, and the broker itself.
bench-loadtest-kafka: build kafka-cache
	REALKAFKA_REQUIRED=1 WASMASSIGN_BIN=$(CURDIR)/bin/wasmassign $(GO) test -count=1 -timeout 30m -run '^$$' -bench LoadtestWithABroker -benchtime 1x ./internal/e2e/

## bench-loadtest: 1,000 groups of 10 members (10,000 connections) on kfake, then through a fresh gateway, with the ratios.
# The gateway runs on its embedded cluster as `make run` does, from
# examples/loadtest.toml, and is sampled with its plugin workers (--pid);
# kfake, the reference, runs in a process the load generator starts.
# LOADTEST_FLAGS sizes the load: LOADTEST_FLAGS="--groups 50" for a quick
# run (flags given later win).
LOADTEST_FLAGS ?= --groups 1000 --members 10 --topics 100 --partitions 16 --protocol range
bench-loadtest: build
	@mkdir -p .cache; log=.cache/loadtest-gateway.log; \
	bin/wasmassign serve --config examples/loadtest.toml >$$log 2>&1 & pid=$$!; \
	trap 'kill $$pid 2>/dev/null; wait $$pid 2>/dev/null' EXIT; \
	addr=; for i in $$(seq 150); do \
	  addr=$$(sed -n 's/^wasmassign gateway listening on //p' $$log); [ -n "$$addr" ] && break; \
	  kill -0 $$pid 2>/dev/null || break; sleep 0.2; done; \
	if [ -z "$$addr" ]; then echo "bench-loadtest: the gateway did not start; its log ($$log):"; cat $$log; exit 1; fi; \
	bin/wasmassign loadtest --target kfake --target gateway=$$addr --pid gateway=$$pid $(LOADTEST_FLAGS)

## bench-loadtest-cluster: a loadtest load on kfake, then on two gateways of one cluster in front of a kfake upstream, with each gateway's share.
# The load bootstraps from one gateway; FindCoordinator sends each group to
# its owner. CLUSTER_LOADTEST_FLAGS sizes it.
CLUSTER_LOADTEST_FLAGS ?= --groups 200 --members 10 --topics 20 --partitions 16 --protocol range
bench-loadtest-cluster: build
	bash internal/loadtest/cluster_bench.sh $(CURDIR)/bin/wasmassign $(CURDIR)/.cache/loadtest-cluster $(CLUSTER_LOADTEST_FLAGS)

## test-cluster-realkafka: three gateways in front of a real Kafka 4.4 broker, Java and librdkafka consumers, kill -9 of the owner.
test-cluster-realkafka: build kafka-cache python-clients
	REALKAFKA_REQUIRED=1 WASMASSIGN_BIN=$(CURDIR)/bin/wasmassign $(GO) test -count=1 -timeout 10m -run TestRealKafkaCluster -v ./internal/e2e/

## run: the gateway on its embedded cluster (examples/gateway.toml); Ctrl-C stops it.
run: build
	bin/wasmassign serve --config examples/gateway.toml

clean: sdk-clean rust-clean
	rm -rf bin $(BUILTIN_WASM) testdata/guests/go/*.wasm
	-$(MAKE) -s -C testdata/hostile clean
	-$(MAKE) -s -C testdata/guests/c clean
