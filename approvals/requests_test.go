package approvals

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Separation of duties: a reviewer never decides the requests of an
// identity linked to them — a Unix user, or any token of an agent.
func TestLinkedIdentitiesCannotDecide(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Links = map[string][]string{"Rita": {"user1000", "agent:ci-bot/"}}
	})
	ctx := context.Background()
	rita, bob := e.reviewer("rita"), e.reviewer("bob")
	agentTree(e.procs)
	local, err := e.s.ResolveLocal(ctx, Peer{PID: 60, UID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	agent, _, err := e.s.AddAgent(ctx, "ci-bot", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	remote, _, err := e.s.CreateRemote(ctx, RemoteRun{Requester: agent.Subject(), Agent: &agent})
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := e.s.CreateRemote(ctx, RemoteRun{Requester: "agent:other-bot/agt_0123456789abcdef0123456789abcdef"})
	for _, tc := range []struct {
		name string
		run  RunID
		want error
	}{
		{"her own Unix user's agent", local.ID, ErrSelfApproval},
		{"a token of her agent", remote.ID, ErrSelfApproval},
		{"another agent", other.ID, nil},
	} {
		q, ch := e.authorize(ctx, tc.run, act("call-box", "id"))
		if _, err := e.s.Decide(ctx, rita, q.ID, Decision{Verdict: Approve}); !errors.Is(err, tc.want) && (tc.want != nil || err != nil) {
			t.Errorf("%s: rita decides: %v, want %v", tc.name, err, tc.want)
		}
		if tc.want != nil {
			if _, err := e.s.Decide(ctx, bob, q.ID, Decision{Verdict: Deny}); err != nil {
				t.Errorf("%s: bob decides: %v", tc.name, err)
			}
		}
		recv(t, ch)
	}
}

// A redacted command: reviewers and records get the redacted text, the
// digest binds the original, and the original is in the state database
// only while the request is pending.
func TestRedactedOriginalOnlyWhilePending(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rv := e.reviewer("alice")
	run, _ := e.remoteRun()
	// On a run-mode account: a redacted command is never covered by a run
	// approval, it asks on its own.
	a := act("run-box", "mysql --password=hunter22")
	a.Shown, a.Redactions = "mysql --password=[redacted:assignment]", []Redaction{{Rule: "assignment", Offset: 17, Length: 8}}
	q, done := e.authorize(ctx, run.ID, a)
	if q.Kind != KindCall || q.Command != a.Shown || q.Digest != DigestOf(run.ID, a) || len(q.Redactions) != 1 || q.Redactions[0] != a.Redactions[0] {
		t.Fatalf("request %+v", q)
	}
	if got, err := e.s.Request(ctx, q.ID); err != nil || got.Command != a.Shown || got.Original != "" || len(got.Redactions) != 1 {
		t.Fatalf("read back: %+v %v", got, err)
	}
	if orig, err := e.s.PendingOriginal(ctx, q.ID); err != nil || orig != a.Command {
		t.Fatalf("PendingOriginal = %q, %v", orig, err)
	}
	e.sink.mu.Lock()
	events := append([]Event(nil), e.sink.events...)
	e.sink.mu.Unlock()
	for _, ev := range events {
		if r := ev.Request; r != nil && strings.Contains(r.Command, "hunter22") {
			t.Errorf("an event carries the original: %+v", r)
		}
	}
	if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve}); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, done); o.err != nil || o.res.Status != StatusApproved {
		t.Fatalf("outcome %+v", o)
	}
	if _, err := e.s.PendingOriginal(ctx, q.ID); !errors.Is(err, ErrNoOriginal) {
		t.Errorf("after the decision: %v, want ErrNoOriginal", err)
	}
	assertNotStored(t, e, "hunter22")
}

// A request's standard input is shown to reviewers as text while it is
// pending; once it is decided — approved, denied, expired or withdrawn —
// the state database keeps its size and digest (which the approval binds)
// and not its text: neither in the row, nor in the SQLite files, nor on
// PostgreSQL.
func TestStdinTextOnlyWhilePending(t *testing.T) {
	for _, status := range []Status{StatusApproved, StatusDenied, StatusExpired, StatusWithdrawn} {
		t.Run(status.String(), func(t *testing.T) {
			e := newEnv(t)
			rv := e.reviewer("alice")
			run, _ := e.remoteRun()
			secret := "stdin-text-" + status.String() + "-7f3a9c"
			a := act("call-box", "tee /etc/motd")
			a.Stdin = &Stdin{Size: int64(len(secret)), SHA256: sha256.Sum256([]byte(secret)), Text: secret}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			q, done := e.authorize(ctx, run.ID, a)
			if got, err := e.s.Request(context.Background(), q.ID); err != nil || got.Stdin == nil || got.Stdin.Text != secret {
				t.Fatalf("pending request's input: %+v, %v; want its text", got.Stdin, err)
			}
			switch status {
			case StatusApproved, StatusDenied:
				v := Approve
				if status == StatusDenied {
					v = Deny
				}
				if _, err := e.s.Decide(context.Background(), rv, q.ID, Decision{Verdict: v}); err != nil {
					t.Fatal(err)
				}
			case StatusExpired:
				e.clock.Advance(DefaultApprovalTimeout)
			case StatusWithdrawn:
				cancel()
			}
			recv(t, done)
			got, err := e.s.Request(context.Background(), q.ID)
			if err != nil || got.Status != status {
				t.Fatalf("request after the decision: %v, %v; want %v", got.Status, err, status)
			}
			want := &Stdin{Size: a.Stdin.Size, SHA256: a.Stdin.SHA256}
			if diff := cmp.Diff(want, got.Stdin); diff != "" {
				t.Errorf("decided request's input (-want +got):\n%s", diff)
			}
			if a.Stdin.Text != secret {
				t.Errorf("the caller's action lost its input text: %q", a.Stdin.Text)
			}
			assertNotStored(t, e, secret)
		})
	}
}

// assertNotStored fails t when the state database still holds text: the
// SQLite files' bytes (while the store is open, its write-ahead log in
// use, and after closing), or a request's input or original command on
// PostgreSQL.
func assertNotStored(t *testing.T, e *env, text string) {
	t.Helper()
	if onPostgres() {
		var n int
		err := e.opts.DB.QueryRowContext(context.Background(), `SELECT count(*) FROM requests WHERE stdin_text LIKE ? OR command_original LIKE ?`, "%"+text+"%", "%"+text+"%").Scan(&n)
		if err != nil || n != 0 {
			t.Errorf("PostgreSQL: %d requests still hold %q (%v)", n, text, err)
		}
		return
	}
	for _, when := range []string{"open", "closed"} {
		if when == "closed" {
			e.s.Close()
		}
		for _, f := range []string{e.path, e.path + "-wal"} {
			if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(text)) {
				t.Errorf("%s: %s still holds %q", when, filepath.Base(f), text)
			}
		}
	}
}

// A request whose only waiting action went away is withdrawn at once,
// recorded, and deciding it says so; a run request others still wait on
// stays.
func TestCancelledActionWithdrawsItsRequest(t *testing.T) {
	e := newEnv(t)
	rv := e.reviewer("rita")
	run, _ := e.remoteRun()
	ctx, cancel := context.WithCancel(context.Background())
	q, ch := e.authorize(ctx, run.ID, act("call-box", "reboot"))
	cancel()
	if o := recv(t, ch); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("Authorize: %v", o.err)
	}
	got, err := e.s.Request(context.Background(), q.ID)
	if err != nil || got.Status != StatusWithdrawn {
		t.Fatalf("request after its action was cancelled: %v %v", got.Status, err)
	}
	if _, err := e.s.Decide(context.Background(), rv, q.ID, Decision{Verdict: Approve}); !errors.Is(err, ErrWithdrawn) {
		t.Errorf("deciding a withdrawn request: %v", err)
	}
	e.sink.mu.Lock()
	last := e.sink.events[len(e.sink.events)-1]
	e.sink.mu.Unlock()
	if last.Kind != EventApprovalDecided || last.Request.Status != StatusWithdrawn || last.Request.ID != q.ID {
		t.Errorf("the withdrawal is not recorded: the last event is %v of %+v", last.Kind, last.Request)
	}

	// Two actions wait on one run request: the first going leaves it.
	other, _ := e.remoteRun()
	ctx1, cancel1 := context.WithCancel(context.Background())
	rq, ch1 := e.authorize(ctx1, other.ID, act("run-box", "ls"))
	rq2, ch2 := e.authorize(context.Background(), other.ID, act("run-box", "uptime"))
	if rq2.ID != rq.ID {
		t.Fatalf("two run requests %s and %s for one run", rq.ID, rq2.ID)
	}
	cancel1()
	recv(t, ch1)
	if got, _ := e.s.Request(context.Background(), rq.ID); got.Status != StatusPending {
		t.Fatalf("run request with a waiter left: %v", got.Status)
	}
	if _, err := e.s.Decide(context.Background(), rv, rq.ID, Decision{Verdict: Approve}); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, ch2); o.err != nil || o.res.Status != StatusApproved {
		t.Errorf("the action still waiting: %+v %v", o.res, o.err)
	}
}

func TestPendingListShape(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	run, _ := e.remoteRun()
	q, _ := e.authorize(ctx, run.ID, act("call-box", "uname -a"))
	got, err := e.s.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{{
		ID: q.ID, Kind: KindCall, RunID: run.ID, Target: "call-box", Account: "deploy", Command: "uname -a",
		RequestedAt: e.clock.Now(), ExpiresAt: e.clock.Now().Add(DefaultApprovalTimeout), Requester: "agent",
		Timeout: time.Minute, Digest: DigestOf(run.ID, act("call-box", "uname -a")), Status: StatusPending,
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Pending (-want +got):\n%s", diff)
	}
}

func TestRequestExpiryEdges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		after   time.Duration
		wantErr error
	}{
		{"just before the deadline", DefaultApprovalTimeout - time.Nanosecond, nil},
		{"at the deadline", DefaultApprovalTimeout, ErrRequestExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			rv := e.reviewer("rita")
			run, _ := e.remoteRun()
			q, ch := e.authorize(ctx, run.ID, act("call-box", "ls"))
			e.clock.Advance(tc.after)
			_, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Decide: err = %v, want %v", err, tc.wantErr)
			}
			o := recv(t, ch)
			wantStatus := StatusApproved
			if tc.wantErr != nil {
				wantStatus = StatusExpired
			}
			if o.err != nil || o.res.Status != wantStatus {
				t.Errorf("Authorize = %+v, %v; want status %v", o.res, o.err, wantStatus)
			}
		})
	}
}
