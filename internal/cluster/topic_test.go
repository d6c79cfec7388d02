package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func kfakeClient(t *testing.T) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, cl
}

// TestEnsureStateTopic_CreatesItCompactedOrTakesItAsItIs: a missing topic
// is created compacted with the partitions asked; an existing compacted
// one is taken with its own partition count.
func TestEnsureStateTopic_CreatesItCompactedOrTakesItAsItIs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, cl := kfakeClient(t)
	n, err := EnsureStateTopic(ctx, cl, "wasmassign-prod-state", 16)
	if err != nil || n != 16 {
		t.Fatalf("creating: %d partitions, %v; want 16", n, err)
	}
	if ti := c.TopicInfo("wasmassign-prod-state"); ti == nil || ti.Configs["cleanup.policy"] == nil || *ti.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("created %+v, not compacted", ti)
	}
	if err := c.CreateTopic("made-by-hand", 8, map[string]string{"cleanup.policy": "compact,delete"}); err != nil {
		t.Fatal(err)
	}
	if n, err := EnsureStateTopic(ctx, cl, "made-by-hand", 16); err != nil || n != 8 {
		t.Fatalf("an existing topic: %d partitions, %v; want its own 8", n, err)
	}
}

// TestEnsureStateTopic_RefusalsNameTheTopicAndTheCause: an upstream that
// will not create the topic, or a topic that deletes by age, stops
// start-up with one line that names the topic and why.
func TestEnsureStateTopic_RefusalsNameTheTopicAndTheCause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name    string
		set     func(*kfake.Cluster)
		op      string
		wantErr error
	}{
		{"not allowed to create", func(c *kfake.Cluster) { refuse(c, kmsg.CreateTopics, kerr.TopicAuthorizationFailed.Code) }, "create", kerr.TopicAuthorizationFailed},
		{"a policy refuses it", func(c *kfake.Cluster) { refuse(c, kmsg.CreateTopics, kerr.PolicyViolation.Code) }, "create", kerr.PolicyViolation},
		{"not allowed to describe", func(c *kfake.Cluster) { refuse(c, kmsg.DescribeConfigs, kerr.TopicAuthorizationFailed.Code) }, "describe", kerr.TopicAuthorizationFailed},
		{"deleted by age", func(c *kfake.Cluster) {
			if err := c.CreateTopic("state", 4, map[string]string{"cleanup.policy": "delete"}); err != nil {
				t.Fatal(err)
			}
		}, "check", ErrNotCompacted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cl := kfakeClient(t)
			tc.set(c)
			_, err := EnsureStateTopic(ctx, cl, "state", 16)
			var te *TopicError
			if !errors.As(err, &te) || te.Topic != "state" || te.Op != tc.op || !errors.Is(err, tc.wantErr) {
				t.Fatalf("got %v, want a %s error of topic state: %v", err, tc.op, tc.wantErr)
			}
			if line := err.Error(); strings.Contains(line, "\n") || !strings.Contains(line, `"state"`) {
				t.Errorf("error %q is not one line naming the topic", line)
			}
		})
	}
}

// refuse makes the cluster answer every request of key with code for
// every topic or resource it names.
func refuse(c *kfake.Cluster, key kmsg.Key, code int16) {
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		switch r := req.(type) {
		case *kmsg.CreateTopicsRequest:
			resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
			for _, t := range r.Topics {
				rt := kmsg.NewCreateTopicsResponseTopic()
				rt.Topic, rt.ErrorCode = t.Topic, code
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil, true
		case *kmsg.DescribeConfigsRequest:
			resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
			for _, res := range r.Resources {
				rr := kmsg.NewDescribeConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
				resp.Resources = append(resp.Resources, rr)
			}
			return resp, nil, true
		}
		return nil, nil, false
	})
}
