// The ABI's exports (sdk/ABI.md section 1). A plugin's entry file re-exports
// them with
//
//   export * from "@wasmassign/sdk/exports";
//
// AssemblyScript turns only the entry file's exports into module exports.

import { ABI_VERSION, allocRequest, assignRequest, describeModule } from "./index";

export function wasmassign_abi_version(): i32 {
  return <i32>ABI_VERSION;
}

export function wasmassign_alloc(size: i32): usize {
  return allocRequest(size);
}

// The request buffer stays with the module and is reused for the next call.
export function wasmassign_free(ptr: usize, size: i32): void {}

export function wasmassign_describe(): u64 {
  return describeModule();
}

export function wasmassign_assign(ptr: usize, len: i32): u64 {
  return assignRequest(ptr, len);
}
