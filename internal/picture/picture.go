// Package picture draws a group's assignment as an SVG image: one row per
// member, one cell per partition it receives, each cell coloured by whether
// a replica of the partition lives in the member's rack. An operator sees
// balance (row lengths) and cross-rack fetching (orange cells) at a glance.
// `wasmassign simulate --format svg` writes it, and the daemon serves the
// same picture for a live group.
//
// The package reads an abi.Request and abi.Responses and writes bytes; it
// must not import the runtime, coordinator or proxy packages.
package picture

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"html"
	"io"
	"slices"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Locality says whether a member reads a partition from its own rack.
type Locality int

const (
	// Unknown: the member has no rack, or the partition no placement.
	Unknown Locality = iota
	// Local: a replica of the partition is on a broker in the member's rack.
	Local
	// Remote: no replica is in the member's rack, so fetches cross racks.
	Remote
)

// String returns the name used as the cell's CSS class.
func (l Locality) String() string {
	switch l {
	case Local:
		return "local"
	case Remote:
		return "remote"
	}
	return "unknown"
}

// ErrTooLarge is returned when an assignment has more cells than
// Options.MaxCells: a browser cannot usefully show a million rectangles.
var ErrTooLarge = errors.New("assignment too large to draw")

// Options tune a picture. The zero value is usable.
type Options struct {
	// Title is written at the top, such as the group id and generation.
	Title string
	// Target, when set, is the plugin's target assignment; partitions it
	// gives a member that the drawn assignment withholds are drawn as
	// dashed outlines in that member's row.
	Target *abi.Response
	// MaxCells bounds the number of cells; 0 means 200,000.
	MaxCells int
	// CellsPerLine wraps long rows; 0 means 64.
	CellsPerLine int
}

const (
	cellW, cellH, gap = 9, 14, 2
	labelW            = 280
	lineH             = cellH + gap
	rowPad            = 6
	headerH           = 48
)

// cell is one partition in a member's row.
type cell struct {
	topic     int32
	partition int32
	locality  Locality
	withheld  bool
}

// WriteSVG draws assignment, the partitions each member of req receives,
// to w. Cells are ordered by topic name, then partition.
func WriteSVG(w io.Writer, req *abi.Request, assignment *abi.Response, opt Options) error {
	maxCells := cmp.Or(opt.MaxCells, 200_000)
	perLine := cmp.Or(opt.CellsPerLine, 64)
	loc := newLocator(req)

	rows := make([][]cell, len(req.Members))
	total, counts := 0, [3]int{}
	add := func(resp *abi.Response, withheld bool) error {
		if resp == nil {
			return nil
		}
		for _, ma := range resp.Members {
			if ma.Member < 0 || int(ma.Member) >= len(req.Members) {
				return fmt.Errorf("picture: member index %d out of range", ma.Member)
			}
			for _, tp := range ma.Partitions {
				if tp.Topic < 0 || int(tp.Topic) >= len(req.Topics) {
					return fmt.Errorf("picture: topic index %d out of range", tp.Topic)
				}
				for _, p := range tp.Partitions {
					total++
					if total > maxCells {
						return fmt.Errorf("%w: more than %d partitions", ErrTooLarge, maxCells)
					}
					l := loc.locality(ma.Member, tp.Topic, p)
					if !withheld {
						counts[l]++
					}
					rows[ma.Member] = append(rows[ma.Member], cell{tp.Topic, p, l, withheld})
				}
			}
		}
		return nil
	}
	if err := add(assignment, false); err != nil {
		return err
	}
	if opt.Target != nil {
		if err := add(withheldOnly(req, assignment, opt.Target), true); err != nil {
			return err
		}
	}

	// Layout: each member's row is as many lines as its cells need.
	height := headerH
	for i := range rows {
		slices.SortFunc(rows[i], func(a, b cell) int {
			return cmp.Or(cmp.Compare(req.Topics[a.topic].Name, req.Topics[b.topic].Name), cmp.Compare(a.partition, b.partition))
		})
		height += max(1, (len(rows[i])+perLine-1)/perLine)*lineH + rowPad
	}
	width := labelW + perLine*(cellW+gap) + 10

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="11">`+"\n", width, height, width, height)
	bw.WriteString(`<style>.local{fill:#2e7d32}.remote{fill:#ef6c00}.unknown{fill:#9e9e9e}.withheld{fill:none;stroke:#555;stroke-dasharray:2 1}</style>` + "\n")
	assigned := counts[Local] + counts[Remote] + counts[Unknown]
	fmt.Fprintf(bw, `<text x="4" y="16" font-weight="bold">%s</text>`+"\n", html.EscapeString(opt.Title))
	fmt.Fprintf(bw, `<text x="4" y="34">%d members, %d partitions: %d rack-local, %d cross-rack, %d unknown</text>`+"\n",
		len(req.Members), assigned, counts[Local], counts[Remote], counts[Unknown])
	y := headerH
	for i, m := range req.Members {
		label := m.MemberID
		if m.Rack != "" {
			label += " [" + m.Rack + "]"
		}
		fmt.Fprintf(bw, `<g class="member" data-member="%s"><text x="4" y="%d">%s</text>`+"\n",
			html.EscapeString(m.MemberID), y+cellH-3, html.EscapeString(truncate(label, 40)))
		for k, c := range rows[i] {
			x := labelW + (k%perLine)*(cellW+gap)
			cy := y + (k/perLine)*lineH
			class := c.locality.String()
			if c.withheld {
				class = "withheld"
			}
			fmt.Fprintf(bw, `<rect class="%s" x="%d" y="%d" width="%d" height="%d"><title>%s-%d</title></rect>`+"\n",
				class, x, cy, cellW, cellH, html.EscapeString(req.Topics[c.topic].Name), c.partition)
		}
		bw.WriteString("</g>\n")
		y += max(1, (len(rows[i])+perLine-1)/perLine)*lineH + rowPad
	}
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// withheldOnly returns, per member, the partitions target gives it that
// assignment does not.
func withheldOnly(req *abi.Request, assignment, target *abi.Response) *abi.Response {
	have := make(map[[3]int32]bool)
	if assignment != nil {
		for _, ma := range assignment.Members {
			for _, tp := range ma.Partitions {
				for _, p := range tp.Partitions {
					have[[3]int32{ma.Member, tp.Topic, p}] = true
				}
			}
		}
	}
	out := &abi.Response{}
	for _, ma := range target.Members {
		var parts []abi.TopicPartitions
		for _, tp := range ma.Partitions {
			var ps []int32
			for _, p := range tp.Partitions {
				if !have[[3]int32{ma.Member, tp.Topic, p}] {
					ps = append(ps, p)
				}
			}
			if len(ps) > 0 {
				parts = append(parts, abi.TopicPartitions{Topic: tp.Topic, Partitions: ps})
			}
		}
		if len(parts) > 0 {
			out.Members = append(out.Members, abi.MemberAssignment{Member: ma.Member, Partitions: parts})
		}
	}
	return out
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// locator answers rack questions about a request.
type locator struct {
	req *abi.Request
	// setRacks[i] holds the racks of replica set i's brokers.
	setRacks [][]string
}

func newLocator(req *abi.Request) *locator {
	brokerRack := make(map[int32]string, len(req.Brokers))
	for _, b := range req.Brokers {
		brokerRack[b.ID] = b.Rack
	}
	l := &locator{req: req, setRacks: make([][]string, len(req.ReplicaSets))}
	for i, set := range req.ReplicaSets {
		for _, id := range set {
			if r := brokerRack[id]; r != "" {
				l.setRacks[i] = append(l.setRacks[i], r)
			}
		}
	}
	return l
}

func (l *locator) locality(member, topic, partition int32) Locality {
	rack := l.req.Members[member].Rack
	t := &l.req.Topics[topic]
	if rack == "" || partition < 0 || int(partition) >= len(t.Partitions) {
		return Unknown
	}
	set := t.Partitions[partition].Replicas
	if int(set) >= len(l.setRacks) || len(l.setRacks[set]) == 0 {
		return Unknown
	}
	if slices.Contains(l.setRacks[set], rack) {
		return Local
	}
	return Remote
}
