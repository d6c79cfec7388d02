package scenario

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/wasmassign/wasmassign/internal/termtext"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Output is the result of running an assignor over a scenario, keyed by
// names rather than indices so that people and other tools can read it.
//
// Target is what the plugin returned; Assignment is what each member
// receives this generation, which differs from Target only when the host
// withheld partitions that are still held by another member. Every member of
// the request appears in both maps, with an empty object when it gets
// nothing, and every partition list is ascending.
type Output struct {
	// Assignor is the assignor that ran.
	Assignor string `json:"assignor"`
	// RebalanceProtocol is "eager" or "cooperative".
	RebalanceProtocol string `json:"rebalance_protocol"`
	// Target maps member id, then topic name, to the partitions the plugin
	// assigned.
	Target map[string]map[string][]int32 `json:"target"`
	// Assignment maps member id, then topic name, to the partitions the
	// member receives now.
	Assignment map[string]map[string][]int32 `json:"assignment"`
	// UserData maps member id to the assignment user data it receives,
	// standard base64; members with none are left out.
	UserData map[string]string `json:"user_data,omitempty"`

	// rows keeps the request's member order and racks for WriteTable. It is
	// empty for an Output decoded from JSON, which then lists members by id.
	rows []row
}

type row struct{ id, rack string }

// NewOutput names the target and assignment responses of req. A nil
// assignment means the members receive the target unchanged (eager groups,
// or nothing withheld). User data is taken from assignment, since that is
// what members receive. The responses are expected to have passed the
// runtime's validation; the caller reports a response's Error itself. Member
// and topic indices out of range are skipped rather than trusted.
func NewOutput(req *abi.Request, assignor string, target, assignment *abi.Response) *Output {
	if assignment == nil {
		assignment = target
	}
	o := &Output{
		Assignor:          assignor,
		RebalanceProtocol: req.RebalanceProtocol.String(),
		Target:            byName(req, target),
		Assignment:        byName(req, assignment),
		rows:              make([]row, len(req.Members)),
	}
	for i, m := range req.Members {
		o.rows[i] = row{id: m.MemberID, rack: m.Rack}
	}
	if assignment != nil {
		for _, ma := range assignment.Members {
			if ma.Member < 0 || int(ma.Member) >= len(req.Members) || len(ma.UserData) == 0 {
				continue
			}
			if o.UserData == nil {
				o.UserData = make(map[string]string)
			}
			o.UserData[req.Members[ma.Member].MemberID] = base64.StdEncoding.EncodeToString(ma.UserData)
		}
	}
	return o
}

// byName converts a response to member id → topic name → ascending
// partitions, with an entry for every member of req.
func byName(req *abi.Request, resp *abi.Response) map[string]map[string][]int32 {
	out := make(map[string]map[string][]int32, len(req.Members))
	for _, m := range req.Members {
		out[m.MemberID] = map[string][]int32{}
	}
	if resp == nil {
		return out
	}
	for _, ma := range resp.Members {
		if ma.Member < 0 || int(ma.Member) >= len(req.Members) {
			continue
		}
		topics := out[req.Members[ma.Member].MemberID]
		for _, tp := range ma.Partitions {
			if tp.Topic < 0 || int(tp.Topic) >= len(req.Topics) || len(tp.Partitions) == 0 {
				continue
			}
			name := req.Topics[tp.Topic].Name
			topics[name] = append(topics[name], tp.Partitions...)
		}
	}
	for _, topics := range out {
		for name, ps := range topics {
			slices.Sort(ps)
			topics[name] = slices.Compact(ps)
		}
	}
	return out
}

// WriteJSON writes o as JSON with the keys of the Output type, objects
// sorted by key. Objects are indented, but each partition list stays on one
// line, so an output with a million partitions is still readable.
func (o *Output) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("{\n  \"assignor\": ")
	writeString(bw, o.Assignor)
	bw.WriteString(",\n  \"rebalance_protocol\": ")
	writeString(bw, o.RebalanceProtocol)
	bw.WriteString(",\n  \"target\": ")
	writeMembers(bw, o.Target)
	bw.WriteString(",\n  \"assignment\": ")
	writeMembers(bw, o.Assignment)
	if len(o.UserData) > 0 {
		bw.WriteString(",\n  \"user_data\": {")
		for i, id := range slices.Sorted(maps.Keys(o.UserData)) {
			if i > 0 {
				bw.WriteByte(',')
			}
			bw.WriteString("\n    ")
			writeString(bw, id)
			bw.WriteString(": ")
			writeString(bw, o.UserData[id])
		}
		bw.WriteString("\n  }")
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}

func writeMembers(bw *bufio.Writer, members map[string]map[string][]int32) {
	if len(members) == 0 {
		bw.WriteString("{}")
		return
	}
	bw.WriteByte('{')
	var num []byte
	for i, id := range slices.Sorted(maps.Keys(members)) {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n    ")
		writeString(bw, id)
		bw.WriteString(": {")
		for j, name := range slices.Sorted(maps.Keys(members[id])) {
			if j > 0 {
				bw.WriteString(", ")
			}
			writeString(bw, name)
			bw.WriteString(": [")
			for k, p := range members[id][name] {
				if k > 0 {
					bw.WriteByte(',')
				}
				num = strconv.AppendInt(num[:0], int64(p), 10)
				bw.Write(num)
			}
			bw.WriteByte(']')
		}
		bw.WriteByte('}')
	}
	bw.WriteString("\n  }")
}

func writeString(bw *bufio.Writer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	bw.Write(b)
}

// WriteTable writes o as an aligned table, one row per member in Kafka's
// member order (by member id for an Output decoded from JSON): the member id,
// its rack when any member has one, how many partitions it receives, and
// those partitions written compactly as `t0[0-2,5] t1[0]`. When partitions
// were withheld, a WITHHELD column lists those in the target but not in the
// assignment. A header names the assignor and a footer sums up.
func (o *Output) WriteTable(w io.Writer) error {
	rows := o.rows
	if len(rows) == 0 {
		ids := make(map[string]bool)
		for id := range o.Target {
			ids[id] = true
		}
		for id := range o.Assignment {
			ids[id] = true
		}
		for _, id := range slices.Sorted(maps.Keys(ids)) {
			rows = append(rows, row{id: id})
		}
	}
	racks := false
	withheld := make([]map[string][]int32, len(rows))
	anyWithheld := false
	for i, r := range rows {
		racks = racks || r.rack != ""
		withheld[i] = difference(o.Target[r.id], o.Assignment[r.id])
		anyWithheld = anyWithheld || len(withheld[i]) > 0
	}

	bw := bufio.NewWriter(w)
	// The assignor's name may be a plugin's, member ids and racks a
	// scenario's: a terminal shows them, it does not obey them.
	fmt.Fprintf(bw, "assignor %s, %s rebalance\n", termtext.Escape(o.Assignor), o.RebalanceProtocol)
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	header := []string{"MEMBER"}
	if racks {
		header = append(header, "RACK")
	}
	header = append(header, "PARTITIONS", "ASSIGNMENT")
	if anyWithheld {
		header = append(header, "WITHHELD")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	assigned, held := 0, 0
	for i, r := range rows {
		n := countPartitions(o.Assignment[r.id])
		assigned += n
		held += countPartitions(withheld[i])
		cells := []string{r.id}
		if racks {
			cells = append(cells, dash(r.rack))
		}
		cells = append(cells, strconv.Itoa(n), dash(Compact(o.Assignment[r.id])))
		if anyWithheld {
			cells = append(cells, dash(Compact(withheld[i])))
		}
		fmt.Fprintln(tw, strings.Join(termtext.EscapeAll(cells), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(bw, "%d members, %d partitions assigned, %d withheld\n", len(rows), assigned, held)
	return bw.Flush()
}

// Compact writes topic partitions as `t0[0-2,5] t1[0]`: topics by name, runs
// of consecutive partitions as ranges. Lists must be ascending.
func Compact(topics map[string][]int32) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		ps := topics[name]
		if len(ps) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(name)
		b.WriteByte('[')
		for i := 0; i < len(ps); {
			j := i
			for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
				j++
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(int(ps[i])))
			if j > i {
				b.WriteByte('-')
				b.WriteString(strconv.Itoa(int(ps[j])))
			}
			i = j + 1
		}
		b.WriteByte(']')
	}
	return b.String()
}

// difference returns the partitions of a not in b, per topic; both ascending.
func difference(a, b map[string][]int32) map[string][]int32 {
	var out map[string][]int32
	for name, as := range a {
		bs := b[name]
		var diff []int32
		j := 0
		for _, p := range as {
			for j < len(bs) && bs[j] < p {
				j++
			}
			if j < len(bs) && bs[j] == p {
				continue
			}
			diff = append(diff, p)
		}
		if len(diff) > 0 {
			if out == nil {
				out = make(map[string][]int32)
			}
			out[name] = diff
		}
	}
	return out
}

func countPartitions(topics map[string][]int32) int {
	n := 0
	for _, ps := range topics {
		n += len(ps)
	}
	return n
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
