package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wasmassign/wasmassign/coordinator"
)

// FormatVersion is the version of the record values this gateway writes,
// and the newest it reads.
const FormatVersion = 1

// Kind is what a record holds.
type Kind byte

// The kinds of record.
const (
	// KindState is a group's state, or its tombstone (a nil value).
	KindState Kind = 1
	// KindClaim records that a gateway took the shard.
	KindClaim Kind = 2
	// KindRelease records that a gateway gave the shard up cleanly, having
	// answered its last request.
	KindRelease Kind = 3
	// KindLayout records how the topic's groups are placed.
	KindLayout Kind = 4
)

var kindNames = [...]string{KindState: "state", KindClaim: "claim", KindRelease: "release", KindLayout: "layout"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind %d", byte(k))
}

// Key prefixes: a group's key is keyGroup and its id; the control records'
// are keyControl and a name, which no group's key can equal.
const (
	keyControl byte = 0x00
	keyGroup   byte = 0x01
)

var (
	controlKey = []byte{keyControl, 'c', 't', 'l'}
	layoutKey  = []byte{keyControl, 'l', 'a', 'y', 'o', 'u', 't'}
	magic      = []byte{'W', 'A'}
)

// Writer identifies the gateway that wrote a record: its id, the
// incarnation of its process (new at every start), and the generation of
// the gateways' own group it held the shard in.
type Writer struct {
	ID          string `json:"id"`
	Incarnation uint64 `json:"incarnation"`
	Generation  int32  `json:"generation"`
}

// Layout is how the topic's groups are placed: a shard of Partitions by
// the hash Hash names.
type Layout struct {
	Partitions int    `json:"partitions"`
	Hash       string `json:"hash"`
}

// Record is one record of the state topic, decoded.
type Record struct {
	Kind Kind
	// Group is the group a state record is of.
	Group string
	// State is the group's state; nil in a tombstone.
	State *coordinator.GroupState
	// Writer wrote the record; zero in a tombstone.
	Writer Writer
	// Layout is a layout record's.
	Layout Layout
}

// ErrCorrupt is the error of a record that is not one this format can
// hold: the loader skips it, and counts it by Reason.
var ErrCorrupt = errors.New("corrupt state record")

// CorruptError says why a record was refused as corrupt.
type CorruptError struct {
	// Reason is one of "key", "magic", "kind" and "payload".
	Reason string
	Detail string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt state record (%s): %s", e.Reason, e.Detail)
}

// Unwrap makes every CorruptError match ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func corrupt(reason, format string, args ...any) error {
	return &CorruptError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// NewerFormatError is the error of a record written in a format newer
// than this gateway's: the shard must not be served from what it cannot
// read, so it is refused whole, and the operator told to upgrade.
type NewerFormatError struct {
	Version byte
}

func (e *NewerFormatError) Error() string {
	return fmt.Sprintf("state record in format %d, newer than this gateway's %d: upgrade this gateway before it serves the shard", e.Version, FormatVersion)
}

// statePayload and controlPayload are the JSON payloads of the kinds.
type statePayload struct {
	Writer Writer                 `json:"writer"`
	State  coordinator.GroupState `json:"state"`
}

type controlPayload struct {
	Writer Writer `json:"writer"`
}

// Encode returns the record's key and value; a tombstone's value is nil.
func Encode(r Record) (key, value []byte, err error) {
	var payload any
	switch r.Kind {
	case KindState:
		key = append([]byte{keyGroup}, r.Group...)
		if r.State == nil {
			return key, nil, nil
		}
		if r.State.Group != r.Group {
			return nil, nil, fmt.Errorf("state record for group %q holds group %q", r.Group, r.State.Group)
		}
		payload = statePayload{Writer: r.Writer, State: *r.State}
	case KindClaim, KindRelease:
		key = bytes.Clone(controlKey)
		payload = controlPayload{Writer: r.Writer}
	case KindLayout:
		key = bytes.Clone(layoutKey)
		payload = r.Layout
	default:
		return nil, nil, fmt.Errorf("state record of unknown %v", r.Kind)
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, nil, fmt.Errorf("state record %v: %w", r.Kind, err)
	}
	value = append(append(bytes.Clone(magic), FormatVersion, byte(r.Kind)), body...)
	return key, value, nil
}

// Decode reads one record. It fails with a *CorruptError for anything this
// format cannot hold, and with a *NewerFormatError for a value of a newer
// format, whatever else it holds.
func Decode(key, value []byte) (Record, error) {
	if len(key) == 0 {
		return Record{}, corrupt("key", "empty")
	}
	if key[0] == keyGroup && value == nil {
		return Record{Kind: KindState, Group: string(key[1:])}, nil
	}
	if len(value) < len(magic)+2 || !bytes.Equal(value[:len(magic)], magic) {
		return Record{}, corrupt("magic", "the value does not begin with %q", magic)
	}
	version, kind, body := value[len(magic)], Kind(value[len(magic)+1]), value[len(magic)+2:]
	if version > FormatVersion {
		return Record{}, &NewerFormatError{Version: version}
	}
	if version == 0 {
		return Record{}, corrupt("magic", "format version 0")
	}
	r := Record{Kind: kind}
	switch kind {
	case KindState:
		if key[0] != keyGroup {
			return Record{}, corrupt("key", "a state record under a control key")
		}
		r.Group = string(key[1:])
		var p statePayload
		if err := strictJSON(body, &p); err != nil {
			return Record{}, corrupt("payload", "group %q: %v", r.Group, err)
		}
		if p.State.Group != r.Group {
			return Record{}, corrupt("payload", "the record of group %q holds group %q", r.Group, p.State.Group)
		}
		r.Writer, r.State = p.Writer, &p.State
	case KindClaim, KindRelease:
		if !bytes.Equal(key, controlKey) {
			return Record{}, corrupt("key", "a %v record under key %q", kind, key)
		}
		var p controlPayload
		if err := strictJSON(body, &p); err != nil {
			return Record{}, corrupt("payload", "%v: %v", kind, err)
		}
		r.Writer = p.Writer
	case KindLayout:
		if !bytes.Equal(key, layoutKey) {
			return Record{}, corrupt("key", "a layout record under key %q", key)
		}
		if err := strictJSON(body, &r.Layout); err != nil {
			return Record{}, corrupt("payload", "layout: %v", err)
		}
		if r.Layout.Partitions <= 0 || r.Layout.Hash == "" {
			return Record{}, corrupt("payload", "layout of %d partitions by %q", r.Layout.Partitions, r.Layout.Hash)
		}
	default:
		return Record{}, corrupt("kind", "%v", kind)
	}
	return r, nil
}

// strictJSON decodes exactly one JSON value into v, refusing fields v does
// not have: a field this format does not know is a newer writer's, which
// a same-version record must not carry.
func strictJSON(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("data after the record's value")
	}
	return nil
}
