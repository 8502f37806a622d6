package auditchain

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"golang.org/x/mod/sumdb/tlog"
)

// The writer: one goroutine owns the database connection that appends,
// and commits concurrent appends together (group commit) so that they
// share fsyncs.

// fail makes every later Append return ErrFailed wrapping cause.
func (l *Log) fail(cause error) error {
	err := fmt.Errorf("audit log: %w: %w", ErrFailed, cause)
	if l.failed.CompareAndSwap(nil, &err) {
		l.log.Error("audit log failed; refusing further appends", "error", cause)
	}
	return *l.failed.Load()
}

// ProfileLabel is the pprof label the writer goroutine carries, with the
// value "audit": a CPU profile of the gateway counts the group commits
// (encoding, hashing, signing checkpoints, the database) there, beside
// its phases (the gateway's engine.ProfileLabel is the same key).
const ProfileLabel = "airlock_phase"

var cpuAudit = pprof.WithLabels(context.Background(), pprof.Labels(ProfileLabel, "audit"))

// run is the writer goroutine: it owns the writer connection and state.
func (l *Log) run() {
	pprof.SetGoroutineLabels(cpuAudit)
	defer close(l.done)
	defer l.release()
	defer func() {
		if l.witness != nil {
			close(l.witness)
		}
	}()
	var tick <-chan time.Time
	if l.opts.CheckpointInterval > 0 {
		t := time.NewTicker(min(l.opts.CheckpointInterval, time.Second))
		defer t.Stop()
		tick = t.C
	}
	ctx := context.Background()
	for {
		select {
		case r := <-l.reqs:
			l.commit(ctx, l.gather(r))
			l.maybeCheckpoint(ctx, false)
		case <-tick:
			l.maybeCheckpoint(ctx, false)
		case <-l.closing:
			for {
				select {
				case r := <-l.reqs:
					l.commit(ctx, l.gather(r))
					continue
				default:
				}
				break
			}
			l.final = l.maybeCheckpoint(ctx, true)
			return
		}
	}
}

// gather takes r and whatever else is queued, up to maxBatch, skipping
// requests whose caller gave up.
func (l *Log) gather(r *appendReq) []*appendReq {
	batch := make([]*appendReq, 0, 16)
	take := func(r *appendReq) {
		if r.state.CompareAndSwap(reqPending, reqTaken) {
			batch = append(batch, r)
		}
	}
	take(r)
	for len(batch) < maxBatch {
		select {
		case r := <-l.reqs:
			take(r)
			continue
		default:
		}
		break
	}
	return batch
}

// commit writes a batch in one transaction and answers every request.
func (l *Log) commit(ctx context.Context, batch []*appendReq) {
	if len(batch) == 0 {
		return
	}
	start := time.Now()
	batch, refs, err := l.write(ctx, batch)
	if err == nil && l.opts.OnCommit != nil {
		l.opts.OnCommit(len(batch), time.Since(start))
	}
	for i, r := range batch {
		if err != nil {
			r.done <- appendResult{err: err}
		} else {
			r.done <- appendResult{ref: refs[i]}
		}
	}
}

// write commits batch and returns what it wrote: on PostgreSQL, a
// second outcome of an action is answered ErrAlreadyFinished here and
// left out.
func (l *Log) write(ctx context.Context, batch []*appendReq) ([]*appendReq, []Ref, error) {
	if p := l.failed.Load(); p != nil {
		return batch, nil, *p
	}
	ctx, cancel := l.writeCtx(ctx)
	defer cancel()
	if l.shared() {
		return l.writeShared(ctx, batch)
	}
	tx, err := l.begin(ctx)
	if err != nil {
		return batch, nil, l.recover(ctx, fmt.Errorf("audit log: begin: %w", err))
	}
	refs, st, err := l.stage(ctx, tx, batch)
	if err != nil {
		tx.Rollback()
		return batch, nil, err
	}
	if err := tx.Commit(); err != nil {
		return batch, nil, l.commitFailed(ctx, refs, st, err)
	}
	l.apply(st)
	return batch, refs, nil
}

// oneOutcome keeps every action at one action.finished entry across
// replicas: under the chain lock, a finished entry for an action that
// already has one (finished, read from the log, or earlier in the batch)
// is answered ErrAlreadyFinished and dropped from the batch, which it
// returns.
func oneOutcome(batch []*appendReq, finished map[string]bool) []*appendReq {
	kept := batch[:0:0]
	for _, r := range batch {
		if r.e.Kind != KindActionFinished || r.e.ActionID == "" {
			kept = append(kept, r)
			continue
		}
		if finished[r.e.ActionID] {
			r.done <- appendResult{err: fmt.Errorf("audit log: append: action %s: %w", r.e.ActionID, ErrAlreadyFinished)}
			continue
		}
		finished[r.e.ActionID] = true
		kept = append(kept, r)
	}
	return kept
}

// headState is the writer's view of the log's end.
type headState struct {
	size      int64
	chain     [32]byte
	front     frontier
	ckptEntry bool
}

func (l *Log) apply(st headState) {
	l.size, l.chain, l.front, l.ckptEntry = st.size, st.chain, st.front, st.ckptEntry
}

// staged is a batch laid out after the writer's view of the head: its
// refs and the head once it commits, and the rows to insert.
type staged struct {
	refs      []Ref
	st        headState
	entryArgs []any // 8 per entry
	hashArgs  []any // 2 per stored tree hash
}

// prepare lays batch out after the writer's view of the head.
func (l *Log) prepare(batch []*appendReq) (staged, error) {
	p := staged{
		st:        headState{size: l.size, chain: l.chain, front: l.front},
		refs:      make([]Ref, len(batch)),
		entryArgs: make([]any, 0, 8*len(batch)),
		hashArgs:  make([]any, 0, 4*len(batch)),
	}
	for i, r := range batch {
		e := r.e
		e.Seq = p.st.size
		e.Time = time.Unix(0, l.now().UnixNano()).UTC()
		leaf, err := appendLeaf(nil, e, r.fields)
		if err != nil {
			return p, err
		}
		lh := tlog.RecordHash(leaf)
		p.st.chain = ChainHash(p.st.chain, leaf)
		hs, err := p.st.front.add(lh)
		if err != nil {
			return p, l.fail(err)
		}
		p.entryArgs = append(p.entryArgs, e.Seq, e.Time.UnixNano(), e.Kind.String(), e.ActionID, e.RunID, leaf, bytes.Clone(lh[:]), bytes.Clone(p.st.chain[:]))
		base := tlog.StoredHashIndex(0, e.Seq)
		for j, h := range hs {
			p.hashArgs = append(p.hashArgs, base+int64(j), bytes.Clone(h[:]))
		}
		p.st.ckptEntry = e.Kind == KindCheckpoint
		p.refs[i] = Ref{Seq: e.Seq, Time: e.Time, LeafHash: lh, Chain: p.st.chain}
		p.st.size++
	}
	return p, nil
}

// insertPG is the one statement that inserts p on PostgreSQL, both
// tables at once (PostgreSQL takes 65535 parameters, more than a batch
// of maxBatch entries needs).
func (p staged) insertPG() (string, []any) {
	q := `WITH e AS (` + valuesSQL(`INSERT INTO entries (seq, time_ns, kind, action_id, run_id, leaf, leaf_hash, chain) VALUES `, 8, len(p.entryArgs)/8) +
		`) ` + valuesSQL(`INSERT INTO tree_hashes (idx, hash) VALUES `, 2, len(p.hashArgs)/2)
	return q, append(append([]any(nil), p.entryArgs...), p.hashArgs...)
}

// stage inserts batch after the writer's view of the head in tx, and
// returns the refs and the head once tx commits. Its errors are final
// (recover has run where it applies); tx must then be rolled back.
func (l *Log) stage(ctx context.Context, tx *sqldb.Tx, batch []*appendReq) ([]Ref, headState, error) {
	p, err := l.prepare(batch)
	if err != nil {
		return nil, p.st, err
	}
	if l.shared() {
		q, args := p.insertPG()
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return nil, p.st, l.recover(ctx, fmt.Errorf("audit log: insert entries from %d: %w", l.size, err))
		}
		return p.refs, p.st, nil
	}
	// Multi-row inserts: a batch costs a few statements, not three per entry.
	if err := insertRows(ctx, tx, `INSERT INTO entries (seq, time_ns, kind, action_id, run_id, leaf, leaf_hash, chain) VALUES `, 8, p.entryArgs); err != nil {
		return nil, p.st, l.recover(ctx, fmt.Errorf("audit log: insert entries from %d: %w", l.size, err))
	}
	if err := insertRows(ctx, tx, `INSERT INTO tree_hashes (idx, hash) VALUES `, 2, p.hashArgs); err != nil {
		return nil, p.st, l.recover(ctx, fmt.Errorf("audit log: insert tree hashes: %w", err))
	}
	return p.refs, p.st, nil
}

// commitFailed handles a commit that returned err. On SQLite the commit
// did not happen (recover checks). On PostgreSQL the answer may have been
// lost with the connection: settle looks for the batch.
func (l *Log) commitFailed(ctx context.Context, refs []Ref, st headState, err error) error {
	cause := fmt.Errorf("audit log: commit: %w", err)
	if !l.shared() || len(refs) == 0 {
		return l.recover(ctx, cause)
	}
	return l.settle(refs, st, cause)
}

// insertRows runs prefix with as many "(?, …)" tuples of width columns as
// args holds, in chunks that stay under SQLite's parameter limit.
func insertRows(ctx context.Context, tx *sqldb.Tx, prefix string, width int, args []any) error {
	const maxRows = 256
	for len(args) > 0 {
		n := min(len(args)/width, maxRows)
		if _, err := tx.ExecContext(ctx, valuesSQL(prefix, width, n), args[:n*width]...); err != nil {
			return err
		}
		args = args[n*width:]
	}
	return nil
}

// valuesSQL is prefix followed by n "(?, …)" tuples of width columns.
func valuesSQL(prefix string, width, n int) string {
	tuple := "(" + strings.Repeat("?, ", width-1) + "?)"
	return prefix + strings.Repeat(tuple+", ", n-1) + tuple
}

// recover is called after a failed write: when the database still ends
// where the writer's state says, the failure cost only this batch;
// otherwise the log fails closed.
func (l *Log) recover(ctx context.Context, cause error) error {
	if l.shared() {
		// PostgreSQL rolled the batch back; the next batch re-reads the
		// head under the chain lock. A lost connection or a restarted
		// server is no reason to refuse appends once it is back.
		l.log.Warn("append batch failed and was rolled back", "error", cause)
		return cause
	}
	var n int64
	var chain []byte
	err := l.w.QueryRowContext(ctx, `SELECT count(*), coalesce((SELECT chain FROM entries ORDER BY seq DESC LIMIT 1), x'') FROM entries`).Scan(&n, &chain)
	if err != nil || n != l.size || (n > 0 && string(chain) != string(l.chain[:])) {
		return l.fail(cause)
	}
	l.log.Warn("append batch failed and was rolled back", "error", cause)
	return cause
}
