package rangeassignor

import (
	"fmt"

	"github.com/wasmassign/wasmassign/plugins/internal/groupview"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Info describes the range assignor to the host. Both modes are declared
// because the host does the KIP-429 withholding for cooperative groups.
func Info() abi.AssignorInfo {
	return abi.AssignorInfo{
		Name:        "range",
		Version:     "1.0.0",
		Protocols:   []string{"range"},
		Modes:       abi.ModeEager | abi.ModeCooperative,
		Description: "Kafka's RangeAssignor: consecutive partitions per topic, rack-aware per KIP-881",
	}
}

// Assign computes Kafka's range assignment for req. It returns one
// MemberAssignment per member, in request order.
func Assign(req *abi.Request) (*abi.Response, error) {
	return assign(req, options{})
}

// options holds switches that only tests set.
type options struct {
	// preferRackAware mirrors AbstractPartitionAssignor.preferRackAwareLogic,
	// the switch Kafka's own tests use to run the rack-aware passes even when
	// every partition has replicas on the same racks. Kafka's test
	// expectations for those cases can only be checked with it on.
	preferRackAware bool
}

// AssignWithoutRacks computes Kafka's range assignment for req as if no
// member had a rack: the classic layout, as RangeAssignor computed it
// before KIP-881. It returns one MemberAssignment per member, in request
// order. The coordinator assigns with it when every plugin has failed, so
// that its last resort is this package's range and not a second one.
func AssignWithoutRacks(req *abi.Request) (*abi.Response, error) {
	v, err := view(req)
	if err != nil {
		return nil, err
	}
	return plainLayout(v).Response(), nil
}

func view(req *abi.Request) (*groupview.View, error) {
	v, err := groupview.New(req)
	if err != nil {
		return nil, fmt.Errorf("range: %w", err)
	}
	return v, nil
}

func assign(req *abi.Request, opt options) (*abi.Response, error) {
	v, err := view(req)
	if err != nil {
		return nil, err
	}
	rv, err := newRackView(req, v, opt)
	if err != nil {
		return nil, err
	}
	if rv == nil {
		return plainLayout(v).Response(), nil
	}
	lay, err := rv.layout(req, v)
	if err != nil {
		return nil, err
	}
	return lay.Response(), nil
}

// plainLayout is the classic range assignment. Subscriber i of a topic with
// P partitions and C subscribers takes P/C partitions, plus one when
// i < P%C, starting where subscriber i-1 stopped: an even split that starts
// at slot 0. Each topic's ids are laid out once in ascending order and every
// member gets a window of them, so nothing is done per partition beyond
// writing its id.
func plainLayout(v *groupview.View) *groupview.Layout {
	lay := v.NewLayout()
	for _, t := range v.ByName {
		ids, _ := lay.Split(t, 0)
		ascending(ids)
	}
	return lay
}

// ascending writes 0, 1, 2, ... into s.
//
//go:noinline
func ascending(s []int32) {
	for i := range s {
		s[i] = int32(i)
	}
}
