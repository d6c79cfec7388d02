package loadtest

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseTargets(t *testing.T) {
	cases := []struct {
		values []string
		want   []Target
		err    string
	}{
		{values: []string{"gateway=127.0.0.1:9092", "kfake"}, want: []Target{{Name: "gateway", Addr: "127.0.0.1:9092"}, {Name: "kfake", Embedded: true}}},
		{values: []string{"a=h:1,b=embedded-kfake"}, want: []Target{{Name: "a", Addr: "h:1"}, {Name: "b", Embedded: true}}},
		{values: []string{"localhost:9092"}, want: []Target{{Name: "localhost:9092", Addr: "localhost:9092"}}},
		{values: nil, err: "required"},
		{values: []string{"gateway"}, err: `"gateway": want host:port`},
		{values: []string{"g=host:port"}, err: `port "port"`},
		{values: []string{"g=host:0"}, err: `port "0"`},
		{values: []string{"g=:9092"}, err: "host is missing"},
		{values: []string{"=h:1"}, err: "a name must be non-empty"},
		{values: []string{"a=h:1", "a=kfake"}, err: `the name "a" is used twice`},
		{values: []string{"a=h:1,"}, err: "empty value"},
	}
	for _, tc := range cases {
		got, err := ParseTargets(tc.values)
		var fe *FlagError
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.values, err)
		case tc.err == "" && !reflect.DeepEqual(got, tc.want):
			t.Errorf("%q: %+v, want %+v", tc.values, got, tc.want)
		case tc.err != "" && (!errors.As(err, &fe) || fe.Flag != "target" || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want a --target error containing %q", tc.values, err, tc.err)
		}
	}
}

func TestSetPIDs(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	targets := func() []Target {
		return []Target{{Name: "gw", Addr: "h:1"}, {Name: "kfake", Embedded: true}}
	}
	cases := []struct {
		values []string
		pid    int
		err    string
	}{
		{values: []string{"gw=" + self}, pid: os.Getpid()},
		{values: []string{self}, pid: os.Getpid()}, // the only target outside this process
		{values: []string{"kfake=" + self}, err: "starts and samples itself"},
		{values: []string{"other=" + self}, err: `no target is named "other"`},
		{values: []string{"gw=x"}, err: "positive number"},
		{values: []string{"gw=999999999"}, err: "no process 999999999"},
	}
	for _, tc := range cases {
		ts := targets()
		err := SetPIDs(ts, tc.values)
		var fe *FlagError
		switch {
		case tc.err == "" && (err != nil || ts[0].PID != tc.pid):
			t.Errorf("%q: %v, pid %d", tc.values, err, ts[0].PID)
		case tc.err != "" && (!errors.As(err, &fe) || fe.Flag != "pid" || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want a --pid error containing %q", tc.values, err, tc.err)
		}
	}
}

func TestConfig_ValidateNamesTheFlag(t *testing.T) {
	cases := []struct {
		flag string
		mod  func(*Config)
	}{
		{"groups", func(c *Config) { c.Groups = 0 }},
		{"members", func(c *Config) { c.Members = -1 }},
		{"topics", func(c *Config) { c.Topics = 0 }},
		{"partitions", func(c *Config) { c.Partitions = 0 }},
		{"heartbeat", func(c *Config) { c.Heartbeat = c.SessionTimeout }},
		{"heartbeat", func(c *Config) { c.Heartbeat = 0 }},
		{"session-timeout", func(c *Config) { c.SessionTimeout = 1000 * time.Hour }},
		{"protocol", func(c *Config) { c.Protocol = "sticky" }},
		{"shared-connections", func(c *Config) { c.SharedConnections = -1 }},
		{"stable-timeout", func(c *Config) { c.StableTimeout = 0 }},
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, tc := range cases {
		c := DefaultConfig()
		tc.mod(&c)
		var fe *FlagError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Flag != tc.flag {
			t.Errorf("want an error naming --%s, got %v", tc.flag, err)
		}
	}
}
