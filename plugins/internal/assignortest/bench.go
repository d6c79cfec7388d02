package assignortest

import "testing"

// Benchmark runs fn on the target sizes, with identical subscriptions:
// 2,000 members over 1,000,000 partitions (500 topics of 2,000), and 100
// members over 25,000 partitions (25 topics of 1,000). With racks it then
// runs both again on BenchRequest's rack layout, as "racks/...". Each
// request is built once, outside the timed loop.
func Benchmark(b *testing.B, fn AssignFunc, withRacks bool) {
	type size struct {
		name                        string
		members, topics, partitions int
	}
	sizes := []size{
		{"members=2000/partitions=500x2000", 2000, 500, 2000},
		{"members=100/partitions=25x1000", 100, 25, 1000},
	}
	racks := []bool{false}
	if withRacks {
		racks = append(racks, true)
	}
	for _, r := range racks {
		for _, sz := range sizes {
			name := sz.name
			if r {
				name = "racks/" + name
			}
			b.Run(name, func(b *testing.B) {
				req := BenchRequest(sz.members, sz.topics, sz.partitions, r)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := fn(req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
