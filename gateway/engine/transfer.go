package engine

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
)

// A file transfer is an action like a command: one approval (bound to the
// path, mode, overwrite and, for a put, the exact bytes), one fresh
// connection, one outcome. The bytes never pass through the action
// object: a put's come from an upload in the spool, a get's go to the
// spool, from which the run's agent fetches them.

// maxRemotePath bounds a transfer's remote path.
const maxRemotePath = 4096

// DefaultPutMode is a put's file mode when the request names none.
const DefaultPutMode = 0o644

// describeTransfer says a transfer request in words: the action's
// command, which reviewers read and the digest binds.
func describeTransfer(req api.ActionRequest) string {
	switch {
	case req.Put != nil && req.Get == nil:
		s := "put " + req.Put.Path + " mode " + cmp.Or(req.Put.Mode, fmt.Sprintf("%04o", DefaultPutMode))
		if req.Put.Overwrite {
			s += " overwrite"
		}
		return s
	case req.Get != nil && req.Put == nil:
		return "get " + req.Get.Path
	}
	return ""
}

// checkTransfer checks a put or get request against the account; problem
// says why it is refused.
func (l *lifecycle) checkTransfer() (problem string) {
	req := l.req
	var p string
	switch {
	case req.Put != nil && req.Get != nil:
		return "an action is a put or a get, not both"
	case req.Stdin != "" || req.Secret != "":
		return "a file transfer takes no stdin or secret: a put's bytes are its upload"
	case req.Command != describeTransfer(req):
		return "a file transfer takes no command: leave command empty"
	case l.account.MaxTransfer == 0:
		return fmt.Sprintf("account %q of target %q takes no file transfers (max_transfer = 0)", l.account.Name, l.target.Name)
	case l.account.ActionPolicy != nil && l.account.ActionPolicy.Transfer == nil:
		return fmt.Sprintf("account %q of target %q runs airlock-action, whose policy (%s) has no transfer block: it takes no file transfers", l.account.Name, l.target.Name, l.account.ActionPolicyFile)
	case req.Put != nil:
		p = req.Put.Path
	default:
		p = req.Get.Path
	}
	switch {
	case len(p) > maxRemotePath:
		return fmt.Sprintf("the remote path is %d bytes, over the %d-byte limit", len(p), maxRemotePath)
	case p == "" || !path.IsAbs(p) || path.Clean(p) != p || p == "/":
		return fmt.Sprintf("the remote path %q must be absolute and clean (no \"..\", no \"//\", no trailing slash)", clip(p, 256))
	case !utf8.ValidString(p) || strings.IndexFunc(p, unicode.IsControl) >= 0:
		return fmt.Sprintf("the remote path %q holds control characters or is not UTF-8", clip(p, 256))
	}
	if ap := l.account.ActionPolicy; ap != nil {
		// The target's airlock-action would refuse it: nothing is sent.
		if err := ap.Transfer.Allows(req.Put != nil, p); err != nil {
			return "the account's airlock-action policy (" + l.account.ActionPolicyFile + ") refuses it, so nothing was sent: " + err.Error()
		}
	}
	if req.Get != nil {
		l.xfer = &approvals.Transfer{Direction: "get", Path: p}
		return ""
	}
	mode := uint64(DefaultPutMode)
	if m := req.Put.Mode; m != "" {
		var err error
		if mode, err = strconv.ParseUint(m, 8, 32); err != nil || len(m) > 5 {
			return fmt.Sprintf("mode %q is not an octal file mode such as \"0644\"", clip(m, 16))
		}
	}
	if mode&^uint64(fs.ModePerm) != 0 {
		return fmt.Sprintf("mode %04o: only permission bits (at most 0777) are allowed; setuid, setgid and sticky are refused", mode)
	}
	if req.Put.Upload == "" {
		return "a put names its upload (POST /v1/uploads first)"
	}
	l.mode = fs.FileMode(mode)
	l.xfer = &approvals.Transfer{Direction: "put", Path: p, Mode: uint32(mode), Overwrite: req.Put.Overwrite}
	return ""
}

// roomForGet says whether the run may hold one more file in the spool
// for a get; problem says why not.
func (l *lifecycle) roomForGet() (problem string) {
	if l.e.spool.count(l.run.ID) >= maxSpoolPerRun {
		return errSpoolFull.Error() + " (a got file stays until its agent fetched it whole, or an hour)"
	}
	if err := l.e.spool.roomFor(l.run.Requester, 0, l.conf.cfg.Transfer); err != nil {
		return err.Error()
	}
	return ""
}

// takeUpload takes the put's upload from the spool for this action alone
// (whatever becomes of it, nobody else can use it) and describes its
// bytes for reviewers and the digest.
func (l *lifecycle) takeUpload() (problem string) {
	f, err := l.e.spool.take(l.run.ID, l.req.Put.Upload)
	if err != nil {
		return err.Error()
	}
	l.upload = f
	if f.size > l.maxTransfer() {
		return fmt.Sprintf("the file is %d bytes, over the account's limit of %d bytes (max_transfer, and its airlock-action policy's max_size)", f.size, l.maxTransfer())
	}
	l.uploaded = &approvals.Stdin{Size: f.size, SHA256: f.sum}
	if f.size <= approvals.MaxStdinText {
		// Short text is shown to reviewers as it is.
		if b, err := os.ReadFile(f.path); err == nil {
			if in := stdinFacts(b); in != nil && in.SHA256 == f.sum {
				l.uploaded = in
			}
		}
	}
	return ""
}

// transferFacts describe the transfer for action.requested, nil for a
// command.
func (l *lifecycle) transferFacts() *transferFacts {
	t := l.xfer
	if t == nil {
		return nil
	}
	tf := &transferFacts{Direction: t.Direction, Path: t.Path, Overwrite: t.Overwrite}
	if t.Direction == "put" {
		tf.Mode = fmt.Sprintf("%04o", t.Mode)
	}
	if in := l.uploaded; in != nil {
		tf.Size, tf.SHA256 = &in.Size, &in.SHA256
	}
	return tf
}

// maxTransfer bounds a file of this action: the account's max_transfer,
// and its airlock-action policy's max_size.
func (l *lifecycle) maxTransfer() int64 {
	m := l.account.MaxTransfer
	if ap := l.account.ActionPolicy; ap != nil && ap.Transfer != nil {
		m = min(m, ap.Transfer.MaxSize)
	}
	return m
}

// Errors of a get's spool file, which goes with them: the get ended
// without the whole file, or the file holds a secret's value.
var (
	errGetFailed    = errors.New("the get did not succeed")
	errSecretInFile = errors.New("the file holds a gateway-held secret's value")
)

// refuseSecretFile makes r, a get whose bytes held the value of the
// gateway-held secret name, say that nothing was delivered and why; the
// file's digest goes too (it is a digest of the value when the file holds
// little else).
func (l *lifecycle) refuseSecretFile(r *sshexec.Result, name string) {
	l.e.log.Warn("a get was not delivered: the file holds a gateway-held secret's value", "action", l.a.id, "secret", name)
	r.Transfer.SHA256 = [32]byte{}
	if r.Outcome != sshexec.Exited {
		// It failed on its own: say that what came held the value too.
		r.Detail += "; what was read held the value of the gateway-held secret " + name + ", and none of it was kept"
		return
	}
	r.ExitCode, r.HasExitCode = 1, true
	r.Detail = "the file holds the value of the gateway-held secret " + name + ", so it was not delivered: the gateway kept none of it " +
		"and returns none (a secret's value never leaves the gateway); do not retry: ask a human to read the file, or to take the secret out of it"
}

// exec runs the action on the target: its command, or its transfer.
func (l *lifecycle) exec(ctx context.Context, cfg *sshexec.Config) (*sshexec.Result, error) {
	t := l.xfer
	switch {
	case t == nil:
		return sshexec.Run(ctx, cfg, l.sentCommand())
	case t.Direction == "put":
		f, err := os.Open(l.upload.path)
		if err != nil {
			return nil, fmt.Errorf("the upload is gone from the gateway's disk: %w", err)
		}
		defer f.Close()
		r, err := sshexec.Put(ctx, cfg, sshexec.PutFile{Path: t.Path, Mode: l.mode, Overwrite: t.Overwrite,
			Data: f, Size: l.upload.size, SHA256: l.upload.sum, Exec: l.account.ActionPolicy != nil})
		if r != nil && r.Transfer != nil && r.Transfer.Exists {
			// The action object does not say which client asked: name
			// the way each says it.
			r.Detail = t.Path + " exists on the target and was left as it is: a put replaces a file only when it says so. " +
				"To replace it, put it again with overwrite (airlock-ssh --put … --overwrite; \"overwrite\": true in the API's put and in MCP's ssh_put)"
		}
		return r, err
	}
	var r *sshexec.Result
	var runErr error
	scan := l.getScan()
	_, err := l.e.spool.add(l.run.ID, l.run.Requester, l.a.id+getSuffix, l.maxTransfer(), -1, l.conf.cfg.Transfer, func(w io.Writer) error {
		out := w
		if scan != nil {
			scan.w, out = w, scan
		}
		r, runErr = sshexec.Get(ctx, cfg, sshexec.GetFile{Path: t.Path, MaxSize: l.maxTransfer(), Out: out, Exec: l.account.ActionPolicy != nil})
		switch {
		case r == nil || !r.Success():
			return errGetFailed
		case scan != nil:
			if err := scan.flush(); err != nil {
				return err
			}
			if scan.found != "" {
				return errSecretInFile
			}
		}
		return nil
	})
	if r != nil && scan != nil && scan.found != "" {
		l.refuseSecretFile(r, scan.found)
		return r, runErr
	}
	switch {
	case r != nil:
		if err != nil && !errors.Is(err, errGetFailed) && r.Success() {
			// Every byte came, but the spool could not keep the file.
			r.Outcome, r.ExitCode = sshexec.Exited, 1
			r.Detail = "the file was read but could not be kept on the gateway's disk: " + err.Error()
			r.Transfer.LocalError = true
		}
		return r, runErr
	case err != nil:
		return nil, err
	}
	return r, runErr
}

// transferView is the transfer as the action object shows it.
func (l *lifecycle) transferView() *api.Transfer {
	t := l.xfer
	if t == nil {
		return nil
	}
	v := &api.Transfer{Direction: t.Direction, Path: t.Path, Overwrite: t.Overwrite}
	if t.Direction == "put" {
		v.Mode = fmt.Sprintf("%04o", t.Mode)
	}
	if in := l.uploaded; in != nil {
		v.Size, v.SHA256 = in.Size, hex.EncodeToString(in.SHA256[:])
	}
	r := l.res.conn
	if r == nil || r.Transfer == nil {
		return v
	}
	rt := r.Transfer
	v.Published, v.Replaced, v.Leftover = rt.Published, rt.Replaced, rt.Leftover
	if t.Direction == "get" {
		v.Size, v.SHA256 = rt.Bytes, hex.EncodeToString(rt.SHA256[:])
		if rt.SHA256 == ([32]byte{}) {
			v.SHA256 = "" // withheld: the file held a secret's value
		}
		if f, ok := l.e.spool.lookup(l.run.ID, l.a.id+getSuffix); ok && r.Success() {
			v.File = "/v1/actions/" + l.a.id + "/file"
			exp := f.expires.UTC()
			v.FileExpires = &exp
		}
	}
	return v
}
