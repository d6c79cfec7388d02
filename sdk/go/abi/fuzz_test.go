package abi_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// The fuzzers feed arbitrary bytes to the decoders, which face buffers from
// untrusted guests (responses, descriptions) and, inside a guest, from a host
// that may be newer or buggy (requests). Each decoder must never panic, must
// reject only with ErrMalformed or ErrVersion, and must accept only buffers
// that are the canonical encoding of what it returns: encode(decode(b)) == b.
//
// Seeds come from the golden vectors (f.Add) and from the checked-in corpus
// in testdata/fuzz, which TestFuzzSeedCorpus keeps in step with fuzzSeeds.

// addGoldenSeeds adds every golden vector of kind, valid or not.
func addGoldenSeeds(f *testing.F, kind string) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join(goldenDir, "*.bin"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no golden vectors in %s: %v", goldenDir, err)
	}
	for _, p := range paths {
		js, err := os.ReadFile(strings.TrimSuffix(p, ".bin") + ".json")
		if err != nil {
			f.Fatal(err)
		}
		if !bytes.Contains(js, []byte(`"kind": "`+kind+`"`)) {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// checkRejection fails unless a decoding error is one of the two the package
// documents, with no value beside it.
func checkRejection(t *testing.T, v any, err error) {
	t.Helper()
	if !reflect.ValueOf(v).IsNil() {
		t.Fatalf("decoder returned a value with error %v", err)
	}
	if !errors.Is(err, abi.ErrMalformed) && !errors.Is(err, abi.ErrVersion) {
		t.Fatalf("error %v wraps neither ErrMalformed nor ErrVersion", err)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	addGoldenSeeds(f, "request")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := abi.DecodeRequest(b)
		if err != nil {
			checkRejection(t, r, err)
			return
		}
		checkRequestReferences(t, r)
		enc := abi.AppendRequest(nil, r)
		if !bytes.Equal(enc, b) {
			t.Fatalf("accepted a non-canonical buffer\n  in: %x\n out: %x", b, enc)
		}
		again, err := abi.DecodeRequest(enc)
		if err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("decode(encode(x)) != x\n got: %+v\nwant: %+v", again, r)
		}
	})
}

// checkRequestReferences asserts what DecodeRequest promises: a guest can
// index with every decoded reference without checking it.
func checkRequestReferences(t *testing.T, r *abi.Request) {
	t.Helper()
	if r.RebalanceProtocol != abi.Eager && r.RebalanceProtocol != abi.Cooperative {
		t.Fatalf("rebalance protocol %d", r.RebalanceProtocol)
	}
	for i, tp := range r.Topics {
		if tp.PartitionCount < 0 {
			t.Fatalf("topic %d: partition count %d", i, tp.PartitionCount)
		}
		if !tp.Exists && (tp.PartitionCount != 0 || tp.Partitions != nil) {
			t.Fatalf("topic %d does not exist but has partitions", i)
		}
		if tp.Partitions != nil && len(tp.Partitions) != int(tp.PartitionCount) {
			t.Fatalf("topic %d: %d placements for %d partitions", i, len(tp.Partitions), tp.PartitionCount)
		}
		for p, part := range tp.Partitions {
			_ = r.ReplicaSets[part.Replicas]
			_ = r.ReplicaSets[part.ISR]
			_ = r.Replicas(int32(i), int32(p))
		}
	}
	inRange := func(what string, topic int32) {
		if topic < 0 && int(^topic) < len(r.TopicLists) {
			return // a topic list, checked below
		}
		if topic < 0 || int(topic) >= len(r.Topics) {
			t.Fatalf("%s topic index %d of %d", what, topic, len(r.Topics))
		}
	}
	for k, l := range r.TopicLists {
		if len(l) == 0 {
			t.Fatalf("topic list %d is empty", k)
		}
		for i, topic := range l {
			inRange("listed", topic)
			if topic < 0 || (i > 0 && topic <= l[i-1]) {
				t.Fatalf("topic list %d is not strictly ascending: %v", k, l)
			}
		}
	}
	for _, m := range r.Members {
		for _, topic := range m.Topics {
			inRange("subscribed", topic)
		}
		for _, tp := range m.Owned {
			inRange("owned", tp.Topic)
		}
		for _, tp := range m.Previous {
			inRange("previous", tp.Topic)
		}
	}
}

func FuzzDecodeResponse(f *testing.F) {
	addGoldenSeeds(f, "response")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := abi.DecodeResponse(b)
		if err != nil {
			checkRejection(t, r, err)
			return
		}
		if r.Error != "" && r.Members != nil {
			t.Fatalf("an error response decoded with assignments")
		}
		for _, ma := range r.Members {
			for _, tp := range ma.Partitions {
				if tp.Topic < 0 && r.TopicLists != nil && int(^tp.Topic) >= len(r.TopicLists) {
					t.Fatalf("entry refers to topic list %d of %d", ^tp.Topic, len(r.TopicLists))
				}
			}
		}
		enc := abi.AppendResponse(nil, r)
		if !bytes.Equal(enc, b) {
			t.Fatalf("accepted a non-canonical buffer\n  in: %x\n out: %x", b, enc)
		}
		again, err := abi.DecodeResponse(enc)
		if err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("decode(encode(x)) != x\n got: %+v\nwant: %+v", again, r)
		}
	})
}

func FuzzDecodeDescription(f *testing.F) {
	addGoldenSeeds(f, "description")
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := abi.DecodeDescription(b)
		if err != nil {
			checkRejection(t, d, err)
			return
		}
		for _, a := range d.Assignors {
			if a.Modes&^(abi.ModeEager|abi.ModeCooperative) != 0 {
				t.Fatalf("assignor %q decoded with undefined modes %#x", a.Name, a.Modes)
			}
		}
		enc := abi.AppendDescription(nil, d)
		if !bytes.Equal(enc, b) {
			t.Fatalf("accepted a non-canonical buffer\n  in: %x\n out: %x", b, enc)
		}
		again, err := abi.DecodeDescription(enc)
		if err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if !reflect.DeepEqual(again, d) {
			t.Fatalf("decode(encode(x)) != x\n got: %+v\nwant: %+v", again, d)
		}
	})
}

// fuzzSeeds returns the checked-in seed corpus per fuzzer: one buffer per
// rejection rule of spec_test.go, so the fuzzer starts next to every check,
// plus random valid values with more structure than the golden vectors.
func fuzzSeeds() map[string]map[string][]byte {
	slug := regexp.MustCompile(`[^a-z0-9]+`)
	seeds := map[string]map[string][]byte{
		"FuzzDecodeRequest":     {"seed-spec-request": abi.AppendRequest(nil, specRequest())},
		"FuzzDecodeResponse":    {},
		"FuzzDecodeDescription": {},
	}
	add := func(fuzzer string, rs []rejection) {
		for _, r := range rs {
			seeds[fuzzer]["seed-reject-"+strings.Trim(slug.ReplaceAllString(r.name, "-"), "-")] = r.buf
		}
	}
	add("FuzzDecodeRequest", requestRejections())
	add("FuzzDecodeResponse", responseRejections())
	add("FuzzDecodeDescription", descriptionRejections())
	g := newGen(4)
	for i := range 6 {
		seeds["FuzzDecodeRequest"][fmt.Sprintf("seed-random-%d", i)] = abi.AppendRequest(nil, g.request())
		seeds["FuzzDecodeResponse"][fmt.Sprintf("seed-random-%d", i)] = abi.AppendResponse(nil, g.response())
		seeds["FuzzDecodeDescription"][fmt.Sprintf("seed-random-%d", i)] = abi.AppendDescription(nil, g.description())
	}
	return seeds
}

// corpusFile renders b in the format of Go's fuzzing corpus files.
func corpusFile(b []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b)
}

// TestFuzzSeedCorpus keeps the seed-* files in testdata/fuzz equal to
// fuzzSeeds; run with -update to rewrite them. Files the fuzzer added itself
// (crashers, named by hash) are left alone: they are regression seeds.
func TestFuzzSeedCorpus(t *testing.T) {
	for fuzzer, seeds := range fuzzSeeds() {
		dir := filepath.Join("testdata", "fuzz", fuzzer)
		if *update {
			old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
			for _, p := range old {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range seeds {
				if err := os.WriteFile(filepath.Join(dir, name), corpusFile(b), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		onDisk, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
		if len(onDisk) != len(seeds) {
			t.Errorf("%s: %d seed files on disk, fuzzSeeds has %d (run with -update)", fuzzer, len(onDisk), len(seeds))
		}
		for name, b := range seeds {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || !bytes.Equal(got, corpusFile(b)) {
				t.Errorf("%s/%s is missing or stale (run with -update)", fuzzer, name)
			}
		}
	}
}
