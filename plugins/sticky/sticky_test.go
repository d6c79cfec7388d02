package sticky

import (
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
)

// TestSticky_InfoDeclaresEachProtocolForBothModes: each assignor answers
// for the Kafka protocol of its own name, in eager and cooperative groups
// alike.
func TestSticky_InfoDeclaresEachProtocolForBothModes(t *testing.T) {
	assignortest.CheckInfo(t, EagerInfo(), "sticky", []string{"sticky"})
	assignortest.CheckInfo(t, CooperativeInfo(), "cooperative-sticky", []string{"cooperative-sticky"})
}
