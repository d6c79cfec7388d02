# sdk/assemblyscript/as.mk: installs AssemblyScript (npm, into the SDK's
# folder) and builds the SDK's conformance kit module and its codec test
# module. Include it from the top-level Makefile (paths are relative to the
# repository root):
#
#   include sdk/assemblyscript/as.mk
#
# Targets: as-tools (npm ci, only when asc is missing), as-kit
# (sdk/assemblyscript/kit/kit.wasm), as-test (sdk/assemblyscript/test/
# golden.wasm, for go test ./sdk/assemblyscript/...), as-clean.

SDK_AS_DIR   := sdk/assemblyscript
SDK_AS_ASC   := $(SDK_AS_DIR)/node_modules/.bin/asc
SDK_AS_FLAGS := -O3 --runtime incremental
SDK_AS_SRCS  := $(SDK_AS_DIR)/assembly/index.ts $(SDK_AS_DIR)/assembly/exports.ts
SDK_AS_KIT   := $(SDK_AS_DIR)/kit/kit.wasm
SDK_AS_TEST  := $(SDK_AS_DIR)/test/golden.wasm

.PHONY: as-tools as-kit as-test as-clean

as-tools: $(SDK_AS_ASC)

# npm ci installs exactly the versions in package-lock.json (assemblyscript
# 0.28.20 and its two dependencies) into the SDK's node_modules.
$(SDK_AS_ASC): $(SDK_AS_DIR)/package.json $(SDK_AS_DIR)/package-lock.json
	@command -v npm >/dev/null || { echo "the AssemblyScript SDK needs node and npm: apt-get install -y nodejs npm" >&2; exit 1; }
	cd $(SDK_AS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

as-kit: $(SDK_AS_KIT)

# --exportStart _initialize: the kit's registrations run in the reactor's
# _initialize, under the host's deadline, instead of a start section.
$(SDK_AS_KIT): $(SDK_AS_DIR)/kit/kit.ts $(SDK_AS_SRCS) $(SDK_AS_ASC)
	cd $(SDK_AS_DIR) && node_modules/.bin/asc kit/kit.ts $(SDK_AS_FLAGS) --exportStart _initialize -o kit/kit.wasm

as-test: $(SDK_AS_TEST)

$(SDK_AS_TEST): $(SDK_AS_DIR)/test/golden.ts $(SDK_AS_SRCS) $(SDK_AS_ASC)
	cd $(SDK_AS_DIR) && node_modules/.bin/asc test/golden.ts $(SDK_AS_FLAGS) -o test/golden.wasm

as-clean:
	rm -f $(SDK_AS_KIT) $(SDK_AS_TEST)
