package approvals

import (
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
)

// What makes an anchor weak evidence of which program asked: a reviewer
// approves "this process", and these say the process may not be what its
// card shows, or may stand for far more than one agent.
const (
	// WarnExeGone: the executable was deleted or replaced after the
	// process started, or lives only in memory (memfd): its hash is of
	// what runs, but no file on disk shows it.
	WarnExeGone = "executable_deleted"
	// WarnExeUnknown: the gateway could not read the executable.
	WarnExeUnknown = "executable_unknown"
	// WarnExeWritable: the agent's own user can change the executable
	// (or its directory): the next process of that name may run other
	// code.
	WarnExeWritable = "executable_writable_by_agent"
	// WarnSessionAnchor: the anchor is a terminal multiplexer, a session
	// manager, a login shell server or an IDE server — everything started
	// under it shares the run.
	WarnSessionAnchor = "session_process"
)

// sessionNames are executables that hold whole sessions: approving one as
// an agent approves everything run under it.
var sessionNames = map[string]bool{
	"tmux": true, "tmux: server": true, "screen": true, "SCREEN": true, "zellij": true, "byobu": true,
	"sshd": true, "systemd": true, "login": true, "gnome-session": true, "gnome-session-binary": true,
	"plasmashell": true, "xfce4-session": true, "lxsession": true, "code-server": true, "code": true,
	"cursor": true, "jupyter": true, "jupyter-lab": true, "jupyter-notebook": true, "emacs": true,
	"gnome-terminal-server": true, "konsole": true, "xterm": true, "kitty": true, "alacritty": true, "wezterm-gui": true,
}

// WarningText says a warning in a sentence for reviewers.
func WarningText(w string) string {
	switch w {
	case WarnExeGone:
		return "its executable was deleted or replaced, or lives only in memory: no file shows what runs"
	case WarnExeUnknown:
		return "its executable could not be read: the name shown is the process's own claim"
	case WarnExeWritable:
		return "its own user can change its executable: the same name may run other code next time"
	case WarnSessionAnchor:
		return "it is a terminal, session or IDE process: everything started under it shares this run"
	}
	return w
}

// anchorWarnings is the weak evidence of p: what its executable and its
// name say. stat reads a file's metadata (os.Stat in production).
func anchorWarnings(p Process, stat func(string) (fs.FileInfo, error)) []string {
	var w []string
	exe := p.Exe
	switch {
	case exe == "" || p.ExeSHA256 == "":
		w = append(w, WarnExeUnknown)
	case strings.HasSuffix(exe, " (deleted)") || strings.HasPrefix(exe, "/memfd:"):
		w = append(w, WarnExeGone)
	case p.UID != 0 && writableBy(exe, p.UID, p.GID, stat):
		// (root can change every file: the warning would say nothing.)
		w = append(w, WarnExeWritable)
	}
	base := filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	if sessionNames[base] || sessionNames[p.Comm] || strings.Contains(exe, "/.vscode-server/") || strings.Contains(exe, "/.cursor-server/") {
		w = append(w, WarnSessionAnchor)
	}
	return w
}

// writableBy reports whether uid (with primary group gid) may change the
// file at path, or replace it in its directory, as far as mode bits and
// owners say.
func writableBy(path string, uid, gid int, stat func(string) (fs.FileInfo, error)) bool {
	for _, p := range []string{path, filepath.Dir(path)} {
		fi, err := stat(p)
		if err != nil {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		m := fi.Mode().Perm()
		if p == filepath.Dir(path) && fi.Mode()&fs.ModeSticky != 0 && int(st.Uid) != uid {
			continue // a sticky directory: only the file's owner may replace it
		}
		switch {
		case int(st.Uid) == uid && m&0o200 != 0,
			int(st.Gid) == gid && m&0o020 != 0,
			m&0o002 != 0:
			return true
		}
	}
	return false
}
