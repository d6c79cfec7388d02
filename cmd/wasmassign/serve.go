package main

import (
	"context"
	"errors"
	"flag"

	"github.com/wasmassign/wasmassign/internal/config"
	"github.com/wasmassign/wasmassign/internal/daemon"
)

// serve runs the gateway daemon until ctx ends (SIGINT or SIGTERM).
func serve(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var file, cacheDir string
	fs.StringVar(&file, "config", "", "TOML configuration file (default: the built-in defaults: embedded cluster, every group managed)")
	fs.StringVar(&cacheDir, "cache-dir", defaultCacheDir(), "directory for compiled plugin code")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg := config.Default()
	if file != "" {
		var err error
		if cfg, err = config.Load(file); err != nil {
			return usageError{err}
		}
	}
	log := daemon.NewLogger(cfg.Log, e.stderr)
	d, err := daemon.Start(ctx, cfg, daemon.Options{CacheDir: cacheDir, Logger: log})
	if err != nil {
		if errors.As(err, new(*daemon.ConfigError)) {
			return usageError{err}
		}
		return err
	}
	d.Announce(e.stdout)
	failed := d.Wait(ctx)
	if failed != nil {
		log.Error("the gateway can no longer serve; stopping", "err", failed)
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout)
	defer cancel()
	return errors.Join(failed, d.Close(sctx))
}
