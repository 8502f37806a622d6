// Package buildinfo says which airlock a binary is: the version it was
// released as (set at link time), else the module version and the VCS
// revision the Go toolchain stamped into it, so that a build from a
// checkout names its commit.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is set at link time for a release (-ldflags "-X
// github.com/airlockgw/airlock/deploy/buildinfo.Version=v1.2.3").
var Version = ""

// Info is what a binary knows about its build.
type Info struct {
	// Version is the release, or the module version ("(devel)" for a
	// build from a checkout).
	Version string
	// Revision is the VCS commit, "" when the build was not stamped (go
	// run, go test); Modified says the work tree had changes.
	Revision string
	Time     string
	Modified bool
	Go       string
}

// Read returns this binary's build information.
func Read() Info {
	i := Info{Version: Version, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if i.Version == "" {
			i.Version = "unknown"
		}
		return i
	}
	if i.Version == "" {
		i.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	return i
}

// String is the one line `--version` prints: "airlock-ssh v1.2.3
// (commit 0123abcd…, 2026-12-01T10:00:00Z, go1.26)".
func (i Info) String() string {
	var parts []string
	switch {
	case i.Revision != "" && i.Modified:
		parts = append(parts, "commit "+i.Revision+" with local changes")
	case i.Revision != "":
		parts = append(parts, "commit "+i.Revision)
	default:
		parts = append(parts, "no commit stamped: built by go run or go test")
	}
	if i.Time != "" {
		parts = append(parts, i.Time)
	}
	parts = append(parts, i.Go)
	return fmt.Sprintf("%s (%s)", i.Version, strings.Join(parts, ", "))
}
