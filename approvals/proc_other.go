//go:build !linux

package approvals

import (
	"context"
	"errors"
	"time"
)

// ProcFS identifies local callers on Linux only; elsewhere every call
// fails, so local runs are refused (remote runs still work).
type ProcFS struct {
	Root         string
	PollInterval time.Duration
	NoPidfd      bool
}

var errNoProcFS = errors.New("local callers are supported on Linux only")

// Stat fails: not Linux.
func (*ProcFS) Stat(int) (ProcStat, error) { return ProcStat{}, errNoProcFS }

// Describe fails: not Linux.
func (*ProcFS) Describe(ProcessID) (Process, error) { return Process{}, errNoProcFS }

// Wait fails: not Linux.
func (*ProcFS) Wait(context.Context, ProcessID) error { return errNoProcFS }
