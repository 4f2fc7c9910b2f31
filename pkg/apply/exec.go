package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/homystack/nico/pkg/api"
)

// ExecConfig configures the Exec applier.
type ExecConfig struct {
	// Command is run to apply a generation (NICO_ACTION=apply) and to roll
	// back to the previous one (NICO_ACTION=rollback), with the generation's
	// fields in NICO_* variables (see Env).
	Command []string
	// Gate is the health gate run after the command.
	Gate Gate
	// StateFile keeps what was applied across restarts (memory only when empty).
	StateFile string
	Runner    Runner // ExecRunner when nil
	// HostFiles writes the generation's spec.hostFiles before the command
	// runs (nil: a spec with host files is refused).
	HostFiles *HostFiles
}

// Exec is the Applier that runs a command. Its toplevel is a digest of the
// fields that select a system (repository, revision, attribute, files), so
// a generation that changes none of them is skipped like an unchanged NixOS
// toplevel.
type Exec struct {
	cfg ExecConfig
	mu  sync.Mutex
	cur execState
}

type execState struct {
	Toplevel   string                      `json:"toplevel"`
	Generation int64                       `json:"generation"`
	Spec       *api.NixosConfigurationSpec `json:"spec,omitempty"`
}

// NewExec returns an Exec applier, reading its state file when there is one.
func NewExec(cfg ExecConfig) (*Exec, error) {
	if len(cfg.Command) == 0 {
		return nil, fmt.Errorf("%w: exec applier: command is empty", ErrInvalid)
	}
	if cfg.Runner == nil {
		cfg.Runner = ExecRunner{}
	}
	x := &Exec{cfg: cfg}
	if cfg.StateFile != "" {
		b, err := os.ReadFile(cfg.StateFile)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("apply: exec state: %w", err)
		}
		if err == nil {
			if err := json.Unmarshal(b, &x.cur); err != nil {
				return nil, fmt.Errorf("apply: exec state %s: %w", cfg.StateFile, err)
			}
		}
	}
	return x, nil
}

// Current implements Applier.
func (x *Exec) Current(context.Context) (string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.cur.Toplevel, nil
}

// Apply implements Applier.
func (x *Exec) Apply(ctx context.Context, gen Generation) (Result, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := Validate(gen.Spec); err != nil {
		return Result{}, err
	}
	// Host files are synced even when the system is unchanged: a secret
	// they name may have been renewed.
	if err := x.syncHostFiles(ctx, gen.Spec.HostFiles); err != nil {
		return Result{}, err
	}
	top := ExecToplevel(gen.Machine, gen.Spec)
	if top == x.cur.Toplevel {
		return Result{Toplevel: top, Skipped: true}, nil
	}
	prev := x.cur
	if _, err := x.cfg.Runner.Run(ctx, x.cmd("apply", gen.Machine, gen.Number, &gen.Spec)); err != nil {
		return x.rollback(ctx, gen, prev, fmt.Errorf("%w: %w", ErrActivate, err))
	}
	if err := x.cfg.Gate.Wait(ctx, gen.Checks...); err != nil {
		return x.rollback(ctx, gen, prev, err)
	}
	spec := gen.Spec
	if err := x.save(execState{Toplevel: top, Generation: gen.Number, Spec: &spec}); err != nil {
		return Result{}, err
	}
	return Result{Toplevel: top}, nil
}

// rollback runs the command for the previous generation and returns cause.
func (x *Exec) rollback(ctx context.Context, gen Generation, prev execState, cause error) (Result, error) {
	if ctx.Err() != nil {
		return Result{}, cause
	}
	var files []api.HostFile
	if prev.Spec != nil {
		files = prev.Spec.HostFiles
	}
	if err := x.syncHostFiles(ctx, files); err != nil {
		return Result{}, errors.Join(cause, fmt.Errorf("%w: %w", ErrRollback, err))
	}
	if _, err := x.cfg.Runner.Run(ctx, x.cmd("rollback", gen.Machine, prev.Generation, prev.Spec)); err != nil {
		return Result{}, errors.Join(cause, fmt.Errorf("%w: %w", ErrRollback, err))
	}
	return Result{Toplevel: prev.Toplevel, RolledBack: true}, cause
}

// syncHostFiles writes files with the configured HostFiles.
func (x *Exec) syncHostFiles(ctx context.Context, files []api.HostFile) error {
	if x.cfg.HostFiles == nil {
		if len(files) > 0 {
			return fmt.Errorf("%w: hostFiles: %d listed, but this agent's exec applier writes no host files (configure its host-file roots)", ErrInvalid, len(files))
		}
		return nil
	}
	_, err := x.cfg.HostFiles.Sync(ctx, files)
	return err
}

func (x *Exec) save(s execState) error {
	if x.cfg.StateFile != "" {
		b, _ := json.Marshal(s)
		tmp := x.cfg.StateFile + ".tmp"
		if err := os.MkdirAll(filepath.Dir(x.cfg.StateFile), 0o755); err != nil {
			return fmt.Errorf("apply: exec state: %w", err)
		}
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return fmt.Errorf("apply: exec state: %w", err)
		}
		if err := os.Rename(tmp, x.cfg.StateFile); err != nil {
			return fmt.Errorf("apply: exec state: %w", err)
		}
	}
	x.cur = s
	return nil
}

func (x *Exec) cmd(action, machine string, number int64, spec *api.NixosConfigurationSpec) Cmd {
	return Cmd{Name: x.cfg.Command[0], Args: x.cfg.Command[1:], Env: Env(action, machine, number, spec)}
}

// Env is the environment the Exec applier's command gets: NICO_ACTION
// (apply or rollback), NICO_MACHINE, NICO_GENERATION, NICO_GIT_REPO,
// NICO_REF, NICO_REVISION, NICO_FLAKE_ATTR, NICO_CONFIGURATION_SUBDIR,
// NICO_OPERATION. A rollback to nothing has only the first three.
func Env(action, machine string, number int64, spec *api.NixosConfigurationSpec) []string {
	env := []string{"NICO_ACTION=" + action, "NICO_MACHINE=" + machine, "NICO_GENERATION=" + strconv.FormatInt(number, 10)}
	if spec == nil {
		return env
	}
	op := spec.Operation
	if op == "" {
		op = api.OperationSwitch
	}
	return append(env,
		"NICO_GIT_REPO="+spec.GitRepo, "NICO_REF="+spec.Ref, "NICO_REVISION="+spec.Revision,
		"NICO_FLAKE_ATTR="+spec.Attr(machine), "NICO_CONFIGURATION_SUBDIR="+spec.ConfigurationSubdir,
		"NICO_OPERATION="+string(op))
}

// ExecToplevel is the Exec applier's identity of the system spec selects.
func ExecToplevel(machine string, spec api.NixosConfigurationSpec) string {
	sel := struct {
		Repo, Ref, Rev, Attr, Subdir string
		Files                        []api.AdditionalFile
		HostFiles                    []api.HostFile `json:",omitempty"` // absent: digests from before host files hold
	}{spec.GitRepo, spec.Ref, spec.Revision, spec.Attr(machine), spec.ConfigurationSubdir, spec.AdditionalFiles, spec.HostFiles}
	b, _ := json.Marshal(sel)
	sum := sha256.Sum256(b)
	return "exec:" + hex.EncodeToString(sum[:8])
}
