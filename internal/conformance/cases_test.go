package conformance

import (
	"strings"
	"testing"
)

// TestParseCase_RejectsMalformedCasesNamingTheKey keeps case files strict:
// each mistake fails the case with the key at fault instead of dropping an
// expectation.
func TestParseCase_RejectsMalformedCasesNamingTheKey(t *testing.T) {
	const sc = `{"protocol": "range", "topics": [], "members": []}`
	const rounds = `{"protocol": "sticky", "generate": {"topics": [{"count": 1, "partitions": 1}], "members": [{"count": 2, "subscribe": "all"}], "rounds": {"count": 2}}}`
	tests := []struct{ name, json, want string }{
		{"MissingKafkaTest", `{"scenario": ` + sc + `, "expect": {"guarantees": ["valid"]}}`, "kafka_test: required"},
		{"MissingScenario", `{"kafka_test": "X#y", "expect": {"guarantees": ["valid"]}}`, "scenario: required"},
		{"EmptyExpect", `{"kafka_test": "X#y", "scenario": ` + sc + `, "expect": {}}`, "expect: needs an assignment, handed_over, guarantees or rack_mismatches"},
		{"UnknownGuarantee", `{"kafka_test": "X#y", "scenario": ` + sc + `, "expect": {"guarantees": ["fair"]}}`, `expect.guarantees: unknown guarantee "fair"`},
		{"UnknownKey", `{"kafka_test": "X#y", "scenario": ` + sc + `, "expect": {"handed_ovr": {}}}`, `unknown field "handed_ovr"`},
		{"BadScenario", `{"kafka_test": "X#y", "scenario": {"topics": []}, "expect": {"guarantees": ["valid"]}}`, "scenario.members: required"},
		{"ExactWithRounds", `{"kafka_test": "X#y", "scenario": ` + rounds + `, "expect": {"assignment": {}}}`, "expect.assignment: not allowed with several generate.rounds"},
		{"HandedOverWithRounds", `{"kafka_test": "X#y", "scenario": ` + rounds + `, "expect": {"handed_over": {}}}`, "expect.handed_over: not allowed with several generate.rounds"},
		{"RackMismatchesWithRounds", `{"kafka_test": "X#y", "scenario": ` + rounds + `, "expect": {"rack_mismatches": 0}}`, "expect.rack_mismatches: not allowed with several generate.rounds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseCase([]byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseCase error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, _, err := parseCase([]byte(`{"kafka_test": "X#y", "pending": "why", "scenario": ` + rounds + `, "expect": {"guarantees": ["valid"]}}`)); err != nil {
		t.Errorf("a pending generated case with guarantees is rejected: %v", err)
	}
}

// TestVerdict_PendingCasesSkipWhileFailingAndFailOncePassing checks the
// pending marker both ways, so that it can neither hide a real failure in
// an unmarked case nor outlive its cause.
func TestVerdict_PendingCasesSkipWhileFailingAndFailOncePassing(t *testing.T) {
	tests := []struct {
		name      string
		pending   string
		failures  []string
		skip      bool
		errsCount int
	}{
		{"PassingCase", "", nil, false, 0},
		{"FailingCase", "", []string{"a", "b"}, false, 2},
		{"PendingAndFailing", "dealing", []string{"a"}, true, 0},
		{"PendingButPassing", "dealing", nil, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			skip, errs := verdict(&caseFile{KafkaTest: "X#y", Pending: tt.pending}, tt.failures)
			if (skip != "") != tt.skip || len(errs) != tt.errsCount {
				t.Fatalf("skip %q, errors %q; want skip %v and %d errors", skip, errs, tt.skip, tt.errsCount)
			}
			if tt.skip && !strings.Contains(skip, tt.pending) {
				t.Errorf("skip message %q does not give the reason %q", skip, tt.pending)
			}
		})
	}
}
