package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy/policy"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// TestTransferPutAndGet: a put is approved with its exact bytes shown,
// lands whole with its mode, is refused over an existing file without
// overwrite, and its upload serves it alone; a get's bytes are fetched
// once, checked against the recorded digest. Against a real sshd.
func TestTransferPutAndGet(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	dir := sshtest.WritableDir(t)
	g := startGateway(t, s, gwOptions{})
	ctx := context.Background()
	content := []byte("port: 8080\ndebug: false\n")
	remote := filepath.Join(dir, "config.yml")

	up, err := g.agent.Upload(ctx, bytes.NewReader(content), int64(len(content)))
	sum := sha256.Sum256(content)
	if err != nil || up.Size != int64(len(content)) || up.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("upload: %v %+v", err, up)
	}
	put := api.ActionRequest{Target: "box-call", Put: &api.PutRequest{Upload: up.ID, Path: remote, Mode: "0640"}}
	res := g.runAsync(put)
	ap := g.decideNext("call", "approve", "")
	if ap.Command != "put "+remote+" mode 0640" || ap.StdinBytes != int64(len(content)) || ap.StdinText != string(content) || ap.Class != "mutating" ||
		ap.Transfer == nil || ap.Transfer.Path != remote || ap.Transfer.Mode != "0640" || ap.Transfer.SHA256 != up.SHA256 {
		t.Errorf("the reviewer saw %q, %d bytes %q, class %s", ap.Command, ap.StdinBytes, ap.StdinText, ap.Class)
	}
	r := <-res
	if r.err != nil || !r.a.Success() || r.a.Transfer == nil || !r.a.Transfer.Published || r.a.Transfer.SHA256 != up.SHA256 {
		t.Fatalf("put: %v %+v %+v", r.err, r.a, r.a.Transfer)
	}
	if b, err := os.ReadFile(remote); err != nil || !bytes.Equal(b, content) {
		t.Fatalf("the file on the target: %q %v", b, err)
	}
	// Decided and run, the request keeps the file's digest in state.db,
	// not its text (the output store keeps the bytes, as evidence).
	for _, f := range []string{"state.db", "state.db-wal"} {
		if b, err := os.ReadFile(filepath.Join(g.cfg.StateDir, f)); err == nil && bytes.Contains(b, content) {
			t.Errorf("%s still holds the put's text after the decision", f)
		}
	}
	if st, _ := os.Stat(remote); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	rq := g.auditEntries("action.requested", r.a.ID)
	fin := g.auditEntries("action.finished", r.a.ID)
	if len(rq) != 1 || rq[0].Fields["transfer_direction"] != "put" || rq[0].Fields["transfer_path"] != remote || rq[0].Fields["transfer_sha256"] != up.SHA256 ||
		len(fin) != 1 || fin[0].Fields["transfer_published"] != true || fin[0].Fields["transfer_bytes"] != float64(len(content)) {
		t.Errorf("audit: %+v / %+v", rq, fin)
	}

	// The upload served that put alone.
	a, err := g.agent.RunAction(ctx, put, api.Events{})
	if err != nil || a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, "no such upload") {
		t.Fatalf("the upload used twice: %v %+v", err, a)
	}

	// Over the existing file: refused without overwrite, then replaced.
	other := []byte("port: 9090\n")
	for _, overwrite := range []bool{false, true} {
		up, err := g.agent.Upload(ctx, bytes.NewReader(other), int64(len(other)))
		if err != nil {
			t.Fatal(err)
		}
		res := g.runAsync(api.ActionRequest{Target: "box-call", Put: &api.PutRequest{Upload: up.ID, Path: remote, Overwrite: overwrite}})
		ap := g.decideNext("call", "approve", "")
		r := <-res
		switch {
		case !overwrite && (r.a.Outcome != sshexec.Exited || *r.a.ExitCode != 1 || r.a.Transfer.Published || !strings.Contains(r.a.Detail, "exists") ||
			!strings.Contains(r.a.Detail, "--overwrite") || !strings.Contains(r.a.Detail, `"overwrite": true`)):
			t.Errorf("without overwrite: %+v", r.a)
		case overwrite && (!r.a.Success() || !r.a.Transfer.Replaced || ap.Class != "destructive"):
			t.Errorf("with overwrite: %+v (class %s)", r.a, ap.Class)
		}
	}
	if b, _ := os.ReadFile(remote); !bytes.Equal(b, other) {
		t.Errorf("after overwrite: %q", b)
	}

	// Get: the bytes come once, checked against the recorded digest.
	res = g.runAsync(api.ActionRequest{Target: "box-call", Get: &api.GetRequest{Path: remote}})
	g.decideNext("call", "approve", "")
	r = <-res
	if r.err != nil || !r.a.Success() || r.a.Transfer == nil || r.a.Transfer.File == "" || r.a.Transfer.Size != int64(len(other)) || r.a.Stdout != "" {
		t.Fatalf("get: %v %+v %+v", r.err, r.a, r.a.Transfer)
	}
	var got bytes.Buffer
	if n, err := g.agent.Fetch(ctx, r.a, &got); err != nil || n != int64(len(other)) || !bytes.Equal(got.Bytes(), other) {
		t.Fatalf("fetch: %d %v %q", n, err, got.Bytes())
	}
	if _, err := g.agent.Fetch(ctx, r.a, &got); err == nil {
		t.Error("a delivered file was fetched twice")
	}

	// Refused before anything is dialed.
	for _, req := range []api.ActionRequest{
		{Target: "box-call", Get: &api.GetRequest{Path: dir + "/../etc/passwd"}},
		{Target: "box-call", Get: &api.GetRequest{Path: "files/config.yml"}},
		{Target: "box-call", Get: &api.GetRequest{Path: dir + "/a\nb"}},
		{Target: "box-call", Put: &api.PutRequest{Upload: "upl_x", Path: remote, Mode: "4755"}},
		{Target: "box-call", Command: "cat x", Get: &api.GetRequest{Path: remote}},
		{Target: "box-call", Put: &api.PutRequest{Path: remote}, Get: &api.GetRequest{Path: remote}},
	} {
		a, err := g.agent.RunAction(ctx, req, api.Events{})
		if err != nil || a.Outcome != sshexec.Rejected {
			t.Errorf("%+v: %v %+v", req, err, a)
			continue
		}
		if c := g.auditEntries("action.connecting", a.ID); len(c) != 0 {
			t.Errorf("%q was dialed", a.Command)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".airlock-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	g.verifyAudit()
}

// transferPolicy lets airlock-action put under DIR/data/in and get under
// DIR/data, with no verb besides.
const transferPolicy = `
transfer {
  put_under = ["DIR/data/in"]
  get_under = ["DIR/data"]
  max_size  = "1MiB"
}
`

// TestTransferThroughAirlockAction: an account forced to airlock-action
// takes puts and gets through its built-in verbs (the bytes on standard
// input and output), confined to its transfer block, checked on both
// sides. Through a real sshd and a real airlock-action.
func TestTransferThroughAirlockAction(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	keyFile, polFile, dir := airlockActionAccount(t, s, transferPolicy)
	in := filepath.Join(dir, "data", "in")
	os.Mkdir(in, 0o777)
	os.Chmod(in, 0o777)
	g := startGateway(t, s, gwOptions{clientKey: keyFile, mutate: func(c *config.Config) {
		p, err := policy.Load(polFile)
		if err != nil {
			t.Fatal(err)
		}
		a := c.Targets["box-call"].Accounts[s.User]
		a.ActionPolicy, a.ActionPolicyFile = p, polFile
	}})
	ctx := context.Background()
	content := []byte("through the forced command\n")
	remote := filepath.Join(in, "note.txt")
	// put asks for a put; asked says whether a reviewer is asked (else it
	// is refused before).
	put := func(path string, overwrite, asked bool) *api.Action {
		t.Helper()
		up, err := g.agent.Upload(ctx, bytes.NewReader(content), int64(len(content)))
		if err != nil {
			t.Fatal(err)
		}
		res := g.runAsync(api.ActionRequest{Target: "box-call", Put: &api.PutRequest{Upload: up.ID, Path: path, Mode: "0600", Overwrite: overwrite}})
		if asked {
			g.decideNext("call", "approve", "")
		}
		r := <-res
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.a
	}
	if a := put(remote, false, true); !a.Success() || !a.Transfer.Published {
		t.Fatalf("put: %+v %+v", a, a.Transfer)
	}
	if b, err := os.ReadFile(remote); err != nil || !bytes.Equal(b, content) {
		t.Fatalf("the file: %q %v", b, err)
	}
	if st, _ := os.Stat(remote); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	// Again without overwrite: airlock-action refuses, says why, and the
	// detail says how to replace the file.
	if a := put(remote, false, true); a.Outcome != sshexec.Exited || *a.ExitCode == 0 || !strings.Contains(a.Detail, "exists") || a.Transfer.Published ||
		!strings.Contains(a.Detail, "--overwrite") || !strings.Contains(a.Detail, `"overwrite": true`) {
		t.Errorf("a second put: %+v", a)
	}
	// Outside put_under: refused by the gateway, nothing dialed.
	a := put(filepath.Join(dir, "data", "note.txt"), false, false)
	if a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, "allowed under") {
		t.Errorf("a put outside put_under: %+v", a)
	}
	if c := g.auditEntries("action.connecting", a.ID); len(c) != 0 {
		t.Error("the refused put was dialed")
	}

	// Get through the forced command; the bytes are checked and fetched.
	res := g.runAsync(api.ActionRequest{Target: "box-call", Get: &api.GetRequest{Path: remote}})
	g.decideNext("call", "approve", "")
	r := <-res
	if r.err != nil || !r.a.Success() || r.a.Transfer.Size != int64(len(content)) {
		t.Fatalf("get: %v %+v %+v", r.err, r.a, r.a.Transfer)
	}
	var got bytes.Buffer
	if _, err := g.agent.Fetch(ctx, r.a, &got); err != nil || !bytes.Equal(got.Bytes(), content) {
		t.Fatalf("fetch: %v %q", err, got.Bytes())
	}
	// A link inside get_under that leads out of it: airlock-action
	// refuses it on the target.
	os.Symlink("/etc/hostname", filepath.Join(dir, "data", "out"))
	res = g.runAsync(api.ActionRequest{Target: "box-call", Get: &api.GetRequest{Path: filepath.Join(dir, "data", "out")}})
	g.decideNext("call", "approve", "")
	if r := <-res; r.err != nil || r.a.Success() || r.a.Transfer.File != "" {
		t.Errorf("a get through a link: %v %+v", r.err, r.a)
	}
	g.verifyAudit()
}

// TestCutPutThroughAirlockAction: a put through airlock-action whose
// session is killed halfway publishes nothing, and airlock-action removes
// its temporary file once its input ends.
func TestCutPutThroughAirlockAction(t *testing.T) {
	t.Parallel()
	s := sshtest.NewSSHD(t, sshtest.Options{}) // its sessions are killed
	keyFile, _, dir := airlockActionAccount(t, s, transferPolicy)
	in := filepath.Join(dir, "data", "in")
	os.Mkdir(in, 0o777)
	os.Chmod(in, 0o777)
	signer, err := config.LoadSigner(&config.Credential{Name: "k", PrivateKeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	remote := filepath.Join(in, "cut")
	cfg := &sshexec.Config{Addr: s.Addr, User: s.User, Signers: []ssh.Signer{signer}, HostKeys: sshexec.HostKeys{Pinned: []ssh.PublicKey{s.HostKey}}}
	res, _ := sshexec.Put(context.Background(), cfg, sshexec.PutFile{Path: remote, Mode: 0o644, Exec: true,
		Data: sshtest.CutReader(data, func() { s.KillSessions() }), Size: int64(len(data)), SHA256: sha256.Sum256(data)})
	if res == nil || res.Success() {
		t.Fatalf("a cut put: %+v", res)
	}
	if _, err := os.Stat(remote); err == nil {
		t.Fatal("a cut put was published")
	}
	testkit.EventuallyErr(t, func() error {
		if left, _ := filepath.Glob(filepath.Join(in, ".airlock-*")); len(left) > 0 {
			return fmt.Errorf("airlock-action left %v", left)
		}
		return nil
	}, "a cut put's temporary files to be removed")
}

// TestTransferAtTheCap: a file of exactly the account's max_transfer moves
// byte for byte both ways; one byte more is refused before anything is
// dialed (put) or before a byte is read (get). And the bytes a reviewer
// approved are the ones that land, whatever else the agent uploads
// meanwhile.
func TestTransferAtTheCap(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	dir := sshtest.WritableDir(t)
	const limit = 64 << 10
	g := startGateway(t, s, gwOptions{mutate: func(c *config.Config) {
		c.Targets["box-call"].Accounts[s.User].MaxTransfer = limit
	}})
	ctx := context.Background()
	atCap := make([]byte, limit)
	for i := range atCap {
		atCap[i] = byte(i * 7)
	}
	upload := func(b []byte) string {
		t.Helper()
		up, err := g.agent.Upload(ctx, bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		return up.ID
	}
	remote := filepath.Join(dir, "at-cap.bin")
	res := g.runAsync(api.ActionRequest{Target: "box-call", Put: &api.PutRequest{Upload: upload(atCap), Path: remote}})
	ap := g.decideNext("call", "approve", "")
	// Meanwhile the agent uploads other bytes: nothing ties them to the
	// approved put.
	upload([]byte("other bytes"))
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("a put at the cap: %v %+v", r.err, r.a)
	}
	if b, _ := os.ReadFile(remote); !bytes.Equal(b, atCap) {
		t.Fatal("the bytes on the target are not the approved ones")
	}
	if sum := sha256.Sum256(atCap); ap.StdinSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("the reviewer saw digest %s", ap.StdinSHA256)
	}
	// An empty file, the other end.
	empty := filepath.Join(dir, "empty")
	res = g.runAsync(api.ActionRequest{Target: "box-call", Put: &api.PutRequest{Upload: upload(nil), Path: empty}})
	g.decideNext("call", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() || r.a.Transfer.Size != 0 {
		t.Fatalf("an empty put: %v %+v", r.err, r.a)
	}
	if st, err := os.Stat(empty); err != nil || st.Size() != 0 {
		t.Fatalf("the empty file: %v %v", st, err)
	}
	a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-call", Put: &api.PutRequest{Upload: upload(append(atCap, 0)), Path: filepath.Join(dir, "over.bin")}}, api.Events{})
	if err != nil || a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, "over the account's limit") {
		t.Errorf("a put over the cap: %v %+v", err, a)
	}

	res = g.runAsync(api.ActionRequest{Target: "box-call", Get: &api.GetRequest{Path: remote}})
	g.decideNext("call", "approve", "")
	r := <-res
	var got bytes.Buffer
	if r.err != nil || !r.a.Success() {
		t.Fatalf("a get at the cap: %v %+v", r.err, r.a)
	}
	if _, err := g.agent.Fetch(ctx, r.a, &got); err != nil || !bytes.Equal(got.Bytes(), atCap) {
		t.Fatalf("fetch: %v, %d bytes", err, got.Len())
	}
	over := filepath.Join(dir, "over-local.bin")
	os.WriteFile(over, append(atCap, 0), 0o644)
	res = g.runAsync(api.ActionRequest{Target: "box-call", Get: &api.GetRequest{Path: over}})
	g.decideNext("call", "approve", "")
	if r := <-res; r.err != nil || r.a.Success() || !strings.Contains(r.a.Detail, "over the limit") || r.a.Transfer.File != "" {
		t.Errorf("a get over the cap: %v %+v", r.err, r.a)
	}
}

// TestTransferGetRefusesASecretsValue: a file that holds the value of a
// gateway-held secret (an approved action wrote it there) is read but not
// delivered, with an answer that says why and what to do; its value and
// digest are nowhere, and the audit log stays intact. A file without one
// is delivered as ever.
func TestTransferGetRefusesASecretsValue(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	dir := sshtest.WritableDir(t)
	value := "pw-" + rand.Text()
	g := startGateway(t, s, gwOptions{extraConfig: secretBlock(t, "s1", value, "box-call")})
	ctx := context.Background()
	leak, big, clean := filepath.Join(dir, "leak"), filepath.Join(dir, "big"), filepath.Join(dir, "clean")
	res := g.runAsync(api.ActionRequest{Target: "box-call", Secret: "s1", Command: "cat > " + leak})
	g.decideNext("call", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("writing the secret to a file: %v %+v", r.err, r.a)
	}
	// Far into a file, where it spans the transfer's chunks.
	if err := os.WriteFile(big, append(bytes.Repeat([]byte("x"), 100<<10-5), "k="+value+"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(clean, []byte("pw-"+value[:len(value)-1]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, remote := range []string{leak, big} {
		res := g.runAsync(api.ActionRequest{Target: "box-call", Get: &api.GetRequest{Path: remote}})
		g.decideNext("call", "approve", "")
		r := <-res
		if r.err != nil || r.a.Outcome != sshexec.Exited || r.a.ExitCode == nil || *r.a.ExitCode != 1 ||
			!strings.Contains(r.a.Detail, "holds the value of the gateway-held secret s1, so it was not delivered") || !strings.Contains(r.a.Detail, "ask a human") {
			t.Fatalf("get %s: %v %+v", remote, r.err, r.a)
		}
		if tr := r.a.Transfer; tr == nil || tr.File != "" || tr.SHA256 != "" {
			t.Errorf("get %s: the transfer offers the file or its digest: %+v", remote, tr)
		}
		if _, err := g.agent.Fetch(ctx, r.a, io.Discard); err == nil {
			t.Errorf("get %s: the file was fetched", remote)
		}
		fin := g.auditEntries("action.finished", r.a.ID)
		if len(fin) != 1 || !strings.Contains(fmt.Sprint(fin[0].Fields["detail"]), "secret s1") {
			t.Errorf("get %s: action.finished %+v", remote, fin)
		}
		ids = append(ids, r.a.ID)
	}
	// A near miss is no secret's value: delivered.
	res = g.runAsync(api.ActionRequest{Target: "box-call", Get: &api.GetRequest{Path: clean}})
	g.decideNext("call", "approve", "")
	r := <-res
	var got bytes.Buffer
	if r.err != nil || !r.a.Success() {
		t.Fatalf("get %s: %v %+v", clean, r.err, r.a)
	}
	if _, err := g.agent.Fetch(ctx, r.a, &got); err != nil || got.String() != "pw-"+value[:len(value)-1]+"\n" {
		t.Fatalf("fetch %s: %v %q", clean, err, got.String())
	}
	for _, b := range g.readBack(t, ids...) {
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("an API answer holds the secret's value: %s", b)
		}
	}
	if strings.Contains(g.logs.String(), value) {
		t.Error("the gateway's log holds the secret's value")
	}
	g.verifyAudit()
	g.stop()
	scanForValue(t, g.cfg.StateDir, value, "stopped")
}
