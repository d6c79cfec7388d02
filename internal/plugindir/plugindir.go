// Package plugindir watches the operator's plugin directory and reports
// *.wasm files that were added, replaced or removed, once each is complete.
//
// "Complete" is the hard part: an editor saving, or a copy still in
// progress, leaves a file that is half written for a while. Loading it would
// report a broken plugin that is not broken. So a file is reported only
// after its size, modification time and identity have stayed the same for a
// settle period, and only when its bytes form a structurally whole wasm
// module (every section inside the file). A file that stays incomplete past
// a longer deadline is reported as broken, since no writer is coming back.
//
// The directory is polled rather than watched with inotify: a few stat calls
// per second cost nothing, and polling also sees changes inotify misses,
// such as Kubernetes ConfigMap volumes swapping a symlink, or network
// filesystems. The package knows nothing of wazero or plugins; the caller
// loads what it reports.
package plugindir

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Kind says what happened to a file.
type Kind int

const (
	// Added is a file not reported before.
	Added Kind = iota
	// Changed is a reported file whose content changed.
	Changed
	// Removed is a reported file that is gone.
	Removed
	// Incomplete is a file that stayed structurally incomplete past the
	// deadline. Data holds what was read.
	Incomplete
)

func (k Kind) String() string {
	switch k {
	case Added:
		return "added"
	case Changed:
		return "changed"
	case Removed:
		return "removed"
	case Incomplete:
		return "incomplete"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Event is one file's change.
type Event struct {
	Kind Kind
	// Path is the file's path, the directory joined with its name.
	Path string
	// Data is the file's content; nil for Removed.
	Data []byte
	// SHA256 is the hex digest of Data.
	SHA256 string
}

// Options tune a Watcher. The zero value gives the defaults.
type Options struct {
	// Interval is the polling period; default 250ms.
	Interval time.Duration
	// Settle is how long a file must stay unchanged before it is read;
	// default 1.5s, longer than the pauses of a slow copy.
	Settle time.Duration
	// GiveUp is how long a file may stay structurally incomplete before it
	// is reported as Incomplete; default 10s.
	GiveUp time.Duration
}

// Watcher reports changes to the *.wasm files of one directory.
type Watcher struct {
	dir string
	opt Options
	// known maps a name to what was last reported for it.
	known map[string]knownFile
	// pending tracks files seen changing, by name.
	pending map[string]*pendingFile
}

type knownFile struct {
	digest string
	stamp  stamp
}

type pendingFile struct {
	stamp     stamp
	since     time.Time // when stamp was first seen
	firstSeen time.Time // when this round of changes began
	// lastIncomplete is the digest of content found incomplete, so an
	// unchanged incomplete file is not reported twice.
	lastIncomplete string
}

// stamp identifies a file version without reading it.
type stamp struct {
	size    int64
	modTime time.Time
	ino     uint64
}

// New returns a watcher of dir. The first Poll reports every complete
// *.wasm file as Added.
func New(dir string, opt Options) *Watcher {
	opt.Interval = cmp.Or(opt.Interval, 250*time.Millisecond)
	opt.Settle = cmp.Or(opt.Settle, 1500*time.Millisecond)
	opt.GiveUp = cmp.Or(opt.GiveUp, 10*time.Second)
	return &Watcher{dir: dir, opt: opt, known: make(map[string]knownFile), pending: make(map[string]*pendingFile)}
}

// IsPluginName reports whether a directory entry is a plugin file: it ends
// in ".wasm" and is not hidden (editors' swap and temporary files start with
// a dot).
func IsPluginName(name string) bool {
	return strings.HasSuffix(name, ".wasm") && !strings.HasPrefix(name, ".")
}

// Poll looks at the directory once, at time now, and returns the events that
// are ready, sorted by path. An error reading the directory itself is
// returned; the caller keeps the plugins it has and polls again.
func (w *Watcher) Poll(now time.Time) ([]Event, error) {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return nil, fmt.Errorf("plugin directory %s: %w", w.dir, err)
	}
	present := make(map[string]bool)
	var events []Event
	for _, e := range entries {
		name := e.Name()
		if !IsPluginName(name) {
			continue
		}
		path := filepath.Join(w.dir, name)
		// Stat follows symlinks, so a swapped link target counts as a
		// change of the file.
		info, err := os.Stat(path)
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		present[name] = true
		st := stamp{size: info.Size(), modTime: info.ModTime(), ino: inode(info)}
		p := w.pending[name]
		if k, ok := w.known[name]; ok && p == nil && k.stamp == st {
			continue // unchanged since it was reported
		}
		if p == nil || p.stamp != st {
			if p == nil {
				p = &pendingFile{firstSeen: now}
				w.pending[name] = p
			}
			p.stamp, p.since = st, now
		}
		if now.Sub(p.since) < w.opt.Settle {
			continue
		}
		ev, done := w.check(name, path, p, now)
		if done {
			delete(w.pending, name)
		}
		if ev != nil {
			events = append(events, *ev)
		}
	}
	for name := range w.known {
		if !present[name] {
			delete(w.known, name)
			delete(w.pending, name)
			events = append(events, Event{Kind: Removed, Path: filepath.Join(w.dir, name)})
		}
	}
	for name := range w.pending {
		if !present[name] {
			delete(w.pending, name)
		}
	}
	slices.SortFunc(events, func(a, b Event) int { return cmp.Compare(a.Path, b.Path) })
	return events, nil
}

// check reads a settled file. done is false while the file should be
// watched further (incomplete, within the deadline).
func (w *Watcher) check(name, path string, p *pendingFile, now time.Time) (ev *Event, done bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		// Gone or unreadable between the stat and the read: look again
		// next round.
		return nil, false
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	if err := Whole(data); err != nil {
		if now.Sub(p.firstSeen) < w.opt.GiveUp || p.lastIncomplete == digest {
			return nil, false
		}
		p.lastIncomplete = digest
		return &Event{Kind: Incomplete, Path: path, Data: data, SHA256: digest}, false
	}
	prev, seen := w.known[name]
	w.known[name] = knownFile{digest: digest, stamp: p.stamp}
	switch {
	case !seen:
		return &Event{Kind: Added, Path: path, Data: data, SHA256: digest}, true
	case prev.digest != digest:
		return &Event{Kind: Changed, Path: path, Data: data, SHA256: digest}, true
	}
	return nil, true // touched, same content
}

// Run polls until ctx ends, calling report with each batch of events. An
// error reading the directory is passed to report as well, with no events,
// and polling goes on.
func (w *Watcher) Run(ctx context.Context, report func([]Event, error)) {
	t := time.NewTicker(w.opt.Interval)
	defer t.Stop()
	for {
		events, err := w.Poll(time.Now())
		if err != nil || len(events) > 0 {
			report(events, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ErrIncomplete is returned by Whole for bytes that end inside a section.
var ErrIncomplete = errors.New("wasm module incomplete")

// Whole reports whether data is a structurally whole wasm binary: the magic
// and version, then sections whose sizes add up to exactly the file. It
// checks framing only; whether the module is valid is for the compiler to
// say. Anything that is not wasm at all is "whole" here, so that the loader
// reports it as what it is.
func Whole(data []byte) error {
	if len(data) < 8 {
		if string(data) == string([]byte("\x00asm\x01\x00\x00\x00")[:len(data)]) {
			return fmt.Errorf("%w: %d bytes, the header alone is 8", ErrIncomplete, len(data))
		}
		return nil
	}
	if string(data[:4]) != "\x00asm" {
		return nil
	}
	off := 8
	for off < len(data) {
		off++ // section id
		size, n, ok := uleb32(data[off:])
		if !ok {
			return fmt.Errorf("%w: section header at byte %d cut off", ErrIncomplete, off-1)
		}
		off += n
		if int64(off)+int64(size) > int64(len(data)) {
			return fmt.Errorf("%w: section at byte %d needs %d bytes, %d remain", ErrIncomplete, off, size, len(data)-off)
		}
		off += int(size)
	}
	return nil
}

func uleb32(b []byte) (v uint32, n int, ok bool) {
	for i := 0; i < 5 && i < len(b); i++ {
		v |= uint32(b[i]&0x7F) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1, true
		}
	}
	return 0, 0, false
}

// inode returns the file's inode number where the platform has one, so that
// a rename over a file with the same size and time still counts as a change.
func inode(info fs.FileInfo) uint64 { return inodeOf(info) }
