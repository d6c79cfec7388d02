package e2e

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// needCommand makes sure an executable is on PATH, installing the Debian
// package that provides it when it is missing (with sudo unless root), as
// the Makefile's tools target does. A tool that cannot be installed fails
// the test: these tests are part of CI, not optional.
func needCommand(t *testing.T, command, debPackage string) string {
	t.Helper()
	if p, err := exec.LookPath(command); err == nil {
		return p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var sudo []string
	if os.Geteuid() != 0 {
		sudo = []string{"sudo", "-n"}
	}
	run := func(args ...string) {
		all := append(append([]string{}, sudo...), args...)
		cmd := exec.CommandContext(ctx, all[0], all[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s is missing and installing %s failed: %v: %v\n%s", command, debPackage, all, err, tail(string(out), 20))
		}
	}
	t.Logf("%s is missing: installing the Debian package %s", command, debPackage)
	// Parallel tests may install at once: apt waits for the other's lock
	// instead of failing.
	lock := "DPkg::Lock::Timeout=300"
	run("apt-get", "-o", lock, "update", "-qq")
	run("apt-get", "-o", lock, "install", "-y", "-qq", debPackage)
	p, err := exec.LookPath(command)
	if err != nil {
		t.Fatalf("installed %s but %s is still not on PATH", debPackage, command)
	}
	return p
}
