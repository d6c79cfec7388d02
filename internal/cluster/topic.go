package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicError is a state topic the gateway cannot use: the upstream refused
// to create or describe it, or it is not compacted. Start-up stops on it,
// with its one line.
type TopicError struct {
	Topic string
	// Op is "create", "describe" or "check".
	Op  string
	Err error
}

func (e *TopicError) Error() string {
	return fmt.Sprintf("state topic %q: %s: %v", e.Topic, e.Op, e.Err)
}

func (e *TopicError) Unwrap() error { return e.Err }

// ErrNotCompacted is the error of a state topic whose cleanup.policy does
// not compact: deleting by age would take groups' states with it.
var ErrNotCompacted = errors.New("cleanup.policy does not include compact, so the groups' states would expire; set it to compact")

// EnsureStateTopic makes sure the state topic exists and is compacted,
// creating it with partitions (and the brokers' default replication) when
// it is missing, and returns its partition count, which decides the shards
// whatever partitions says.
func EnsureStateTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int) (int, error) {
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 30_000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, int32(partitions), -1
	policy := kmsg.NewCreateTopicsRequestTopicConfig()
	policy.Name, policy.Value = "cleanup.policy", kmsg.StringPtr("compact")
	ct.Configs = append(ct.Configs, policy)
	create.Topics = append(create.Topics, ct)
	resp, err := create.RequestWith(ctx, cl)
	if err != nil {
		return 0, &TopicError{Topic: topic, Op: "create", Err: err}
	}
	if len(resp.Topics) != 1 {
		return 0, &TopicError{Topic: topic, Op: "create", Err: fmt.Errorf("%d topics answered", len(resp.Topics))}
	}
	if rt := resp.Topics[0]; rt.ErrorCode != 0 && rt.ErrorCode != kerr.TopicAlreadyExists.Code {
		return 0, &TopicError{Topic: topic, Op: "create", Err: kafkaError(rt.ErrorCode, rt.ErrorMessage)}
	}

	// A topic just created reaches every broker's metadata a moment
	// later: until then a broker answers UNKNOWN_TOPIC_OR_PARTITION.
	giveUp := time.Now().Add(30 * time.Second)
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		n, err := checkStateTopic(ctx, cl, topic)
		if err == nil || !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) || time.Now().After(giveUp) {
			return n, err
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(backoff):
		}
	}
}

// checkStateTopic describes the state topic: its partition count, once it
// is compacted.
func checkStateTopic(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	describe := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{"cleanup.policy"}
	describe.Resources = append(describe.Resources, dr)
	dresp, err := describe.RequestWith(ctx, cl)
	if err != nil {
		return 0, &TopicError{Topic: topic, Op: "describe", Err: err}
	}
	if len(dresp.Resources) != 1 {
		return 0, &TopicError{Topic: topic, Op: "describe", Err: fmt.Errorf("%d resources answered", len(dresp.Resources))}
	}
	res := dresp.Resources[0]
	if res.ErrorCode != 0 {
		return 0, &TopicError{Topic: topic, Op: "describe", Err: kafkaError(res.ErrorCode, res.ErrorMessage)}
	}
	compacted := false
	for _, c := range res.Configs {
		if c.Name == "cleanup.policy" && c.Value != nil && strings.Contains(*c.Value, "compact") {
			compacted = true
		}
	}
	if !compacted {
		return 0, &TopicError{Topic: topic, Op: "check", Err: ErrNotCompacted}
	}

	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil {
		return 0, &TopicError{Topic: topic, Op: "describe", Err: err}
	}
	for _, t := range mresp.Topics {
		if t.Topic != nil && *t.Topic == topic {
			if t.ErrorCode != 0 {
				return 0, &TopicError{Topic: topic, Op: "describe", Err: kerr.ErrorForCode(t.ErrorCode)}
			}
			return len(t.Partitions), nil
		}
	}
	return 0, &TopicError{Topic: topic, Op: "describe", Err: errors.New("the upstream's metadata does not list it")}
}

// kafkaError is a Kafka error code with the broker's message, if any.
func kafkaError(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}
