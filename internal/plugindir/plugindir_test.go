package plugindir

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// module returns a structurally whole wasm binary of about n bytes: the
// header and custom sections (id 0) of filler, distinguished by tag.
func module(tag byte, n int) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	for len(b) < n {
		body := make([]byte, 100)
		body[0] = 1 // custom section name length
		body[1] = 'x'
		body[2] = tag
		b = append(b, 0, byte(len(body)))
		b = append(b, body...)
	}
	return b
}

type step struct {
	at    time.Duration // after the start
	do    func(t *testing.T, dir string)
	poll  bool
	kinds []Kind // expected events of this poll
}

func write(name string, data []byte) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func appendTo(name string, data []byte) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		// The fake clock moves faster than file times; make the change
		// visible even within one mtime tick.
		now := time.Now().Add(time.Second)
		os.Chtimes(f.Name(), now, now)
	}
}

// renameOver writes data to a temporary file and renames it over name, as
// editors and careful deploy tools do.
func renameOver(name string, data []byte) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		tmp := filepath.Join(dir, ".tmp-"+name)
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func remove(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func poll(at time.Duration, kinds ...Kind) step { return step{at: at, poll: true, kinds: kinds} }

func TestWatcher(t *testing.T) {
	full := module('a', 4000)
	half1, half2 := full[:1700], full[1700:]
	tests := []struct {
		name  string
		steps []step
	}{
		{"a file written in two halves a second apart is reported once, whole", []step{
			{at: 0, do: write("p.wasm", half1)},
			poll(500 * time.Millisecond),
			poll(999 * time.Millisecond),
			{at: time.Second, do: appendTo("p.wasm", half2)},
			poll(time.Second),
			poll(2 * time.Second),
			poll(2600*time.Millisecond, Added),
			poll(4 * time.Second),
		}},
		{"an incomplete file is waited for, then reported once", []step{
			{at: 0, do: write("p.wasm", half1)},
			poll(0),
			poll(2 * time.Second),
			poll(9 * time.Second),
			poll(11*time.Second, Incomplete),
			poll(20 * time.Second),
		}},
		{"an editor's rename over a file is a change; a touch is not", []step{
			{at: 0, do: write("p.wasm", full)},
			poll(0),
			poll(2*time.Second, Added),
			{at: 3 * time.Second, do: renameOver("p.wasm", module('b', 4000))},
			poll(3 * time.Second),
			poll(5*time.Second, Changed),
			{at: 6 * time.Second, do: renameOver("p.wasm", module('b', 4000))},
			poll(6 * time.Second),
			poll(8 * time.Second),
		}},
		{"removal is reported at once", []step{
			{at: 0, do: write("p.wasm", full)},
			poll(0),
			poll(2*time.Second, Added),
			{at: 3 * time.Second, do: remove("p.wasm")},
			poll(3*time.Second, Removed),
			poll(6 * time.Second),
		}},
		{"hidden and non-wasm names are ignored; non-wasm bytes are reported for the loader to refuse", []step{
			{at: 0, do: write(".p.wasm.swp", full)},
			{at: 0, do: write("notes.txt", full)},
			{at: 0, do: write("junk.wasm", []byte("not a module at all"))},
			poll(0),
			poll(2*time.Second, Added),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w := New(dir, Options{})
			start := time.Now()
			for i, s := range tt.steps {
				if s.do != nil {
					s.do(t, dir)
				}
				if !s.poll {
					continue
				}
				events, err := w.Poll(start.Add(s.at))
				if err != nil {
					t.Fatal(err)
				}
				var kinds []Kind
				for _, e := range events {
					kinds = append(kinds, e.Kind)
					if e.Kind == Added || e.Kind == Changed {
						if Whole(e.Data) != nil && e.Data[0] == 0 {
							t.Errorf("step %d: reported incomplete data as %s", i, e.Kind)
						}
					}
				}
				if !slices.Equal(kinds, tt.steps[i].kinds) {
					t.Errorf("step %d at %v: events %v, want %v", i, s.at, kinds, s.kinds)
				}
			}
		})
	}
}

func TestWhole(t *testing.T) {
	full := module('a', 500)
	if err := Whole(full); err != nil {
		t.Fatalf("whole module: %v", err)
	}
	for cut := 1; cut < len(full); cut++ {
		err := Whole(full[:cut])
		// A cut at a section boundary is whole as far as framing goes.
		boundary := cut == 8 || (cut > 8 && (cut-8)%102 == 0)
		if boundary != (err == nil) {
			t.Errorf("cut at %d: err %v", cut, err)
		}
		if err != nil && !errors.Is(err, ErrIncomplete) {
			t.Errorf("cut at %d: %v is not ErrIncomplete", cut, err)
		}
	}
	if err := Whole([]byte("plain text")); err != nil {
		t.Errorf("non-wasm bytes: %v; the loader must see them", err)
	}
}

func FuzzWhole(f *testing.F) {
	f.Add(module('a', 300))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x01\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, b []byte) { _ = Whole(b) })
}
