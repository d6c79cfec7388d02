package shm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

const childEnv = "SHM_TEST_CHILD_SIZE"

// TestMain doubles as the child of TestRegion_ChildSeesAndWritesSameBytes:
// it maps fd 3, checks the parent's pattern and writes its own after it.
func TestMain(m *testing.M) {
	if s := os.Getenv(childEnv); s != "" {
		size, _ := strconv.ParseInt(s, 10, 64)
		os.Exit(child(size))
	}
	os.Exit(m.Run())
}

func child(size int64) int {
	r, err := Open(os.NewFile(3, "region"), size, 1<<20)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	b := r.Bytes()
	half := len(b) / 2
	for i := range half {
		if b[i] != byte(i*7) {
			fmt.Fprintf(os.Stderr, "byte %d = %d, want %d\n", i, b[i], byte(i*7))
			return 3
		}
	}
	for i := half; i < len(b); i++ {
		b[i] = byte(i * 3)
	}
	// A shrink from the child must fail too.
	if err := unix.Ftruncate(3, 0); !errors.Is(err, unix.EPERM) {
		fmt.Fprintf(os.Stderr, "shrink from the child: %v\n", err)
		return 4
	}
	return 0
}

func pattern(n int, mul int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * mul)
	}
	return b
}

func TestRegion_ChildSeesAndWritesSameBytes(t *testing.T) {
	const size = 3 * PageSize
	r, err := Create("test", size, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	copy(r.Bytes(), pattern(size/2, 7))
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{childEnv + "=" + strconv.Itoa(size)}
	cmd.ExtraFiles = []*os.File{r.File()}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	want := pattern(size, 3)
	if got := r.Bytes()[size/2:]; !bytes.Equal(got, want[size/2:]) {
		t.Fatal("the parent does not see what the child wrote")
	}
}

func TestRegion_SealForbidsShrinkAndGrowKeepsContents(t *testing.T) {
	r, err := Create("test", PageSize, 16*PageSize)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Bytes()[PageSize-1] = 42
	if err := unix.Ftruncate(int(r.File().Fd()), 0); !errors.Is(err, unix.EPERM) {
		t.Fatalf("shrinking a sealed region: %v, want EPERM", err)
	}
	if err := r.Grow(10 * PageSize); err != nil {
		t.Fatal(err)
	}
	b := r.Bytes()
	if len(b) != 10*PageSize || cap(b) != len(b) || b[PageSize-1] != 42 || b[len(b)-1] != 0 {
		t.Fatalf("after grow: len %d cap %d, kept byte %d, new byte %d", len(b), cap(b), b[PageSize-1], b[len(b)-1])
	}
	if err := r.Grow(17 * PageSize); err == nil {
		t.Fatal("grew beyond the reservation")
	}
	if err := r.Grow(PageSize); err != nil || r.Size() != 10*PageSize {
		t.Fatalf("a smaller Grow changed the size to %d (err %v)", r.Size(), err)
	}
	b[5*PageSize] = 9
	if err := r.PunchHole(4*PageSize, 2*PageSize); err != nil {
		t.Fatal(err)
	}
	if b[5*PageSize] != 0 || b[PageSize-1] != 42 {
		t.Fatal("punching a hole did not zero exactly its pages")
	}
}

func TestOpen_RejectsAnnouncedSizeBeyondFile(t *testing.T) {
	r, err := Create("test", PageSize, 16*PageSize)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := Open(r.File(), 2*PageSize, 16*PageSize); err == nil {
		t.Fatal("opened with a size larger than the file")
	}
	o, err := Open(r.File(), PageSize, 16*PageSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Extend(4 * PageSize); err == nil {
		t.Fatal("extended to bytes that do not exist")
	}
}
