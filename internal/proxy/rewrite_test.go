package proxy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const fuzzHost = "proxy.example"

// fuzzAdvertise advertises nodes 0..999 at fuzzHost:9000+node and refuses
// the rest, as a proxy that cannot open a listener would.
func fuzzAdvertise(node int32, _ string, _ int32) (string, int32, bool) {
	if node < 0 || node >= 1000 {
		return "", -1, false
	}
	return fuzzHost, 9000 + node, true
}

// checkAdvertised returns an error naming the first address in resp that
// is not the advertised one for its node.
func checkAdvertised(resp kmsg.Response) error {
	bad := func(node int32, host string, port int32) error {
		h, p, ok := fuzzAdvertise(node, "", 0)
		if !ok || host != h || port != p {
			return fmt.Errorf("node %d at %s:%d", node, host, port)
		}
		return nil
	}
	coord := func(node int32, host string, port int32) error {
		if node < 0 && host == "" {
			return nil // names no broker
		}
		return bad(node, host, port)
	}
	var errs []error
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for _, b := range r.Brokers {
			errs = append(errs, bad(b.NodeID, b.Host, b.Port))
		}
	case *kmsg.FindCoordinatorResponse:
		if r.Version < 4 {
			errs = append(errs, coord(r.NodeID, r.Host, r.Port))
		}
		for _, c := range r.Coordinators {
			errs = append(errs, coord(c.NodeID, c.Host, c.Port))
		}
	case *kmsg.DescribeClusterResponse:
		for _, b := range r.Brokers {
			errs = append(errs, bad(b.NodeID, b.Host, b.Port))
		}
	case *kmsg.ProduceResponse:
		for _, b := range r.Brokers {
			errs = append(errs, bad(b.NodeID, b.Host, b.Port))
		}
	case *kmsg.FetchResponse:
		for _, b := range r.Brokers {
			errs = append(errs, bad(b.NodeID, b.Host, b.Port))
		}
	}
	return errors.Join(errs...)
}

// rewrittenKeys returns the keys of the responses whose broker addresses
// the proxy rewrites.
func rewrittenKeys() []int16 {
	return []int16{int16(kmsg.Produce), int16(kmsg.Fetch), int16(kmsg.Metadata), int16(kmsg.FindCoordinator), int16(kmsg.DescribeCluster)}
}

// sampleResponses returns, per rewritten key and version, a response
// naming upstream brokers (some of which cannot be advertised).
func sampleResponses() []kmsg.Response {
	rack := "r1"
	var out []kmsg.Response
	for _, key := range rewrittenKeys() {
		proto := kmsg.ResponseForKey(key)
		for v := int16(0); v <= proto.MaxVersion(); v++ {
			if !namesBrokers(key, v) {
				continue
			}
			resp := kmsg.ResponseForKey(key)
			resp.SetVersion(v)
			switch r := resp.(type) {
			case *kmsg.MetadataResponse:
				r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "up1", Port: 9092, Rack: &rack}, {NodeID: 5000, Host: "far", Port: 1}, {NodeID: 2, Host: "up2", Port: 9092}}
			case *kmsg.FindCoordinatorResponse:
				r.NodeID, r.Host, r.Port = 3, "up3", 9092
				r.Coordinators = []kmsg.FindCoordinatorResponseCoordinator{{Key: "a", NodeID: 3, Host: "up3", Port: 9092}, {Key: "b", NodeID: -1, Host: "", Port: -1, ErrorCode: 15}, {Key: "c", NodeID: 7000, Host: "far", Port: 1}}
			case *kmsg.DescribeClusterResponse:
				r.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: 0, Host: "up0", Port: 9092}, {NodeID: 4, Host: "up4", Port: 9092, Rack: &rack}}
			case *kmsg.ProduceResponse:
				r.Brokers = []kmsg.ProduceResponseBroker{{NodeID: 2, Host: "up2", Port: 9092}}
			case *kmsg.FetchResponse:
				r.Brokers = []kmsg.FetchResponseBroker{{NodeID: 2, Host: "up2", Port: 9092}, {NodeID: -4, Host: "neg", Port: 9}}
			}
			out = append(out, resp)
		}
	}
	return out
}

func TestRewriteAddresses_EveryVersionAdvertisesOnlyProxyAddresses(t *testing.T) {
	for _, resp := range sampleResponses() {
		name := fmt.Sprintf("%s v%d", kmsg.NameForKey(resp.Key()), resp.GetVersion())
		out, err := rewriteResponseBody(resp.Key(), resp.GetVersion(), resp.AppendTo(nil), fuzzAdvertise, nil)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		back, err := decodeResponse(resp.Key(), resp.GetVersion(), out)
		if err != nil {
			t.Errorf("%s: rewritten response does not decode: %v", name, err)
			continue
		}
		if err := checkAdvertised(back); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		// Brokers that cannot be advertised are dropped, never leaked.
		switch r := back.(type) {
		case *kmsg.MetadataResponse:
			if len(r.Brokers) != 2 {
				t.Errorf("%s: %d brokers, want the 2 advertisable", name, len(r.Brokers))
			}
		case *kmsg.FindCoordinatorResponse:
			if r.GetVersion() >= 4 {
				if c := r.Coordinators[2]; c.ErrorCode != 15 || c.NodeID != -1 {
					t.Errorf("%s: unadvertisable coordinator answered %+v, want COORDINATOR_NOT_AVAILABLE", name, c)
				}
			}
		}
	}
}

func TestRewriteAddresses_ProduceAndFetchWithoutEndpointsPassRaw(t *testing.T) {
	for _, resp := range []kmsg.Response{kmsg.NewPtrProduceResponse(), kmsg.NewPtrFetchResponse()} {
		resp.SetVersion(resp.MaxVersion())
		if _, err := rewriteResponseBody(resp.Key(), resp.GetVersion(), resp.AppendTo(nil), fuzzAdvertise, nil); !errors.Is(err, errNotRewritten) {
			t.Errorf("%s with no node endpoints: %v, want it forwarded unchanged", kmsg.NameForKey(resp.Key()), err)
		}
	}
}

// FuzzRewriteAddresses feeds arbitrary bytes, as every rewritten response
// key and version, to the rewriter: it must not panic, and whatever it
// writes must decode and name only advertised addresses.
func FuzzRewriteAddresses(f *testing.F) {
	for _, resp := range sampleResponses() {
		f.Add(uint8(slices.Index(rewrittenKeys(), resp.Key())), uint8(resp.GetVersion()), resp.AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, k, v uint8, body []byte) {
		keys := rewrittenKeys()
		key := keys[int(k)%len(keys)]
		version := int16(v % uint8(kmsg.ResponseForKey(key).MaxVersion()+1))
		if !namesBrokers(key, version) {
			return
		}
		out, err := rewriteResponseBody(key, version, body, fuzzAdvertise, nil)
		if errors.Is(err, errNotRewritten) {
			in, derr := decodeResponse(key, version, body)
			if derr != nil {
				t.Fatalf("not rewritten, yet does not decode: %v", derr)
			}
			if err := checkAdvertised(in); err != nil {
				t.Fatalf("forwarded unchanged with upstream addresses: %v", err)
			}
			return
		}
		if err != nil {
			return // undecodable: the connection is closed
		}
		in, inErr := decodeResponse(key, version, body)
		back, err := decodeResponse(key, version, out)
		if err != nil {
			if key == int16(kmsg.Metadata) && inErr != nil {
				// A Metadata response's topics pass as they came, even
				// undecodable ones; its broker list is rewritten in full.
				if err := checkMetadataBrokerList(version, out); err != nil {
					t.Fatal(err)
				}
				return
			}
			t.Fatalf("rewritten response does not decode: %v", err)
		}
		if err := checkAdvertised(back); err != nil {
			t.Fatal(err)
		}
		if key == int16(kmsg.Metadata) && inErr == nil {
			// Compared decoded: the bytes copied as they came may encode
			// the same thing differently (a negative array length is null).
			want, err := decodeResponse(key, version, fullRewrite(t, in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, want) {
				t.Fatalf("Metadata v%d rewritten in place\n%+v\nfull rewrite\n%+v", version, back, want)
			}
		}
	})
}

// fullRewrite rewrites a decoded response's addresses and encodes it: what
// the proxy sends for a response it rewrites whole.
func fullRewrite(t *testing.T, resp kmsg.Response) []byte {
	t.Helper()
	rewriteAddresses(resp, fuzzAdvertise)
	return resp.AppendTo(nil)
}

// checkMetadataBrokerList walks the broker list of a Metadata response body
// and returns an error naming the first address that is not advertised.
func checkMetadataBrokerList(version int16, body []byte) error {
	var errs []error
	_, err := rewriteMetadataBrokers(version, body, func(node int32, host string, port int32) (string, int32, bool) {
		if h, p, ok := fuzzAdvertise(node, "", 0); !ok || host != h || port != p {
			errs = append(errs, fmt.Errorf("node %d at %s:%d", node, host, port))
		}
		return host, port, true
	}, nil)
	if err != nil {
		return fmt.Errorf("rewritten broker list does not parse: %w", err)
	}
	return errors.Join(errs...)
}

// TestRewriteMetadataBrokers_MatchesTheFullRewriteOnEveryVersion builds
// random Metadata responses (brokers the proxy cannot advertise, racks,
// unknown tags, topics with partitions) at every version and checks that
// rewriting the broker list in place gives the very bytes that decoding,
// rewriting and encoding the whole response gives.
func TestRewriteMetadataBrokers_MatchesTheFullRewriteOnEveryVersion(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string { return strings.Repeat("h", rng.IntN(40)) + strconv.Itoa(rng.IntN(1000)) }
	maxVersion := kmsg.NewPtrMetadataResponse().MaxVersion()
	for version := int16(0); version <= maxVersion; version++ {
		for range 200 {
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = version
			resp.ThrottleMillis = rng.Int32()
			for range rng.IntN(6) {
				b := kmsg.NewMetadataResponseBroker()
				b.NodeID = int32(rng.IntN(1300)) - 100 // some cannot be advertised
				b.Host, b.Port = word(), rng.Int32N(65536)
				if rng.IntN(2) == 0 {
					rack := word()
					b.Rack = &rack
				}
				if rng.IntN(4) == 0 {
					b.UnknownTags.Set(uint32(rng.IntN(50)), []byte(word()))
				}
				resp.Brokers = append(resp.Brokers, b)
			}
			if rng.IntN(2) == 0 {
				id := word()
				resp.ClusterID = &id
			}
			resp.ControllerID = rng.Int32N(5)
			for range rng.IntN(4) {
				mt := kmsg.NewMetadataResponseTopic()
				name := word()
				mt.Topic = &name
				for p := range int32(rng.IntN(8)) {
					mp := kmsg.NewMetadataResponseTopicPartition()
					mp.Partition, mp.Leader = p, rng.Int32N(5)
					mp.Replicas = []int32{mp.Leader, rng.Int32N(5)}
					mp.ISR = mp.Replicas[:1]
					mt.Partitions = append(mt.Partitions, mp)
				}
				resp.Topics = append(resp.Topics, mt)
			}
			// A gateway cluster's peers, one of them perhaps a listed
			// node (which is then not listed twice).
			var peers []Peer
			for range rng.IntN(3) {
				peers = append(peers, Peer{Node: 1<<30 + rng.Int32N(3), Host: word(), Port: rng.Int32N(65536)})
			}
			if len(resp.Brokers) > 0 && rng.IntN(3) == 0 {
				peers = append(peers, Peer{Node: resp.Brokers[0].NodeID, Host: word(), Port: 1})
			}
			body := resp.AppendTo(nil)
			got, err := rewriteMetadataBrokers(version, body, fuzzAdvertise, peers)
			if err != nil {
				t.Fatalf("v%d: %v", version, err)
			}
			in, err := decodeResponse(int16(kmsg.Metadata), version, body)
			if err != nil {
				t.Fatalf("v%d: %v", version, err)
			}
			rewriteAddresses(in, fuzzAdvertise)
			appendPeers(in.(*kmsg.MetadataResponse), peers)
			if want := in.AppendTo(nil); !slices.Equal(got, want) {
				t.Fatalf("v%d: rewritten in place\n%x\nwant\n%x", version, got, want)
			}
			out, err := decodeResponse(int16(kmsg.Metadata), version, got)
			if err != nil {
				t.Fatalf("v%d: the rewritten answer does not decode: %v", version, err)
			}
			upstream := map[int32]int{}
			for _, b := range resp.Brokers {
				if _, _, ok := fuzzAdvertise(b.NodeID, "", 0); ok {
					upstream[b.NodeID]++ // kept
				}
			}
			seen := map[int32]int{}
			for _, b := range out.(*kmsg.MetadataResponse).Brokers {
				seen[b.NodeID]++
			}
			for _, pr := range peers {
				if want := max(upstream[pr.Node], 1); seen[pr.Node] != want {
					t.Fatalf("v%d: peer node %d listed %d times, want %d", version, pr.Node, seen[pr.Node], want)
				}
			}
		}
	}
}

func testTable() *apiTable {
	t := &apiTable{}
	for _, k := range []int16{int16(kmsg.Produce), int16(kmsg.Fetch), int16(kmsg.Metadata), int16(kmsg.ApiVersions), int16(kmsg.JoinGroup)} {
		t.has[k], t.min[k], t.max[k] = true, 1, kmsgMax(k)-1
	}
	return t
}

// FuzzRewriteApiVersions feeds arbitrary bytes as every ApiVersions
// response version: no panic, and a rewritten answer offers only what the
// table allows.
func FuzzRewriteApiVersions(f *testing.F) {
	for v := int16(0); v <= kmsgMax(int16(kmsg.ApiVersions)); v++ {
		r := kmsg.NewPtrApiVersionsResponse()
		r.Version = v
		for k := int16(0); k < 100; k += 3 {
			r.ApiKeys = append(r.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: 0, MaxVersion: 40})
		}
		f.Add(uint8(v), r.AppendTo(nil))
	}
	tbl := testTable()
	f.Fuzz(func(t *testing.T, v uint8, body []byte) {
		version := int16(v % uint8(kmsgMax(int16(kmsg.ApiVersions))+1))
		out, err := rewriteApiVersions(version, body, tbl)
		if err != nil {
			return
		}
		back, err := decodeResponse(int16(kmsg.ApiVersions), version, out)
		if err != nil {
			t.Fatalf("rewritten ApiVersions does not decode: %v", err)
		}
		for _, k := range back.(*kmsg.ApiVersionsResponse).ApiKeys {
			if k.ApiKey < 0 || k.ApiKey > maxKey || !tbl.has[k.ApiKey] || k.MinVersion < tbl.min[k.ApiKey] || k.MaxVersion > tbl.max[k.ApiKey] || k.MinVersion > k.MaxVersion {
				t.Fatalf("offers key %d v%d-v%d", k.ApiKey, k.MinVersion, k.MaxVersion)
			}
		}
	})
}

func TestProduceAcks_MatchesKmsgForEveryVersion(t *testing.T) {
	txn := "txn-1"
	for v := int16(0); v <= kmsgMax(int16(kmsg.Produce)); v++ {
		for _, id := range []*string{nil, &txn} {
			for _, acks := range []int16{0, 1, -1} {
				req := kmsg.NewPtrProduceRequest()
				req.Version = v
				req.TransactionID = id
				req.Acks = acks
				req.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 1, Records: []byte{1, 2, 3}}}}}
				got, err := produceAcks(req.AppendTo(nil), v, req.IsFlexible())
				if err != nil || got != acks {
					t.Errorf("v%d txn %v acks %d: read %d, %v", v, id != nil, acks, got, err)
				}
			}
		}
	}
}

// FuzzProduceAcks: arbitrary request bytes never panic, and when kmsg can
// decode them the acks agree.
func FuzzProduceAcks(f *testing.F) {
	req := kmsg.NewPtrProduceRequest()
	for v := int16(0); v <= kmsgMax(int16(kmsg.Produce)); v++ {
		req.Version = v
		f.Add(uint8(v), req.AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, v uint8, body []byte) {
		version := int16(v % uint8(kmsgMax(int16(kmsg.Produce))+1))
		req := kmsg.NewPtrProduceRequest()
		req.Version = version
		got, err := produceAcks(body, version, req.IsFlexible())
		if req.ReadFrom(body) == nil && (err != nil || got != req.Acks) {
			t.Fatalf("acks %d, %v; kmsg reads %d", got, err, req.Acks)
		}
	})
}

// FuzzFetchHasTopLevelTags: whenever kmsg finds node endpoints in a Fetch
// response, the walker must have said there are tags to look at.
func FuzzFetchHasTopLevelTags(f *testing.F) {
	for v := int16(16); v <= kmsgMax(int16(kmsg.Fetch)); v++ {
		r := kmsg.NewPtrFetchResponse()
		r.Version = v
		tp := kmsg.NewFetchResponseTopic()
		pp := kmsg.NewFetchResponseTopicPartition()
		pp.RecordBatches = []byte{1, 2, 3, 4}
		pp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 1}}
		tp.Partitions = append(tp.Partitions, pp, pp)
		r.Topics = append(r.Topics, tp)
		f.Add(uint8(v), r.AppendTo(nil))
		r.Brokers = []kmsg.FetchResponseBroker{{NodeID: 1, Host: "h", Port: 1}}
		f.Add(uint8(v), r.AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, v uint8, body []byte) {
		version := 16 + int16(v%uint8(kmsgMax(int16(kmsg.Fetch))-15))
		has := fetchHasTopLevelTags(body)
		resp, err := decodeResponse(int16(kmsg.Fetch), version, body)
		if err != nil {
			return
		}
		if r := resp.(*kmsg.FetchResponse); len(r.Brokers) > 0 && !has {
			t.Fatalf("walker missed %d node endpoints", len(r.Brokers))
		}
	})
}

func TestFetchHasTopLevelTags_AgreesWithKmsgOnWellFormedResponses(t *testing.T) {
	for v := int16(16); v <= kmsgMax(int16(kmsg.Fetch)); v++ {
		for _, brokers := range [][]kmsg.FetchResponseBroker{nil, {{NodeID: 2, Host: "up", Port: 9}}} {
			r := kmsg.NewPtrFetchResponse()
			r.Version = v
			for range 3 {
				tp := kmsg.NewFetchResponseTopic()
				for p := range 4 {
					pp := kmsg.NewFetchResponseTopicPartition()
					pp.Partition = int32(p)
					pp.RecordBatches = make([]byte, 100*p)
					tp.Partitions = append(tp.Partitions, pp)
				}
				r.Topics = append(r.Topics, tp)
			}
			r.Brokers = brokers
			if got := fetchHasTopLevelTags(r.AppendTo(nil)); got != (len(brokers) > 0) {
				t.Errorf("v%d with %d endpoints: walker says tags %v", v, len(brokers), got)
			}
		}
	}
}

// FuzzProduceHasTopLevelTags: whenever kmsg finds node endpoints in a
// Produce response, the walker must have said there are tags to look at.
func FuzzProduceHasTopLevelTags(f *testing.F) {
	for v := int16(10); v <= kmsgMax(int16(kmsg.Produce)); v++ {
		for _, brokers := range [][]kmsg.ProduceResponseBroker{nil, {{NodeID: 1, Host: "h", Port: 1}}} {
			r := kmsg.NewPtrProduceResponse()
			r.Version = v
			tp := kmsg.NewProduceResponseTopic()
			tp.Topic = "t"
			pp := kmsg.NewProduceResponseTopicPartition()
			pp.ErrorRecords = []kmsg.ProduceResponseTopicPartitionErrorRecord{{RelativeOffset: 1}}
			tp.Partitions = append(tp.Partitions, pp, pp)
			r.Topics = append(r.Topics, tp)
			r.Brokers = brokers
			f.Add(uint8(v), r.AppendTo(nil))
		}
	}
	f.Fuzz(func(t *testing.T, v uint8, body []byte) {
		version := 10 + int16(v%uint8(kmsgMax(int16(kmsg.Produce))-9))
		has := produceHasTopLevelTags(body, version)
		resp, err := decodeResponse(int16(kmsg.Produce), version, body)
		if err != nil {
			return
		}
		if r := resp.(*kmsg.ProduceResponse); len(r.Brokers) > 0 && !has {
			t.Fatalf("walker missed %d node endpoints", len(r.Brokers))
		}
	})
}

func TestProduceHasTopLevelTags_AgreesWithKmsgOnWellFormedResponses(t *testing.T) {
	msg := "bad record"
	for v := int16(10); v <= kmsgMax(int16(kmsg.Produce)); v++ {
		for _, brokers := range [][]kmsg.ProduceResponseBroker{nil, {{NodeID: 2, Host: "up", Port: 9}}} {
			r := kmsg.NewPtrProduceResponse()
			r.Version = v
			for _, name := range []string{"a", "topic-b"} {
				tp := kmsg.NewProduceResponseTopic()
				tp.Topic = name
				for p := range 3 {
					pp := kmsg.NewProduceResponseTopicPartition()
					pp.Partition = int32(p)
					pp.ErrorMessage = &msg
					pp.ErrorRecords = []kmsg.ProduceResponseTopicPartitionErrorRecord{{RelativeOffset: 3, ErrorMessage: &msg}}
					tp.Partitions = append(tp.Partitions, pp)
				}
				r.Topics = append(r.Topics, tp)
			}
			r.Brokers = brokers
			if got := produceHasTopLevelTags(r.AppendTo(nil), v); got != (len(brokers) > 0) {
				t.Errorf("v%d with %d endpoints: walker says tags %v", v, len(brokers), got)
			}
		}
	}
}
