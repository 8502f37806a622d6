package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/gateway/api"
)

// The file tools: a transfer is one action like a command, and its bytes
// never pass through the model's context. They go between the target
// and a transfer directory of the agent's own (Options.FileRoot), which
// only the stdio bridge has: over Streamable HTTP the bytes would land on
// the gateway's host, so the tools are not offered there.
const (
	ToolPut = "ssh_put"
	ToolGet = "ssh_get"
)

// Files is what the file tools need of a gateway besides Backend: the
// stdio bridge's *api.Client has it.
type Files interface {
	// Upload sends size bytes from r for a put (POST /v1/uploads).
	Upload(ctx context.Context, r io.Reader, size int64) (*api.Upload, error)
	// Fetch writes a successful get's bytes to w, checked against the
	// action's size and SHA-256.
	Fetch(ctx context.Context, a *api.Action, w io.Writer) (int64, error)
}

var _ Files = (*api.Client)(nil)

// transferFields describe the fields ssh_put and ssh_get share, once for
// both (transferSchema).
var transferFields = map[string]string{
	"target":    "name of a configured target, as list_targets shows it",
	"account":   "remote account on the target; omit it for the target's default account",
	"reason":    "what this transfer is for, in a sentence: shown to the reviewer as your own claim",
	"timeout_s": "seconds the transfer may take once connected (default 60, capped by the account's max_timeout_s)",
}

// transferSchema is the input schema of a file tool (PutInput, GetInput):
// inferred from T, with the shared fields' descriptions and bounds.
func transferSchema[T any]() *jsonschema.Schema {
	s := mustSchema[T]()
	for name, d := range transferFields {
		s.Properties[name].Description = d
	}
	one := 1
	for _, f := range []string{"target", "local_path", "path"} {
		s.Properties[f].MinLength = &one
	}
	s.Properties["timeout_s"].Minimum = new(1.0)
	s.Properties["reason"].MaxLength = new(api.MaxReason)
	return s
}

// PutInput is the input of ssh_put.
type PutInput struct {
	Target    string `json:"target"`
	LocalPath string `json:"local_path" jsonschema:"the file to send, as a relative path in this session's transfer directory (the result of an earlier ssh_get, or a file your host placed there); never an absolute path, never through a symbolic link"`
	Path      string `json:"path" jsonschema:"where the file goes on the target: an absolute path"`
	Mode      string `json:"mode,omitempty" jsonschema:"the file's mode in octal, such as 0640 (default 0644); setuid, setgid and sticky are refused"`
	Overwrite bool   `json:"overwrite,omitempty" jsonschema:"replace an existing file at path; without it an existing file makes the put fail and nothing changes"`
	Account   string `json:"account,omitempty"`
	Reason    string `json:"reason,omitempty"`
	TimeoutS  int    `json:"timeout_s,omitempty"`
}

// GetInput is the input of ssh_get.
type GetInput struct {
	Target    string `json:"target"`
	Path      string `json:"path" jsonschema:"the file to read on the target: an absolute path to a regular file"`
	LocalPath string `json:"local_path" jsonschema:"where to save it, as a relative path in this session's transfer directory; the bytes never come back in the result"`
	Overwrite bool   `json:"overwrite,omitempty" jsonschema:"replace an existing file at local_path"`
	Account   string `json:"account,omitempty"`
	Reason    string `json:"reason,omitempty"`
	TimeoutS  int    `json:"timeout_s,omitempty"`
}

// FileResult is the result of ssh_put and ssh_get: the action object, and
// where the file is in the transfer directory.
type FileResult struct {
	ActionResult
	LocalPath string `json:"local_path,omitempty" jsonschema:"the file in the transfer directory: sent (ssh_put) or saved (ssh_get, only when the action succeeded)"`
}

func putDescription(root string) string {
	return `Copy a file from this session's transfer directory (` + root + `) to an SSH target, as one action: approved like a command (the reviewer sees path, mode, size and SHA-256), recorded, sent over a fresh connection. The file is renamed to path only once all of it arrived with the approved digest; an existing file is replaced only with overwrite. Answers within the gateway's max_wait like ssh_exec (follow an action in flight with get_action). Result: the action object (exited with exit_code 0 when the file is in place); transfer says what landed.`
}

func getDescription(root string) string {
	return `Copy a file from an SSH target into this session's transfer directory (` + root + `), as one action: approved like a command, recorded, read over a fresh connection. The bytes go to local_path, never into this conversation; the SHA-256 is checked before the file is saved; an existing local_path is replaced only with overwrite. Answers within the gateway's max_wait like ssh_exec; an action in flight saves its file when it succeeds, and get_action says so. Result: the action object (exited with exit_code 0 when the file was saved).`
}

// fileTools serve ssh_put and ssh_get in root.
type fileTools struct {
	t    *tools
	f    Files
	root *os.Root
}

// localName checks a transfer-directory path: relative, clean, inside.
func localName(p string) (string, error) {
	switch {
	case p == "" || strings.ContainsRune(p, 0):
		return "", errors.New("local_path is empty")
	case path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return "", fmt.Errorf("local_path %q must be a clean relative path inside the transfer directory", p)
	}
	return p, nil
}

func (ft *fileTools) put(ctx context.Context, req *sdk.CallToolRequest, in PutInput) (*sdk.CallToolResult, *FileResult, error) {
	if err := checkArguments(req); err != nil {
		return nil, nil, err
	}
	name, err := localName(in.LocalPath)
	if err != nil {
		return nil, nil, err
	}
	st, err := ft.root.Lstat(name)
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("local_path %q: %v", name, unwrapPath(err))
	case !st.Mode().IsRegular():
		return nil, nil, fmt.Errorf("local_path %q is not a regular file (links are not followed)", name)
	}
	f, err := ft.root.Open(name)
	if err != nil {
		return nil, nil, fmt.Errorf("local_path %q: %v", name, unwrapPath(err))
	}
	defer f.Close()
	up, err := ft.f.Upload(ctx, f, st.Size())
	if err != nil {
		return nil, nil, backendError("the file could not be sent to the gateway", err)
	}
	rep := newReporter(ctx, req, ft.t.interval)
	defer rep.stop()
	a, _, err := ft.t.runHeld(ctx, api.ActionRequest{Target: in.Target, Account: in.Account, TimeoutS: in.TimeoutS, Reason: in.Reason,
		Put: &api.PutRequest{Upload: up.ID, Path: in.Path, Mode: in.Mode, Overwrite: in.Overwrite}}, rep.state, nil)
	if err != nil {
		return nil, nil, backendError("the put could not be requested", err)
	}
	r := &FileResult{ActionResult: *ft.t.sized(ctx, a), LocalPath: name}
	return fileResult(r, ""), r, nil
}

func (ft *fileTools) get(ctx context.Context, req *sdk.CallToolRequest, in GetInput) (*sdk.CallToolResult, *FileResult, error) {
	if err := checkArguments(req); err != nil {
		return nil, nil, err
	}
	name, err := localName(in.LocalPath)
	if err != nil {
		return nil, nil, err
	}
	if err := ft.checkDirs(name); err != nil {
		return nil, nil, err
	}
	if st, err := ft.root.Lstat(name); err == nil {
		switch {
		case !in.Overwrite:
			return nil, nil, fmt.Errorf("local_path %q exists; pass overwrite to replace it", name)
		case st.IsDir():
			return nil, nil, fmt.Errorf("local_path %q is a directory", name)
		}
	}
	rep := newReporter(ctx, req, ft.t.interval)
	defer rep.stop()
	// A get answered in flight saves its file when it succeeds, and
	// get_action says what became of it.
	saveLater := func(ctx context.Context, a *api.Action, err error) string {
		switch {
		case err != nil:
			return fmt.Sprintf("the get could not be followed to its end (%v), so nothing was saved to local_path %s; once get_action shows it finished, run ssh_get again", err, name)
		case !a.Success():
			return ""
		}
		if err := ft.save(ctx, a, name, in.Overwrite); err != nil {
			return fmt.Sprintf("the file was read on the target but not saved to local_path %s: %v", name, err)
		}
		return "the file was saved to local_path " + name
	}
	a, held, err := ft.t.runHeld(ctx, api.ActionRequest{Target: in.Target, Account: in.Account, TimeoutS: in.TimeoutS, Reason: in.Reason,
		Get: &api.GetRequest{Path: in.Path}}, rep.state, saveLater)
	if err != nil {
		return nil, nil, backendError("the get could not be requested", err)
	}
	r := &FileResult{ActionResult: *ft.t.sized(ctx, a)}
	if held {
		return fileResult(r, "once the get succeeds, the file is saved to local_path "+name+"; get_action then says so"), r, nil
	}
	if !a.Success() {
		return fileResult(r, ""), r, nil
	}
	if err := ft.save(ctx, a, name, in.Overwrite); err != nil {
		// The action succeeded; the file is not saved: said so, an error.
		res := fileResult(r, fmt.Sprintf("the file was read on the target but not saved to %s: %v", name, err))
		res.IsError = true
		return res, r, nil
	}
	r.LocalPath = name
	return fileResult(r, ""), r, nil
}

// checkDirs refuses a local path whose directories are links or not
// directories, before anything is asked: the file is saved where the
// path says, or not at all.
func (ft *fileTools) checkDirs(name string) error {
	dir := ""
	for _, el := range strings.Split(path.Dir(name), "/") {
		if el == "." {
			break
		}
		dir = path.Join(dir, el)
		st, err := ft.root.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // made when the file is saved
		case err != nil:
			return fmt.Errorf("local_path %q: %v", name, unwrapPath(err))
		case !st.IsDir():
			return fmt.Errorf("local_path %q: %s is not a directory (links are not followed)", name, dir)
		}
	}
	return nil
}

// save fetches a's bytes into a temporary file in the transfer directory
// and gives it name once they matched: by a rename with overwrite (which
// replaces a link there, never follows it, and gives the file the mode of
// the one it replaces), by a hard link without, which fails if something
// took the name meanwhile.
func (ft *fileTools) save(ctx context.Context, a *api.Action, name string, overwrite bool) error {
	var b [8]byte
	rand.Read(b[:])
	if dir := path.Dir(name); dir != "." {
		if err := ft.root.MkdirAll(dir, 0o700); err != nil {
			return unwrapPath(err)
		}
	}
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+".airlock-"+hex.EncodeToString(b[:])+".part")
	f, err := ft.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return unwrapPath(err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			ft.root.Remove(tmp)
		}
	}()
	if _, err := ft.f.Fetch(ctx, a, f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	// A file replaced keeps its permission bits (a new one stays 0600).
	if st, err := ft.root.Lstat(name); err == nil && overwrite && st.Mode().IsRegular() {
		if err := f.Chmod(st.Mode().Perm()); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if overwrite {
		err = ft.root.Rename(tmp, name)
	} else if err = ft.root.Link(tmp, name); err == nil {
		ft.root.Remove(tmp)
	}
	if err != nil {
		return unwrapPath(err)
	}
	done = true
	return nil
}

// unwrapPath drops the *PathError's operation and path (the root's
// directory): the message names the file as the agent does.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// fileResult is the tool result of a transfer: an error unless it
// succeeded, with a summary (and note) as text.
func fileResult(r *FileResult, note string) *sdk.CallToolResult {
	text := Summary(&r.ActionResult)
	if t := r.Transfer; t != nil && r.Success() {
		text += fmt.Sprintf("\n%s %s: %d bytes, sha256 %s", t.Direction, t.Path, t.Size, t.SHA256)
		if r.LocalPath != "" {
			text += ", local_path " + r.LocalPath
		}
	}
	if note != "" {
		text += "\n" + note
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, IsError: r.Outcome.Valid() && !r.Success()}
}
