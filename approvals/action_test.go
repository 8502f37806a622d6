package approvals

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDigestBindsEveryField(t *testing.T) {
	base := Action{Target: "web", Account: "deploy", Command: "systemctl restart web", Timeout: 30 * time.Second}
	const run RunID = "run_0123456789abcdef0123456789abcdef"
	want := DigestOf(run, base)
	for _, tc := range []struct {
		name string
		run  RunID
		edit func(*Action)
	}{
		{"other run", "run_0123456789abcdef0123456789abcdee", func(*Action) {}},
		{"other target", run, func(a *Action) { a.Target = "web2" }},
		{"other account", run, func(a *Action) { a.Account = "root" }},
		{"other command", run, func(a *Action) { a.Command = "systemctl restart web " }},
		{"command with NUL", run, func(a *Action) { a.Command += "\x00" }},
		{"other timeout", run, func(a *Action) { a.Timeout += time.Nanosecond }},
		{"target and account shifted", run, func(a *Action) { a.Target, a.Account = "webd", "eploy" }},
		{"account and command shifted", run, func(a *Action) {
			a.Account, a.Command = "deploysystemctl", " restart web"
		}},
		{"a secret on stdin", run, func(a *Action) { a.Secret = "db-password" }},
		{"stdin", run, func(a *Action) { a.Stdin = &Stdin{Size: 1} }},
		{"a get", run, func(a *Action) { a.Transfer = &Transfer{Direction: "get", Path: "/x"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := base
			tc.edit(&a)
			if got := DigestOf(tc.run, a); got == want {
				t.Errorf("digest unchanged by %s", tc.name)
			}
		})
	}
	if got := DigestOf(run, base); got != want {
		t.Errorf("digest not deterministic: %v then %v", want, got)
	}
}

// TestCanonicalActionGolden pins the encoding: a change here invalidates
// every stored digest and needs a new domain string.
func TestCanonicalActionGolden(t *testing.T) {
	got := CanonicalAction("run_x", Action{Target: "t", Account: "a", Command: "ls -l", Timeout: time.Second})
	want := "00000011" + hex.EncodeToString([]byte("airlock/action/v1")) +
		"00000005" + hex.EncodeToString([]byte("run_x")) +
		"00000001" + "74" + "00000001" + "61" +
		"00000005" + hex.EncodeToString([]byte("ls -l")) +
		"000000003b9aca00"
	if hex.EncodeToString(got) != want {
		t.Errorf("CanonicalAction =\n%x\nwant\n%s", got, want)
	}
}

// TestCanonicalActionSecretGolden pins the encoding of an action whose
// standard input is a gateway-held secret: its name is bound, under its
// own domain.
func TestCanonicalActionSecretGolden(t *testing.T) {
	got := CanonicalAction("run_x", Action{Target: "t", Account: "a", Command: "ls", Timeout: time.Second, Secret: "pw"})
	want := "00000018" + hex.EncodeToString([]byte("airlock/action/v3+secret")) +
		"00000005" + hex.EncodeToString([]byte("run_x")) +
		"00000001" + "74" + "00000001" + "61" +
		"00000002" + hex.EncodeToString([]byte("ls")) +
		"000000003b9aca00" + "00" + "00000002" + hex.EncodeToString([]byte("pw"))
	if hex.EncodeToString(got) != want {
		t.Errorf("CanonicalAction =\n%x\nwant\n%s", got, want)
	}
	other := Action{Target: "t", Account: "a", Command: "ls", Timeout: time.Second, Secret: "pw2"}
	if DigestOf("run_x", other) == DigestOf("run_x", Action{Target: "t", Account: "a", Command: "ls", Timeout: time.Second, Secret: "pw"}) {
		t.Error("two secrets share a digest")
	}
}

// TestCanonicalActionTransferGolden pins the encoding of a file transfer,
// and that it binds every part of it and the bytes.
func TestCanonicalActionTransferGolden(t *testing.T) {
	put := Action{Target: "t", Account: "a", Command: "put /x", Timeout: time.Second,
		Stdin: &Stdin{Size: 2}, Transfer: &Transfer{Direction: "put", Path: "/x", Mode: 0o640, Overwrite: true}}
	got := CanonicalAction("run_x", put)
	want := "0000001a" + hex.EncodeToString([]byte("airlock/action/v4+transfer")) +
		"00000005" + hex.EncodeToString([]byte("run_x")) +
		"00000001" + "74" + "00000001" + "61" +
		"00000006" + hex.EncodeToString([]byte("put /x")) +
		"000000003b9aca00" + "01" + "0000000000000002" + strings.Repeat("00", 32) +
		"00000003" + hex.EncodeToString([]byte("put")) + "00000002" + hex.EncodeToString([]byte("/x")) +
		"000001a0" + "01"
	if hex.EncodeToString(got) != want {
		t.Errorf("CanonicalAction =\n%x\nwant\n%s", got, want)
	}
	d := DigestOf("run_x", put)
	for name, edit := range map[string]func(*Action){
		"bytes":     func(a *Action) { a.Stdin = &Stdin{Size: 2, SHA256: [32]byte{1}} },
		"path":      func(a *Action) { a.Transfer.Path = "/y" },
		"mode":      func(a *Action) { a.Transfer.Mode = 0o644 },
		"overwrite": func(a *Action) { a.Transfer.Overwrite = false },
		"direction": func(a *Action) { a.Transfer.Direction = "get" },
		"a command": func(a *Action) { a.Transfer = nil },
	} {
		a := put
		tr := *put.Transfer
		a.Transfer = &tr
		edit(&a)
		if DigestOf("run_x", a) == d {
			t.Errorf("the digest does not bind the %s", name)
		}
	}
	for name, a := range map[string]Action{
		"put without bytes":  {Target: "t", Account: "a", Command: "put", Timeout: 1, Transfer: &Transfer{Direction: "put", Path: "/x"}},
		"get with bytes":     {Target: "t", Account: "a", Command: "get", Timeout: 1, Stdin: &Stdin{}, Transfer: &Transfer{Direction: "get", Path: "/x"}},
		"get with overwrite": {Target: "t", Account: "a", Command: "get", Timeout: 1, Transfer: &Transfer{Direction: "get", Path: "/x", Overwrite: true}},
		"a secret":           {Target: "t", Account: "a", Command: "put", Timeout: 1, Secret: "s", Stdin: &Stdin{}, Transfer: &Transfer{Direction: "put", Path: "/x"}},
		"another direction":  {Target: "t", Account: "a", Command: "move", Timeout: 1, Transfer: &Transfer{Direction: "move", Path: "/x"}},
	} {
		if a.validate() == nil {
			t.Errorf("%s: valid", name)
		}
	}
}

// FuzzCanonicalActionInjective: two different actions never share an
// encoding.
func FuzzCanonicalActionInjective(f *testing.F) {
	f.Add("r", "a b", "c", "ls", int64(1), "r", "a", "b c", "ls", int64(1))
	f.Add("", "", "", "", int64(0), "", "", "", "", int64(1))
	f.Fuzz(func(t *testing.T, r1, t1, a1, c1 string, d1 int64, r2, t2, a2, c2 string, d2 int64) {
		// A secret name rides in the command's place half the time.
		x := Action{Target: t1, Account: a1, Command: c1, Timeout: time.Duration(d1)}
		y := Action{Target: t2, Account: a2, Command: c2, Timeout: time.Duration(d2)}
		// … and a transfer of the command's path a third of the time.
		if d1%2 == 0 {
			x.Secret = c1 + "s"
		}
		if d2%2 == 0 {
			y.Secret = c2 + "s"
		}
		if d1%3 == 0 {
			x.Secret, x.Transfer = "", &Transfer{Direction: "get", Path: c1, Mode: uint32(d1)}
		}
		if d2%3 == 0 {
			y.Secret, y.Transfer = "", &Transfer{Direction: "get", Path: c2, Mode: uint32(d2)}
		}
		same := r1 == r2 && reflect.DeepEqual(x, y)
		if eq := bytes.Equal(CanonicalAction(RunID(r1), x), CanonicalAction(RunID(r2), y)); eq != same {
			t.Errorf("actions equal %v but encodings equal %v", same, eq)
		}
	})
}

func FuzzParseDigest(f *testing.F) {
	f.Add(DigestOf("r", Action{}).String())
	f.Add("ABCDEF")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDigest(s)
		if err != nil {
			return
		}
		if d.String() != s {
			t.Errorf("ParseDigest(%q) round-trips to %q", s, d.String())
		}
	})
}

// TestApprovalBoundToAction: an approved call lets only its own action
// through, once.
func TestApprovalBoundToAction(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rv := e.reviewer("rita")
	run, _ := e.remoteRun()
	a := act("call-box", "cat /etc/hostname")

	e.s.mu.Lock()
	r, _ := loadRun(ctx, e.s.db, run.ID)
	w, err := e.s.raise(ctx, r, KindCall, a)
	e.s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Decide(ctx, rv, w.req.ID, Decision{Verdict: Approve}); err != nil {
		t.Fatal(err)
	}
	<-w.done
	other := a
	other.Command = "cat /etc/shadow"
	for _, tc := range []struct {
		name string
		a    Action
		want error
	}{
		{"a different command", other, ErrDigestMismatch},
		{"the approved action", a, nil},
		{"a replay", a, ErrAlreadyDecided},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.s.mu.Lock()
			res, err := e.s.consume(ctx, w.req, w.status, tc.a)
			e.s.mu.Unlock()
			if !errors.Is(err, tc.want) {
				t.Fatalf("consume: %+v, %v; want %v", res, err, tc.want)
			}
			if err == nil && (res.Status != StatusApproved || res.Digest != DigestOf(run.ID, a)) {
				t.Errorf("result %+v", res)
			}
		})
	}
}

func TestActionValidate(t *testing.T) {
	ok := act("t", "ls")
	for _, tc := range []struct {
		name string
		edit func(*Action)
	}{
		{"no target", func(a *Action) { a.Target = "" }},
		{"no account", func(a *Action) { a.Account = "" }},
		{"no command", func(a *Action) { a.Command = "" }},
		{"zero timeout", func(a *Action) { a.Timeout = 0 }},
		{"negative timeout", func(a *Action) { a.Timeout = -time.Second }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ok
			tc.edit(&a)
			if err := a.validate(); !errors.Is(err, ErrBadAction) {
				t.Errorf("validate: %v, want ErrBadAction", err)
			}
		})
	}
	if err := ok.validate(); err != nil {
		t.Errorf("valid action: %v", err)
	}
}

// TestPendingRequestsAreCapped: a run, and a requester across its runs,
// may have only so many requests waiting for a decision; the next is
// refused with a PendingLimitError (nothing raised, nothing announced),
// and a decision makes room again. Other requesters are not affected.
func TestPendingRequestsAreCapped(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxPendingPerRun, o.MaxPendingPerRequester = 3, 5 })
	ctx := context.Background()
	rv := e.reviewer("rita")
	first, _ := e.remoteRun()
	var waiting []Request
	for range 3 {
		q, _ := e.authorize(ctx, first.ID, act("call-box", "ls"))
		if q.ID == "" {
			t.Fatal("a request within the cap was not raised")
		}
		waiting = append(waiting, q)
	}
	refused := func(id RunID, of string, limit int) {
		t.Helper()
		announced := e.sink.count()
		q, ch := e.authorize(ctx, id, act("call-box", "ls"))
		o := recv(t, ch)
		var pl *PendingLimitError
		if q.ID != "" || !errors.As(o.err, &pl) || !errors.Is(o.err, ErrTooManyPending) || pl.Of != of || pl.Limit != limit {
			t.Fatalf("past the %s cap: request %q, err %v; want a PendingLimitError{%s, %d}", of, q.ID, o.err, of, limit)
		}
		if got := e.sink.count(); got != announced {
			t.Errorf("a refused request was recorded (%d events, was %d)", got, announced)
		}
	}
	refused(first.ID, "run", 3)

	// The requester's second run fills the requester's cap.
	second, _ := e.remoteRun()
	for range 2 {
		if q, _ := e.authorize(ctx, second.ID, act("call-box", "ls")); q.ID == "" {
			t.Fatal("a request within the requester's cap was not raised")
		}
	}
	refused(second.ID, "requester", 5)

	// Another requester is not affected.
	other, _, err := e.s.CreateRemote(ctx, RemoteRun{Requester: "someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	if q, _ := e.authorize(ctx, other.ID, act("call-box", "ls")); q.ID == "" {
		t.Error("another requester's request was refused")
	}

	// A decision makes room.
	if _, err := e.s.Decide(ctx, rv, waiting[0].ID, Decision{Verdict: Deny, Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	if q, _ := e.authorize(ctx, first.ID, act("call-box", "ls")); q.ID == "" {
		t.Error("no room after a decision")
	}
}
