// Command matrixgen rewrites the interop matrix in the README from the
// results that the end-to-end tests recorded (see internal/testutil/matrix).
//
//	go run ./internal/cmd/matrixgen -results build/matrix.jsonl -readme README.md
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/wasmassign/wasmassign/internal/testutil/matrix"
)

func main() {
	results := flag.String("results", "", "the file the tests recorded into (WASMASSIGN_MATRIX)")
	readme := flag.String("readme", "README.md", "the document whose matrix section is rewritten")
	flag.Parse()
	if err := run(*results, *readme); err != nil {
		fmt.Fprintln(os.Stderr, "matrixgen:", err)
		os.Exit(1)
	}
}

func run(resultsPath, readmePath string) error {
	f, err := os.Open(resultsPath)
	if err != nil {
		return err
	}
	defer f.Close()
	results, err := matrix.Read(f)
	if err != nil {
		return fmt.Errorf("%s: %w", resultsPath, err)
	}
	if len(results) == 0 {
		return fmt.Errorf("%s: no results; were the end-to-end tests skipped?", resultsPath)
	}
	doc, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	out, err := matrix.Splice(string(doc), matrix.Table(results))
	if err != nil {
		return fmt.Errorf("%s: %w", readmePath, err)
	}
	return os.WriteFile(readmePath, []byte(out), 0o644)
}
