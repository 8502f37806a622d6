package approvals

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkAuthorizeApprovedRun is the hot path of run mode: an action of
// an approved run is checked and counted (one synchronous SQLite commit).
func BenchmarkAuthorizeApprovedRun(b *testing.B) {
	s, run := approvedRunStore(b)
	ctx := context.Background()
	a := act("run-box", "uptime")
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Authorize(ctx, run, a, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolveRemote: token parse, lookup, constant-time compare.
func BenchmarkResolveRemote(b *testing.B) {
	s := benchStore(b, nil)
	ctx := context.Background()
	_, tok, err := s.CreateRemote(ctx, RemoteRun{Requester: "agent"})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.ResolveRemote(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolveLocal walks this process's real /proc chain and finds
// its existing run.
func BenchmarkResolveLocal(b *testing.B) {
	s := benchStore(b, &ProcFS{})
	ctx := context.Background()
	peer := Peer{PID: os.Getpid(), UID: os.Geteuid()}
	if _, err := s.ResolveLocal(ctx, peer); err != nil {
		b.Skipf("no anchor for this process tree: %v", err)
	}
	for b.Loop() {
		if _, err := s.ResolveLocal(ctx, peer); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDigestOf(b *testing.B) {
	a := Action{Target: "build-box", Account: "deploy", Command: "make -C /srv/app release", Timeout: time.Minute}
	for b.Loop() {
		DigestOf("run_0123456789abcdef0123456789abcdef", a)
	}
}

// BenchmarkVerifyPassword uses DefaultArgon2: known and unknown names
// should cost the same.
func BenchmarkVerifyPassword(b *testing.B) {
	ctx := context.Background()
	acc, err := OpenAccounts(ctx, filepath.Join(b.TempDir(), "state.db"), DefaultArgon2)
	if err != nil {
		b.Fatal(err)
	}
	defer acc.Close()
	if err := acc.Add(ctx, "rita", NewSecret("a long enough password"), "test"); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"rita", "nobody"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				acc.Verify(ctx, name, NewSecret("a wrong password here"))
			}
		})
	}
}

func benchStore(b *testing.B, insp Inspector) *Store {
	b.Helper()
	if insp == nil {
		insp = newFakeInspector()
	}
	s, err := Open(context.Background(), Options{
		Path: filepath.Join(b.TempDir(), "state.db"), Sink: EventSinkFunc(func(context.Context, Event) error { return nil }),
		Inspector: insp, Argon2: cheapArgon, Policy: Policy{Rules: []Rule{{Target: "run-box", Mode: ModeRun}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func approvedRunStore(b *testing.B) (*Store, RunID) {
	s := benchStore(b, nil)
	ctx := context.Background()
	s.Accounts().Add(ctx, "rita", NewSecret("a long enough password"), "test")
	rv, _ := s.Accounts().Verify(ctx, "rita", NewSecret("a long enough password"))
	run, _, err := s.CreateRemote(ctx, RemoteRun{Requester: "agent"})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	pending := make(chan RequestID, 1)
	go func() {
		_, err := s.Authorize(ctx, run.ID, act("run-box", "ls"), func(q Request) { pending <- q.ID })
		done <- err
	}()
	if _, err := s.Decide(ctx, rv, <-pending, Decision{Verdict: Approve, TTL: ttl(DefaultMaxRunTTL)}); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return s, run.ID
}
