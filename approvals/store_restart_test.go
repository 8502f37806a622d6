package approvals

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRestartPersistence(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rv := e.reviewer("rita")
	approved, tok := e.remoteRun()
	q, ch := e.authorize(ctx, approved.ID, act("run-box", "ls"))
	e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve, MaxActions: 10})
	recv(t, ch)
	denied, _ := e.remoteRun()
	q, ch = e.authorize(ctx, denied.ID, act("run-box", "ls"))
	e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Deny, Reason: "no"})
	recv(t, ch)
	waiting, _ := e.remoteRun()
	pendingReq, ch := e.authorize(ctx, waiting.ID, act("call-box", "ls"))

	e.reopen()
	if o := recv(t, ch); !errors.Is(o.err, ErrClosed) {
		t.Errorf("waiter across Close: %v, want ErrClosed", o.err)
	}
	if got, _ := e.s.Request(ctx, pendingReq.ID); got.Status != StatusExpired || got.Reason != "gateway restarted" {
		t.Errorf("pending request after restart: %v %q, want expired", got.Status, got.Reason)
	}
	if p, _ := e.s.Pending(ctx); len(p) != 0 {
		t.Errorf("pending after restart: %d", len(p))
	}
	// The approved run still works, with its token and its counters.
	if _, err := e.s.ResolveRemote(ctx, tok); err != nil {
		t.Fatalf("ResolveRemote after restart: %v", err)
	}
	if res, err := e.s.Authorize(ctx, approved.ID, act("run-box", "ls"), nil); err != nil || res.Reviewer != "rita" {
		t.Fatalf("Authorize after restart: %+v, %v", res, err)
	}
	got, _ := e.s.Run(ctx, approved.ID)
	if got.Actions != 2 || got.MaxActions != 10 {
		t.Errorf("approved run after restart: actions %d max %d", got.Actions, got.MaxActions)
	}
	if _, err := e.s.Authorize(ctx, denied.ID, act("run-box", "ls"), nil); !errors.Is(err, ErrRunDenied) {
		t.Errorf("denied run after restart: err = %v", err)
	}
	// The reviewer account survived too, and its TTL timer was re-armed.
	e.reviewer("rita")
	e.clock.Advance(DefaultRunTTL)
	if got, _ := e.s.Run(ctx, approved.ID); got.State != RunExpired {
		t.Errorf("approved run after its TTL across a restart: %v", got.State)
	}
	kinds := e.sink.kinds()
	if last := kinds[len(kinds)-1]; last != "run.ended" {
		t.Errorf("last event %q, want run.ended", last)
	}
}

func TestOpenOptions(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		o    Options
		want error
	}{
		{"run ttl over cap", Options{RunTTL: 9 * time.Hour}, ErrTTLOverCap},
		{"negative timeout", Options{ApprovalTimeout: -1}, ErrBadTTL},
		{"bad policy", Options{Policy: Policy{Rules: []Rule{{Mode: 7}}}}, ErrUnknownValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Path, tc.o.Sink = dir+"/state.db", &recorder{}
			if _, err := Open(context.Background(), tc.o); !errors.Is(err, tc.want) {
				t.Errorf("Open: err = %v, want %v", err, tc.want)
			}
		})
	}
}

// Standard input is part of what a call approval binds: a different
// input is a different action, and an action without input keeps the
// digest it always had.
func TestStdinIsBoundIntoTheDigest(t *testing.T) {
	a := Action{Target: "t", Account: "a", Command: "cat > f", Timeout: time.Minute}
	withIn := a
	withIn.Stdin = &Stdin{Size: 2, SHA256: sha256.Sum256([]byte("a\n"))}
	other := a
	other.Stdin = &Stdin{Size: 2, SHA256: sha256.Sum256([]byte("b\n"))}
	reason := withIn
	reason.AgentReason = "to write f"
	d := DigestOf("run_x", a)
	if d == DigestOf("run_x", withIn) || DigestOf("run_x", withIn) == DigestOf("run_x", other) {
		t.Error("standard input does not change the digest")
	}
	if DigestOf("run_x", withIn) != DigestOf("run_x", reason) {
		t.Error("the agent's reason changed the digest")
	}
	if !bytes.HasPrefix(CanonicalAction("run_x", a)[4:], []byte(canonicalDomain)) {
		t.Error("an action without input is not encoded as it always was")
	}
}

// A state database of schema 1 (before standard input) opens, keeps what
// it held, and takes requests with standard input from then on.
func TestMigrationFromSchema1(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	ddl, err := os.ReadFile("testdata/schema-v1.sql")
	if err != nil {
		t.Fatal(err)
	}
	old, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{string(ddl), "PRAGMA user_version = 1",
		`INSERT INTO runs (id, state, requester, created_at) VALUES ('run_old', 'pending', 'remote:ci@10.0.0.1', 1)`,
		`INSERT INTO requests (id, kind, run_id, target, account, command, timeout_ns, digest, requester, requested_at, expires_at, status)
		 VALUES ('apr_old', 'call', 'run_old', 'call-box', 'deploy', 'ls', 60000000000, zeroblob(32), 'remote:ci@10.0.0.1', 1, 2, 'denied')`} {
		if _, err := old.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	old.Close()
	os.Chmod(path, 0o600)

	e := newEnv(t, func(o *Options) { o.Path = path })
	if q, err := e.s.Request(ctx, "apr_old"); err != nil || q.Command != "ls" || q.Stdin != nil || q.Status != StatusDenied {
		t.Fatalf("the old request: %+v %v", q, err)
	}
	run, _ := e.remoteRun()
	a := act("call-box", "cat > f")
	a.Stdin, a.AgentReason = &Stdin{Size: 2, SHA256: sha256.Sum256([]byte("a\n")), Text: "a\n"}, "to write f"
	q, _ := e.authorize(ctx, run.ID, a)
	if got, err := e.s.Request(ctx, q.ID); err != nil || got.Stdin == nil || *got.Stdin != *a.Stdin {
		t.Fatalf("a pending request with standard input after the migration: %+v %v", got, err)
	}
	e.reopen()
	// The restart expired it: its input's text is gone, its size and
	// digest stay.
	got, err := e.s.Request(ctx, q.ID)
	want := Stdin{Size: a.Stdin.Size, SHA256: a.Stdin.SHA256}
	if err != nil || got.Stdin == nil || *got.Stdin != want || got.AgentReason != "to write f" || got.Digest != DigestOf(run.ID, a) {
		t.Fatalf("a request with standard input after the migration: %+v %v", got, err)
	}
}
