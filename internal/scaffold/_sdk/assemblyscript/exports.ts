// The package's entry for `export * from "@wasmassign/sdk/exports"`: the
// ABI's exports, which a plugin's entry file must re-export.
export * from "./assembly/exports";
