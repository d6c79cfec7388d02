package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/wasmassign/wasmassign/coordinator"
)

const stateFile = "groups.json"

// loadState reads the group state a previous run saved; none is no error.
func loadState(dir string) ([]coordinator.GroupState, error) {
	if dir == "" {
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	var states []coordinator.GroupState
	if err := json.Unmarshal(b, &states); err != nil {
		return nil, fmt.Errorf("state: %s: %w", filepath.Join(dir, stateFile), err)
	}
	return states, nil
}

// stateSaver writes the group state atomically (temp file and rename), so a
// crash mid-write leaves the previous state.
func stateSaver(dir string, log *slog.Logger) func([]coordinator.GroupState) {
	if dir == "" {
		return nil
	}
	return func(states []coordinator.GroupState) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			log.Error("state: cannot create the state directory", "dir", dir, "err", err)
			return
		}
		b, err := json.Marshal(states)
		if err != nil {
			log.Error("state: encoding", "err", err)
			return
		}
		tmp, err := os.CreateTemp(dir, stateFile+".*")
		if err != nil {
			log.Error("state: writing", "err", err)
			return
		}
		_, werr := tmp.Write(b)
		serr := tmp.Sync()
		cerr := tmp.Close()
		if err := errors.Join(werr, serr, cerr); err != nil {
			os.Remove(tmp.Name())
			log.Error("state: writing", "err", err)
			return
		}
		if err := os.Rename(tmp.Name(), filepath.Join(dir, stateFile)); err != nil {
			log.Error("state: writing", "err", err)
		}
	}
}
