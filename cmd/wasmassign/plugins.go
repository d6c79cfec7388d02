package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/wasmassign/wasmassign/plugins/builtin"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
)

// errHelp is returned after -h printed the flags.
var errHelp = errors.New("help shown")

// limitFlags are the sandbox limits every command that runs plugins accepts.
type limitFlags struct {
	timeout        time.Duration
	memoryMB       uint
	maxModuleBytes int
	cacheDir       string
}

func (l *limitFlags) register(fs *flag.FlagSet) {
	d := wasmruntime.DefaultLimits()
	fs.DurationVar(&l.timeout, "timeout", d.Timeout(), "deadline for each plugin call")
	fs.UintVar(&l.memoryMB, "memory-limit-mb", uint(d.MemoryLimitMB()), "memory limit per plugin instance, in MiB")
	fs.IntVar(&l.maxModuleBytes, "max-module-bytes", d.MaxModuleBytes(), "largest plugin module accepted")
	fs.StringVar(&l.cacheDir, "cache-dir", defaultCacheDir(), "directory for compiled plugin code, so later runs skip compiling (empty: keep it in memory)")
}

func (l *limitFlags) host(ctx context.Context, e *env) (*wasmruntime.Host, error) {
	lim := wasmruntime.DefaultLimits().
		WithTimeout(l.timeout).
		WithMemoryLimitMB(uint32(l.memoryMB)).
		WithMaxModuleBytes(l.maxModuleBytes)
	cfg := wasmruntime.NewConfig().WithLimits(lim).WithLogger(e.log).WithCompilationCacheDir(l.cacheDir)
	return wasmruntime.NewHost(ctx, cfg)
}

// defaultCacheDir is $WASMASSIGN_CACHE_DIR, or wasmassign under the user's
// cache directory. Compiling a Go plugin takes a second or more; loading it
// from the cache takes milliseconds.
func defaultCacheDir() string {
	if dir, ok := os.LookupEnv("WASMASSIGN_CACHE_DIR"); ok {
		return dir
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "wasmassign")
}

// loadRegistry starts a host under the flags' limits and loads the plugins
// into a registry. The caller closes the host.
func (l *limitFlags) loadRegistry(ctx context.Context, e *env, dir string, files []string) (*wasmruntime.Host, *wasmruntime.Registry, error) {
	h, err := l.host(ctx, e)
	if err != nil {
		return nil, nil, err
	}
	reg, err := registry(ctx, h, dir, files)
	if err != nil {
		h.Close(ctx)
		return nil, nil, err
	}
	return h, reg, nil
}

// registry loads the built-ins, then the plugin directory, then single files.
func registry(ctx context.Context, h *wasmruntime.Host, dir string, files []string) (*wasmruntime.Registry, error) {
	reg := wasmruntime.NewRegistry(h)
	if err := reg.LoadBuiltins(ctx, builtin.FS()); err != nil {
		return nil, err
	}
	if dir != "" {
		if err := reg.LoadDir(ctx, dir); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := reg.LoadFile(ctx, f); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// parse parses flags, turning -h into errHelp and mistakes into usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return errHelp
	case err != nil:
		return usageError{err}
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
