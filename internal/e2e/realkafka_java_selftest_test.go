package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// javaFakeMember is a member fed printed lines instead of a process, to
// test the checks the real-broker tests rely on.
func javaFakeMember(id string, lines ...string) *procMember {
	m := newProcMember(id, "t")
	for _, l := range lines {
		if l == "exit" {
			m.exit(m.events[len(m.events)-1].at.Add(time.Microsecond))
			continue
		}
		m.line(l)
	}
	return m
}

func TestJavaNoDoubleOwnership_FlagsOnlyAPartitionAssignedWhileAnotherHeldIt(t *testing.T) {
	tests := []struct {
		name    string
		a, b    []string
		wantErr string
	}{
		{name: "released before it was assigned",
			a: []string{"assigned gen=1 t=100 t/0 t/1", "revoked gen=2 t=200 t/1"},
			b: []string{"assigned gen=2 t=300 t/1"}},
		{name: "assigned before it was released",
			a:       []string{"assigned gen=1 t=100 t/0 t/1", "revoked gen=2 t=400 t/1"},
			b:       []string{"assigned gen=2 t=300 t/1"},
			wantErr: "partition 1 assigned to b"},
		{name: "never released",
			a:       []string{"assigned gen=1 t=100 t/0"},
			b:       []string{"assigned gen=2 t=300 t/0"},
			wantErr: "partition 0 assigned to b"},
		{name: "released by the process's exit",
			a: []string{"assigned gen=1 t=100 t/0", "exit"},
			b: []string{"assigned gen=2 t=300 t/0"}},
		{name: "lost counts as released",
			a: []string{"assigned gen=1 t=100 t/0", "lost gen=1 t=200 t/0"},
			b: []string{"assigned gen=2 t=300 t/0"}},
		{name: "an eager member gets back what it revoked",
			a: []string{"assigned gen=1 t=100 t/0 t/1", "revoked gen=1 t=200 t/0 t/1", "assigned gen=2 t=300 t/0"},
			b: []string{"assigned gen=2 t=310 t/1"}},
		{name: "a tie in the clocks is forgiven",
			a: []string{"assigned gen=1 t=100 t/0", "revoked gen=2 t=300 t/0"},
			b: []string{"assigned gen=2 t=300 t/0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := javaNoDoubleOwnership([]*procMember{javaFakeMember("a", tt.a...), javaFakeMember("b", tt.b...)})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v; want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestJavaMemberRound_ReconstructsWhatTheMemberBroughtToARebalance(t *testing.T) {
	cooperative := []string{
		"assigned gen=1 t=1 t/0 t/1 t/2",
		"revoked gen=2 t=2 t/2",
		"assigned gen=2 t=3",
		"t/0@5",
		"assigned gen=3 t=4 t/4",
	}
	eager := []string{
		"assigned gen=1 t=1 t/0 t/1",
		"revoked gen=1 t=2 t/0 t/1",
		"assigned gen=2 t=3 t/0 t/3",
	}
	tests := []struct {
		name   string
		lines  []string
		gen    int32
		want   javaRound
		wantOK bool
	}{
		{name: "cooperative: holds the rest of a revocation", lines: cooperative, gen: 3, wantOK: true,
			want: javaRound{owned: []int32{0, 1}, ownedGen: 2, previous: []int32{0, 1}}},
		{name: "cooperative: holds its first assignment", lines: cooperative, gen: 2, wantOK: true,
			want: javaRound{owned: []int32{0, 1, 2}, ownedGen: 1, previous: []int32{0, 1, 2}}},
		{name: "a new member brings nothing", lines: cooperative, gen: 1, wantOK: true,
			want: javaRound{owned: []int32{}, ownedGen: -1}},
		{name: "eager: revoked everything, was assigned the rest", lines: eager, gen: 2, wantOK: true,
			want: javaRound{owned: []int32{}, ownedGen: -1, previous: []int32{0, 1}}},
		{name: "not yet assigned the generation", lines: eager, gen: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := javaFakeMember("m", tt.lines...).round(tt.gen)
			if ok != tt.wantOK || !slices.Equal(got.owned, tt.want.owned) || got.ownedGen != tt.want.ownedGen || !slices.Equal(got.previous, tt.want.previous) {
				t.Errorf("round(%d) = %+v, %v; want %+v, %v", tt.gen, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestJavaMemberLine_ReadsCallbacksAndRecordsOfItsTopicOnly(t *testing.T) {
	m := javaFakeMember("m",
		"ready",
		"assigned gen=4 t=1700000000123456 t/0 t/2",
		"t/0@7",
		"t/1@3", // not owned: a stray
		"other/0@1",
		"closing",
		"revoked gen=4 t=1700000000200000 t/0",
	)
	if got := m.ownedNow(); !slices.Equal(got, []int32{2}) {
		t.Errorf("owns %v; want [2]", got)
	}
	if len(m.events) != 2 || m.events[0].gen != 4 || m.events[0].at.UnixMicro() != 1700000000123456 || m.events[0].closing || !m.events[1].closing {
		t.Errorf("events %+v", m.events)
	}
	if !slices.Equal(m.strays, []string{"t/1@3"}) || len(m.read) != 2 {
		t.Errorf("strays %v, reads %v", m.strays, m.read)
	}
}

func TestProcMemberLine_ReadsThePythonFormWithoutGenerationOrClock(t *testing.T) {
	before := time.Now()
	m := javaFakeMember("m",
		"assigned t/0 t/1",
		"t/1@4",
		"revoked t/1",
		"t/1@5", // no longer owned: a stray
		"closing",
		"revoked t/0",
	)
	if got := m.ownedNow(); len(got) != 0 {
		t.Errorf("owns %v after revoking everything", got)
	}
	if len(m.events) != 3 {
		t.Fatalf("events %+v; want 3 callbacks", m.events)
	}
	for _, ev := range m.events {
		if ev.gen != -1 || ev.at.Before(before) {
			t.Errorf("%+v: want generation -1 and the time the line was read", ev)
		}
	}
	if !slices.Equal(m.events[0].partitions, []int32{0, 1}) || m.events[2].closing != true || m.events[1].closing {
		t.Errorf("events %+v", m.events)
	}
	if got := m.revokedSince(0); !slices.Equal(got, []int32{1}) {
		t.Errorf("revokedSince(0) = %v; want [1]: a revocation on shutdown does not count", got)
	}
	if !slices.Equal(m.strays, []string{"t/1@5"}) {
		t.Errorf("strays %v", m.strays)
	}
}

func TestReadAllOnce_FailsOnRecordsReadTwiceOrWhileNotOwned(t *testing.T) {
	end := map[int32]int64{0: 2, 1: 1}
	tests := []struct {
		name    string
		a, b    []string
		wantErr string
	}{
		{name: "each record once", a: []string{"assigned t/0", "t/0@0", "t/0@1"}, b: []string{"assigned t/1", "t/1@0"}},
		{name: "a record read by two members", a: []string{"assigned t/0", "t/0@0", "t/0@1"}, b: []string{"assigned t/0 t/1", "t/1@0", "t/0@1"},
			wantErr: "more than once"},
		{name: "a record read twice by one member", a: []string{"assigned t/0 t/1", "t/0@0", "t/0@1", "t/1@0", "t/0@1"},
			wantErr: "more than once"},
		{name: "a record read while not owned", a: []string{"assigned t/0", "t/0@0", "t/0@1", "t/1@0"},
			wantErr: "did not own"},
		{name: "a record missing", a: []string{"assigned t/0", "t/0@0"}, b: []string{"assigned t/1", "t/1@0"},
			wantErr: "read 2 of 3 records"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err := readAllOnce(ctx, []*procMember{javaFakeMember("a", tt.a...), javaFakeMember("b", tt.b...)}, end)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v; want one containing %q", err, tt.wantErr)
			}
		})
	}
}
