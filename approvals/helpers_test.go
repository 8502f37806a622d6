package approvals

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/approvals/clocktest"
	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/deploy/testkit"
)

// fakeInspector is a process table a test edits: pid reuse and deaths on
// demand.
type fakeInspector struct {
	mu    sync.Mutex
	procs map[int]Process
	dead  map[ProcessID]chan struct{}
	stats map[int]int // Stat calls per pid
}

func newFakeInspector() *fakeInspector {
	fi := &fakeInspector{procs: map[int]Process{}, dead: map[ProcessID]chan struct{}{}, stats: map[int]int{}}
	fi.add(1, 0, 1, "systemd", 0)
	return fi
}

// add starts a process and returns its identity.
func (fi *fakeInspector) add(pid, ppid int, start uint64, name string, uid int) ProcessID {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	id := ProcessID{PID: pid, StartTime: start}
	fi.procs[pid] = Process{
		ProcStat: ProcStat{ID: id, PPID: ppid, UID: uid, Comm: name, Exe: "/usr/bin/" + name},
		User:     fmt.Sprintf("user%d", uid), Argv: []string{name, "--flag"}, Cwd: "/work",
		ExeSHA256: fmt.Sprintf("%064x", start),
	}
	fi.dead[id] = make(chan struct{})
	return id
}

// statted returns the pids Stat read since the last call, and forgets
// them.
func (fi *fakeInspector) statted() map[int]int {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	got := fi.stats
	fi.stats = map[int]int{}
	return got
}

func (fi *fakeInspector) kill(pid int) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	p, ok := fi.procs[pid]
	if !ok {
		return
	}
	delete(fi.procs, pid)
	close(fi.dead[p.ID])
}

func (fi *fakeInspector) Stat(pid int) (ProcStat, error) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	fi.stats[pid]++
	p, ok := fi.procs[pid]
	if !ok {
		return ProcStat{}, ErrNoProcess
	}
	return p.ProcStat, nil
}

func (fi *fakeInspector) Describe(id ProcessID) (Process, error) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	p, ok := fi.procs[id.PID]
	if !ok || p.ID != id {
		return Process{}, ErrNoProcess
	}
	p.Argv = slices.Clone(p.Argv)
	return p, nil
}

func (fi *fakeInspector) Wait(ctx context.Context, id ProcessID) error {
	fi.mu.Lock()
	ch, ok := fi.dead[id]
	fi.mu.Unlock()
	if !ok {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recorder is an EventSink that keeps events and can be told to fail.
type recorder struct {
	mu     sync.Mutex
	events []Event
	// accounts are the reviewer.* events, kept apart from the run and
	// approval events most tests compare.
	accounts []Event
	fail     error
	seen     chan EventKind // if not nil, gets every recorded kind
}

var errSinkDown = errors.New("audit log unavailable")

func (r *recorder) Record(_ context.Context, e Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	if e.Reviewer != nil {
		r.accounts = append(r.accounts, e)
		return nil
	}
	r.events = append(r.events, e)
	if r.seen != nil {
		r.seen <- e.Kind
	}
	return nil
}

func (r *recorder) setFail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = err
}

func (r *recorder) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.Kind.String())
	}
	return out
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// cheapArgon keeps tests fast; DefaultArgon2 is exercised by a benchmark.
var cheapArgon = Argon2Params{Time: 1, MemoryKiB: 64, Threads: 1}

type env struct {
	t     *testing.T
	s     *Store
	path  string
	clock *clocktest.Fake
	procs *fakeInspector
	sink  *recorder
	opts  Options
}

// newEnv opens a store over a real SQLite file with a fake clock, a fake
// process table and a recording sink. Policy: target "run-box" is run
// mode, "call-box" call mode.
func newEnv(t *testing.T, edit ...func(*Options)) *env {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "state.db"), clock: clocktest.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
		procs: newFakeInspector(), sink: &recorder{}}
	e.opts = Options{
		Path: e.path, Sink: e.sink, Clock: e.clock, Inspector: e.procs, Argon2: cheapArgon,
		Policy: Policy{Rules: []Rule{{Target: "run-box", Mode: ModeRun}, {Target: "call-box", Mode: ModeCall}}},
	}
	if onPostgres() {
		e.opts.DB = pgDB(t)
	}
	for _, f := range edit {
		f(&e.opts)
	}
	e.open()
	return e
}

// onPostgres reports whether the store tests run on PostgreSQL
// (AIRLOCK_TEST_STORAGE=postgres; make test runs this package on both
// engines): each env then has a database of its own on a throwaway
// cluster.
func onPostgres() bool { return os.Getenv("AIRLOCK_TEST_STORAGE") == "postgres" }

func pgDB(t testing.TB) *sqldb.DB {
	t.Helper()
	db, err := sqldb.OpenPostgres(context.Background(), sqldb.PostgresOptions{URL: pgtest.Shared(t).NewDatabase(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// sqliteOnly skips a test of what only the SQLite files do.
func sqliteOnly(t testing.TB) {
	t.Helper()
	if onPostgres() {
		t.Skip("about the SQLite state file")
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}

func (e *env) open() {
	e.t.Helper()
	s, err := Open(context.Background(), e.opts)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.s = s
	e.t.Cleanup(func() { s.Close() })
}

func (e *env) reopen() {
	e.t.Helper()
	if err := e.s.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.open()
}

// reviewer adds and logs in a reviewer.
func (e *env) reviewer(name string) Reviewer {
	e.t.Helper()
	ctx := context.Background()
	pw := NewSecret("correct horse battery " + name)
	if err := e.s.Accounts().Add(ctx, name, pw, "test"); err != nil && !errors.Is(err, ErrReviewerExists) {
		e.t.Fatalf("Add(%q): %v", name, err)
	}
	rv, err := e.s.Accounts().Verify(ctx, name, pw)
	if err != nil {
		e.t.Fatalf("Verify(%q): %v", name, err)
	}
	return rv
}

// remoteRun creates a remote run requested by "agent".
func (e *env) remoteRun() (Run, Secret) {
	e.t.Helper()
	r, tok, err := e.s.CreateRemote(context.Background(), RemoteRun{Requester: "agent"})
	if err != nil {
		e.t.Fatalf("CreateRemote: %v", err)
	}
	return r, tok
}

// outcome is one Authorize's return.
type outcome struct {
	res Result
	err error
}

// authorize starts Authorize in a goroutine and returns the request it
// waits for (or the outcome, if it did not wait) and a channel with the
// outcome.
func (e *env) authorize(ctx context.Context, id RunID, a Action) (Request, <-chan outcome) {
	e.t.Helper()
	pending := make(chan Request, 1)
	done := make(chan outcome, 1)
	go func() {
		res, err := e.s.Authorize(ctx, id, a, func(q Request) { pending <- q })
		done <- outcome{res, err}
	}()
	select {
	case q := <-pending:
		return q, done
	case o := <-done:
		ch := make(chan outcome, 1)
		ch <- o
		return Request{}, ch
	}
}

func recv(t *testing.T, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(testkit.Patience):
		t.Fatal("Authorize did not return")
		return outcome{}
	}
}

func act(target, command string) Action {
	return Action{Target: target, Account: "deploy", Command: command, Timeout: time.Minute}
}

func ttl(d time.Duration) *time.Duration { return &d }
