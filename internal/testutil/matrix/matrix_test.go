package matrix

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTableFailsARowWhenAnyOfItsTestsFailed(t *testing.T) {
	java := Row{Client: "Java", Version: "4.4.0", Strategy: "range", Upstream: "Apache Kafka 4.4.0"}
	kcat := Row{Client: "kcat", Version: "1.7.1", Strategy: "range", Upstream: "kfake"}
	got := Table([]Result{
		{Row: java, Test: "TestA", Passed: true},
		{Row: java, Test: "TestB", Passed: false},
		{Row: kcat, Test: "TestC", Passed: true},
		{Row: kcat, Test: "TestC", Passed: true},
	})
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 4 {
		t.Fatalf("want header, rule and 2 rows, got:\n%s", got)
	}
	// Sorted by upstream first: Apache Kafka before kfake.
	if !strings.Contains(lines[2], "| Java |") || !strings.Contains(lines[2], "**fail**: TestB") || !strings.Contains(lines[2], "| 2 |") {
		t.Errorf("java row = %q", lines[2])
	}
	if !strings.Contains(lines[3], "| kcat |") || !strings.HasSuffix(lines[3], "| 2 | pass |") {
		t.Errorf("kcat row = %q", lines[3])
	}
}

func TestSpliceReplacesOnlyTheMarkedSection(t *testing.T) {
	doc := "intro\n" + BeginMarker + "\nold table\n" + EndMarker + "\nafter\n"
	got, err := Splice(doc, "new\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "intro\n" + BeginMarker + "\nnew\n" + EndMarker + "\nafter\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := Splice("no markers", "x"); err == nil {
		t.Error("a document without markers was accepted")
	}
	if _, err := Splice(EndMarker+BeginMarker, "x"); err == nil {
		t.Error("markers in the wrong order were accepted")
	}
}

func TestReadNamesTheMalformedLine(t *testing.T) {
	_, err := Read(strings.NewReader(`{"client":"a","passed":true}` + "\n{oops\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want one naming line 2", err)
	}
	if _, err := Read(strings.NewReader(`{"passed":true}`)); err == nil {
		t.Error("a result without a client was accepted")
	}
}

func TestRecordAppendsTheOutcomeWhenTheTestEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	t.Setenv(EnvFile, path)
	row := Row{Client: "kgo", Version: "v1", Strategy: "sticky", Upstream: "kfake"}
	t.Run("passes", func(t *testing.T) { Record(t, row) })
	t.Run("skips", func(t *testing.T) { Record(t, row); t.Skip("not run") })
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Row != row || !res[0].Passed || !strings.HasSuffix(res[0].Test, "/passes") {
		t.Fatalf("recorded %+v, want one passing result of the subtest that ran", res)
	}
}
