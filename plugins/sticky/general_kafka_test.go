package sticky

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/internal/scenario"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// kafkaGeneralRef is a Java program that prints the target assignment of
// Kafka's own AbstractStickyAssignor for the groups on its input, with
// ownership taken as CooperativeStickyAssignor takes it from a v2+
// subscription (owned partitions and generation), or of Kafka's
// StickyAssignor (ownership in user data) for eager groups. It is compiled against
// the kafka-clients jar when one is at hand.
const kafkaGeneralRef = `
import java.io.*;
import java.nio.ByteBuffer;
import java.util.*;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.internals.AbstractStickyAssignor;
import org.apache.kafka.common.*;

public class GeneralRef {
    static class Ref extends AbstractStickyAssignor {
        protected MemberData memberData(Subscription s) {
            return new MemberData(s.ownedPartitions(), s.generationId());
        }
        public String name() { return "ref"; }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        PrintWriter out = new PrintWriter(new BufferedWriter(new OutputStreamWriter(System.out)));
        Map<Integer, Node> brokers = null;
        Map<String, List<PartitionInfo>> topics = null;
        Map<String, Subscription> subs = null;
        String id = null;
        boolean eager = false;
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ");
            switch (f[0]) {
                case "C":
                    id = f[1]; eager = f[2].equals("sticky"); brokers = new HashMap<>(); topics = new HashMap<>(); subs = new HashMap<>();
                    break;
                case "B":
                    brokers.put(Integer.parseInt(f[1]), new Node(Integer.parseInt(f[1]), "", 1, f[2].equals("-") ? null : f[2]));
                    break;
                case "T":
                    topics.put(f[1], new ArrayList<>());
                    break;
                case "P": {
                    String[] ids = f[3].split(",");
                    Node[] rs = new Node[ids.length];
                    for (int i = 0; i < ids.length; i++) rs[i] = brokers.get(Integer.parseInt(ids[i]));
                    topics.get(f[1]).add(new PartitionInfo(f[1], Integer.parseInt(f[2]), rs[0], rs, rs));
                    break;
                }
                case "M": {
                    List<TopicPartition> owned = new ArrayList<>();
                    if (!f[5].equals("-"))
                        for (String tp : f[5].split(",")) {
                            int k = tp.lastIndexOf('-');
                            owned.add(new TopicPartition(tp.substring(0, k), Integer.parseInt(tp.substring(k + 1))));
                        }
                    Optional<String> rack = f[2].equals("-") ? Optional.empty() : Optional.of(f[2]);
                    if (eager) {
                        // StickyAssignor reads ownership from user data only.
                        ByteBuffer ud = f[6].equals("-") ? null : ByteBuffer.wrap(HexFormat.of().parseHex(f[6]));
                        subs.put(f[1], new Subscription(Arrays.asList(f[4].split(",")), ud, Collections.emptyList(), -1, rack));
                    } else {
                        subs.put(f[1], new Subscription(Arrays.asList(f[4].split(",")), null, owned, Integer.parseInt(f[3]), rack));
                    }
                    break;
                }
                case "E": {
                    // The consumer leader asks only for the subscribed topics.
                    Set<String> subscribed = new HashSet<>();
                    for (Subscription s : subs.values()) subscribed.addAll(s.topics());
                    topics.keySet().retainAll(subscribed);
                    Map<String, List<TopicPartition>> a;
                    try {
                        a = eager ? new StickyAssignor().assignPartitions(topics, subs) : new Ref().assignPartitions(topics, subs);
                    } catch (RuntimeException e) {
                        // Kafka fails on some inputs; there is nothing to compare.
                        out.println("X " + id + " " + e.getStackTrace()[0]);
                        break;
                    }
                    out.println("R " + id);
                    for (String m : new TreeSet<>(a.keySet())) {
                        List<String> ps = new ArrayList<>();
                        for (TopicPartition tp : a.get(m)) ps.add(tp.toString());
                        Collections.sort(ps);
                        out.println("A " + m + " " + (ps.isEmpty() ? "-" : String.join(",", ps)));
                    }
                    out.println("E");
                    break;
                }
            }
        }
        out.flush();
    }
}
`

// kafkaClientsJars returns the kafka-clients and slf4j-api jars of the
// Kafka distribution in the repository's cache (make kafka-cache), or of
// KAFKA_LIBS, or nothing.
func kafkaClientsJars() []string {
	dirs, _ := filepath.Glob("../../.cache/kafka/*/libs")
	if d := os.Getenv("KAFKA_LIBS"); d != "" {
		dirs = []string{d}
	}
	for _, d := range dirs {
		clients, _ := filepath.Glob(filepath.Join(d, "kafka-clients-*.jar"))
		slf4j, _ := filepath.Glob(filepath.Join(d, "slf4j-api-*.jar"))
		if len(clients) > 0 && len(slf4j) > 0 {
			return []string{clients[0], slf4j[0]}
		}
	}
	return nil
}

// generalCase is a random group with differing subscriptions: its scenario
// for this package and the same group in GeneralRef's input format.
type generalCase struct {
	sc   scenario.Scenario
	java string
}

// randomGeneralCase draws a small group whose members do not all subscribe
// alike, with racks on some brokers and members, replicas on one or two
// brokers, and disjoint owned partitions in mixed generations (a member's
// owned partitions may lie outside its subscription).
func randomGeneralCase(rnd *rand.Rand, id int) generalCase {
	var sc scenario.Scenario
	sc.Protocol = CooperativeName
	if rnd.IntN(3) == 0 {
		sc.Protocol = EagerName
	}
	sc.Generation = 5
	var j strings.Builder
	fmt.Fprintf(&j, "C %d %s\n", id, sc.Protocol)
	rackNames := []string{"a", "b", "c"}
	racked := rnd.IntN(4) > 0
	for b := range 3 {
		br := scenario.Broker{ID: int32(b)}
		if racked {
			br.Rack = rackNames[b]
		}
		sc.Brokers = append(sc.Brokers, br)
		fmt.Fprintf(&j, "B %d %s\n", b, orDash(br.Rack))
	}
	nt := 2 + rnd.IntN(5)
	var names []string
	count := map[string]int{}
	for t := range nt {
		name := fmt.Sprintf("t%d", t+1)
		names = append(names, name)
		n := 1 + rnd.IntN(10)
		count[name] = n
		fmt.Fprintf(&j, "T %s\n", name)
		tp := scenario.Topic{Name: name, Partitions: []scenario.Partition{}}
		for p := range n {
			reps := rnd.Perm(3)[:1+rnd.IntN(2)]
			r32 := make([]int32, len(reps))
			strs := make([]string, len(reps))
			for i, r := range reps {
				r32[i] = int32(r)
				strs[i] = fmt.Sprint(r)
			}
			tp.Partitions = append(tp.Partitions, scenario.Partition{ID: int32(p), Replicas: r32, ISR: r32})
			fmt.Fprintf(&j, "P %s %d %s\n", name, p, strings.Join(strs, ","))
		}
		sc.Topics = append(sc.Topics, tp)
	}
	nm := 2 + rnd.IntN(7)
	var subs [][]string
	if rnd.IntN(5) == 0 {
		// The same existing topics for all, and one member also names a
		// topic that does not exist: Kafka's subscriptions differ, so it
		// takes the general path all the same.
		var all []string
		for _, name := range names {
			if rnd.IntN(2) == 0 {
				all = append(all, name)
			}
		}
		if len(all) == 0 {
			all = names[:1]
		}
		for range nm {
			subs = append(subs, all)
		}
		k := rnd.IntN(nm)
		subs[k] = append(slices.Clone(all), "tx")
	}
	for subs == nil {
		for range nm {
			var s []string
			for _, name := range names {
				if rnd.IntN(2) == 0 {
					s = append(s, name)
				}
			}
			if len(s) == 0 {
				s = append(s, names[rnd.IntN(nt)])
			}
			subs = append(subs, s)
		}
		if !slices.ContainsFunc(subs[1:], func(s []string) bool { return !slices.Equal(s, subs[0]) }) {
			subs = nil
		}
	}
	owned := make([]map[string][]int32, nm)
	for _, name := range names {
		for p := range count[name] {
			if rnd.IntN(5) < 3 {
				m := rnd.IntN(nm)
				if owned[m] == nil {
					owned[m] = map[string][]int32{}
				}
				owned[m][name] = append(owned[m][name], int32(p))
			}
		}
	}
	// Half the groups report one generation; the others mix older ones
	// in, which Kafka's prevAssignment then prefers when it balances.
	gens := []int32{4}
	if rnd.IntN(2) == 0 {
		gens = []int32{4, 4, 4, 3, 2, -1}
	}
	for m := range nm {
		mem := scenario.Member{
			ID:         fmt.Sprintf("member-%d", rnd.IntN(1000)*100+m),
			Topics:     subs[m],
			Owned:      owned[m],
			Generation: gens[rnd.IntN(len(gens))],
		}
		if racked || rnd.IntN(2) == 0 {
			mem.Rack = []string{"", "a", "b", "c"}[rnd.IntN(4)]
		}
		var tps []string
		for _, name := range names {
			for _, p := range owned[m][name] {
				tps = append(tps, fmt.Sprintf("%s-%d", name, p))
			}
		}
		own, ud := "-", "-"
		if len(tps) > 0 {
			own = strings.Join(tps, ",")
		}
		if sc.Protocol == EagerName {
			// The eager assignor's ownership and generation travel in
			// its user data (v0, without a generation, for -1).
			b := stickyUserData(tps, mem.Generation, mem.Generation >= 0)
			mem.UserData = base64.StdEncoding.EncodeToString(b)
			ud = hex.EncodeToString(b)
			mem.Owned, mem.Generation = nil, -1
		}
		fmt.Fprintf(&j, "M %s %s %d %s %s %s\n", mem.ID, orDash(mem.Rack), mem.Generation, strings.Join(subs[m], ","), own, ud)
		sc.Members = append(sc.Members, mem)
	}
	j.WriteString("E\n")
	return generalCase{sc: sc, java: j.String()}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatTarget writes resp in GeneralRef's output format.
func formatTarget(req *abi.Request, resp *abi.Response) []string {
	byMember := map[string][]string{}
	for _, ma := range resp.Members {
		id := req.Members[ma.Member].MemberID
		byMember[id] = byMember[id][:0:0]
		for _, tp := range ma.Partitions {
			for _, p := range tp.Partitions {
				byMember[id] = append(byMember[id], fmt.Sprintf("%s-%d", req.Topics[tp.Topic].Name, p))
			}
		}
	}
	var out []string
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range byMember {
			if !yield(id) {
				return
			}
		}
	}) {
		ps := byMember[id]
		slices.Sort(ps)
		s := "-"
		if len(ps) > 0 {
			s = strings.Join(ps, ",")
		}
		out = append(out, "A "+id+" "+s)
	}
	return out
}

// TestGeneral_MatchesKafkasGeneralAssignmentBuilder runs random groups with
// differing subscriptions through Kafka's own assignor (the kafka-clients
// jar from make kafka-cache, run by java) and through this package, and
// requires the same target assignment, partition for partition.
func TestGeneral_MatchesKafkasGeneralAssignmentBuilder(t *testing.T) {
	jars := kafkaClientsJars()
	javac, errC := exec.LookPath("javac")
	java, errJ := exec.LookPath("java")
	if len(jars) == 0 || errC != nil || errJ != nil {
		t.Skip("needs javac, java and the kafka-clients jar (make kafka-cache)")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "GeneralRef.java"), []byte(kafkaGeneralRef), 0o644); err != nil {
		t.Fatal(err)
	}
	cp := strings.Join(jars, string(os.PathListSeparator))
	if out, err := exec.Command(javac, "-cp", cp, "-d", dir, filepath.Join(dir, "GeneralRef.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	n := 400
	if testing.Short() {
		n = 100
	}
	rnd := rand.New(rand.NewPCG(7, 11))
	cases := make([]generalCase, n)
	var input strings.Builder
	for i := range cases {
		cases[i] = randomGeneralCase(rnd, i)
		input.WriteString(cases[i].java)
	}
	cmd := exec.Command(java, "-cp", cp+string(os.PathListSeparator)+dir, "GeneralRef")
	cmd.Stdin = strings.NewReader(input.String())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java: %v\n%s", err, stderr.String())
	}
	want := map[string][]string{}
	crashed := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	var cur string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "R "):
			cur = line[2:]
		case strings.HasPrefix(line, "X "):
			f := strings.Fields(line)
			crashed[f[1]] = true
			t.Logf("Kafka fails on case %s at %s", f[1], f[2])
		case strings.HasPrefix(line, "A "):
			want[cur] = append(want[cur], line)
		}
	}
	if len(want)+len(crashed) != n {
		t.Fatalf("java answered %d of %d cases", len(want), n)
	}
	failed, invalid := 0, 0
	for i, c := range cases {
		if crashed[fmt.Sprint(i)] {
			continue
		}
		req, _, err := c.sc.Request()
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		assign := AssignCooperative
		if c.sc.Protocol == EagerName {
			assign = AssignEager
		}
		resp, err := assign(req)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		got := formatTarget(req, resp)
		w := want[fmt.Sprint(i)]
		if !validFor(c.sc, w) {
			// Kafka hands a partition back to its previous-generation
			// owner even when that member no longer subscribes to its
			// topic; this package keeps assignments valid instead.
			invalid++
			continue
		}
		if !slices.Equal(got, w) {
			failed++
			if failed <= 5 {
				t.Errorf("case %d differs from Kafka:\n%s\ngot:\n%s\nkafka:\n%s", i, c.java, strings.Join(got, "\n"), strings.Join(w, "\n"))
			}
		}
	}
	t.Logf("%d cases compared; Kafka failed on %d and was invalid on %d", n-len(crashed)-invalid, len(crashed), invalid)
	if failed > 0 {
		t.Errorf("%d of %d cases differ from Kafka", failed, n-len(crashed)-invalid)
	}
}

// validFor reports whether every partition of lines (GeneralRef's output
// format) goes to a member that subscribes to its topic.
func validFor(sc scenario.Scenario, lines []string) bool {
	subs := map[string][]string{}
	for _, m := range sc.Members {
		subs[m.ID] = m.Topics
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if f[2] == "-" {
			continue
		}
		for _, tp := range strings.Split(f[2], ",") {
			if !slices.Contains(subs[f[1]], tp[:strings.LastIndex(tp, "-")]) {
				return false
			}
		}
	}
	return true
}
