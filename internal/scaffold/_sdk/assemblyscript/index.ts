// The package's entry for `import ... from "@wasmassign/sdk"`: asc resolves a
// package import to <package>/index.ts. The SDK lives in assembly/index.ts.
export * from "./assembly/index";
