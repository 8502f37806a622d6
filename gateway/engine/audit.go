package engine

import (
	"cmp"
	"context"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
)

// record appends one audit record durably and returns where it landed.
func (e *core) record(ctx context.Context, actionID, runID string, rec record) (auditchain.Ref, error) {
	return e.recordKind(ctx, rec.kind(), actionID, runID, rec)
}

// recordKind appends a record whose kind is given: runEvent serves
// several.
func (e *core) recordKind(ctx context.Context, kind auditchain.Kind, actionID, runID string, rec any) (auditchain.Ref, error) {
	f, err := auditchain.FieldsOf(rec)
	if err != nil {
		return auditchain.Ref{}, err
	}
	return e.audit.Append(ctx, auditchain.Entry{Kind: kind, ActionID: actionID, RunID: runID, Fields: f})
}

// RecordTokenRotated records that the local token was replaced and how
// many connections that cut.
func (e *Admin) RecordTokenRotated(ctx context.Context, connectionsCut int) error {
	_, err := e.record(ctx, "", "", tokenRotated{ConnectionsCut: int64(connectionsCut)})
	return err
}

// recordApprovalEvent is the approvals store's EventSink: every run and
// approval state change becomes an audit entry before it takes effect.
func (e *core) recordApprovalEvent(ctx context.Context, ev approvals.Event) error {
	kind, err := auditchain.ParseKind(ev.Kind.String())
	if err != nil {
		return err
	}
	if c := ev.Reviewer; c != nil {
		_, err = e.recordKind(ctx, kind, "", "", reviewerEvent{Name: c.Name, By: c.By, Offline: c.Offline, NewName: c.NewName, Subject: c.Subject})
		return err
	}
	if a := ev.Agent; a != nil {
		_, err = e.recordKind(ctx, kind, "", "", agentEvent{AgentID: a.ID, Name: a.Name, Limits: scopeText(a.Limits),
			ExpiresAt: a.ExpiresAt, RevokedBy: a.RevokedBy})
		return err
	}
	rec := runEvent{RunState: ev.Run.State, Requester: ev.Run.Requester}
	if ev.Kind == approvals.EventRunCreated && (ev.Run.AgentID != "" || len(ev.Run.Limits) > 0) {
		rec.AgentID, rec.Limits = ev.Run.AgentID, scopeText(ev.Run.Limits)
	}
	if ev.Kind == approvals.EventRunCreated || ev.Kind == approvals.EventApprovalRequested {
		rec.Renews = ev.Run.Renews
	}
	if a := ev.Run.Anchor; a != nil && ev.Kind == approvals.EventRunCreated {
		rec.Anchor = &anchorFacts{PID: int64(a.ID.PID), StartTime: a.ID.StartTime, Exe: a.Exe, ExeSHA256: a.ExeSHA256,
			UID: int64(a.UID), Cwd: a.Cwd, Argv: quoteArgv(a.Argv)}
	}
	if !ev.Run.ExpiresAt.IsZero() && ev.Kind == approvals.EventRunApproved {
		n := int64(ev.Run.MaxActions)
		rec.ExpiresAt, rec.MaxActions = ev.Run.ExpiresAt, &n
	}
	if ev.Kind == approvals.EventRunEnded {
		rec.EndReason = ev.Run.EndReason
		if ev.Run.EndedBy != "" {
			rec.EndedBy, rec.EndNote = ev.Run.EndedBy, &ev.Run.EndNote
		}
	}
	if r := ev.Request; r != nil {
		rec.Request = &requestFacts{ID: r.ID, Kind: r.Kind, Status: r.Status, Target: r.Target, Account: r.Account,
			Command: r.Command, TimeoutS: int64(r.Timeout / time.Second), Digest: r.Digest,
			Secret: r.Secret, Redacted: len(r.Redactions) > 0, Class: r.Class, Escalation: r.Escalation, GrantUntil: r.GrantUntil}
		if r.DecidedBy != "" {
			rec.Request.DecidedBy, rec.Request.Reason = r.DecidedBy, &r.Reason
		}
		if in := r.Stdin; in != nil {
			rec.Request.StdinBytes, rec.Request.StdinSHA256 = &in.Size, &in.SHA256
		}
	}
	_, err = e.recordKind(ctx, kind, "", string(ev.Run.ID), rec)
	if err == nil && ev.Kind == approvals.EventRunEnded {
		e.runEnded() // its running actions stop (watchRunEnds)
	}
	if err == nil && (ev.Kind == approvals.EventRunEnded || ev.Kind == approvals.EventRunDenied) {
		// Whichever way a run ends, its transfer files go with it.
		e.spool.dropRun(ev.Run.ID)
	}
	return err
}

// scopeText writes limits as "account@target, target", "" for none.
func scopeText(limits []approvals.Scope) string {
	var s []string
	for _, sc := range limits {
		if sc.Account != "" {
			s = append(s, sc.Account+"@"+sc.Target)
		} else {
			s = append(s, sc.Target)
		}
	}
	return strings.Join(s, ", ")
}

// Reader reads the audit log.
func (e *Audit) Reader() *auditchain.Reader { return e.alog.Reader() }

// Origin is the audit log's origin line (its checkpoints' name).
func (e *Audit) Origin() string { return e.alog.Origin() }

// Verify verifies the engine's own chain with its own verifier key
// and checkpoints.log.
func (e *Audit) Verify(ctx context.Context) (*auditchain.Report, error) {
	key, err := auditchain.ParseVerifierKey(e.alog.VerifierKey())
	if err != nil {
		return nil, err
	}
	vo := e.verifyOptions()
	vo.Key = key
	if notes, err := auditchain.ReadTrustedNotes(filepath.Join(e.conf().cfg.StateDir, "checkpoints.log")); err == nil {
		vo.Trusted = notes
	}
	return auditchain.Verify(ctx, vo)
}

// ApprovalEvent is an approval.requested or approval.decided entry read
// back from the audit log.
type ApprovalEvent struct {
	Seq   int64
	Kind  auditchain.Kind
	Time  time.Time
	RunID string
	// ID is the request's; Request what it asks for (a run or one
	// call); Status "pending", "approved", "denied" or "expired".
	ID        string
	Request   api.Mode
	Status    string
	Target    string
	Account   string
	DecidedBy string
}

// ApprovalEventOf reads an approval.* entry; false for any other entry.
func ApprovalEventOf(e auditchain.Entry) (ApprovalEvent, bool) {
	if e.Kind != auditchain.KindApprovalRequested && e.Kind != auditchain.KindApprovalDecided {
		return ApprovalEvent{}, false
	}
	var rec runEvent
	if err := e.Decode(&rec); err != nil || rec.Request == nil || rec.Request.ID == "" {
		return ApprovalEvent{}, false
	}
	q := rec.Request
	return ApprovalEvent{Seq: e.Seq, Kind: e.Kind, Time: e.Time, RunID: e.RunID, ID: string(q.ID), Request: api.Mode(q.Kind.String()),
		Status: q.Status.String(), Target: q.Target, Account: q.Account, DecidedBy: q.DecidedBy}, true
}

// OutputStored reports whether an action.finished entry names stored
// output.
func OutputStored(e auditchain.Entry) bool {
	var f actionFinished
	return e.Kind == auditchain.KindActionFinished && e.Decode(&f) == nil && f.Stdout != nil && f.Stderr != nil
}

// actionFromAudit rebuilds an action's object from its audit entries (for
// actions no longer in memory, or from before a restart), and where its
// output is, returned as the account's policy says now.
func (e *core) actionFromAudit(ctx context.Context, id string) (api.Action, *heldOutput, bool) {
	recs, err := e.alog.Reader().ActionEntries(ctx, id)
	if err != nil || len(recs) == 0 {
		return api.Action{}, nil, false
	}
	a := api.Action{ID: id, State: api.StateRequested}
	var out *heldOutput
	for _, rec := range recs {
		en := rec.Entry
		a.RunID = en.RunID
		switch en.Kind {
		case auditchain.KindActionRequested:
			var r actionRequested
			if err := en.Decode(&r); err != nil {
				e.log.Warn("an action.requested entry does not read back", "seq", en.Seq, "error", err)
			}
			a.Target, a.Account, a.Command, a.TimeoutS = r.Target, r.Account, r.Command, int(r.TimeoutS)
			a.Reason, a.Secret = r.Reason, r.Secret
			a.Redactions = apiRedactions(r.Redactions)
			a.Class = r.Class
			if r.StdinBytes != nil && r.StdinSHA256 != nil {
				a.StdinBytes, a.StdinSHA256 = *r.StdinBytes, hex.EncodeToString(r.StdinSHA256[:])
			}
			a.RequestedAt = en.Time
		case auditchain.KindActionConnecting:
			t := en.Time
			a.StartedAt, a.State = &t, api.StateRunning
		case auditchain.KindActionFinished:
			var f actionFinished
			if err := en.Decode(&f); err != nil {
				e.log.Warn("an action.finished entry does not read back", "seq", en.Seq, "error", err)
			}
			t := en.Time
			a.FinishedAt, a.State = &t, api.StateFinished
			a.Outcome, a.Detail, a.Termination = f.Outcome, f.Detail, f.Termination
			if f.Approval != nil {
				a.Approval.ID, a.Approval.Mode = f.Approval.ID, f.Approval.Mode
			}
			a.Approval.DecidedBy = f.DecidedBy
			if f.SecretReplacements != nil {
				a.SecretReplacements = int(*f.SecretReplacements)
			}
			if r := f.Result; r != nil {
				a.HostKeyFingerprint, a.Signal, a.Hop = r.HostKeyFingerprint, r.Signal, r.Hop
				a.StdoutBytes, a.StderrBytes = r.StdoutReceived, r.StderrReceived
				if r.ExitCode != nil {
					code := int(*r.ExitCode)
					a.ExitCode = &code
				}
			}
			// The policy the output was stored under; entries from before
			// it was recorded take the configuration's now.
			out = f.held(id, cmp.Or(f.OutputPolicy, e.outputPolicy(a.Target, a.Account)), e.spills)
			a.OutputDropped = droppedView(f.StdoutSpill, f.StderrSpill)
		}
	}
	a.NextStep = api.NextStepOf(&a)
	return a, out, true
}

// outputPolicy is the output policy the configuration sets now for an
// account; one that is gone returns nothing.
func (e *core) outputPolicy(target, account string) config.OutputPolicy {
	if t, ok := e.conf().cfg.Targets[target]; ok {
		if a, ok := t.Accounts[account]; ok {
			return a.Output
		}
	}
	return config.OutputNone
}

// Targets lists the configured targets: names, addresses, accounts,
// approval modes and pinned fingerprints, never secrets.
func (e *Actions) Targets() []api.Target {
	cfg := e.conf().cfg
	out := make([]api.Target, 0, len(cfg.TargetNames))
	for _, name := range cfg.TargetNames {
		t := cfg.Targets[name]
		v := api.Target{Name: t.Name, Address: t.Address, DefaultAccount: t.DefaultAccount,
			KnownHostsFile: t.KnownHostsFile != "", MaxParallel: t.MaxParallel, HostKeys: []string{}, Accounts: []api.TargetAccount{}}
		for _, k := range t.HostKeys {
			v.HostKeys = append(v.HostKeys, ssh.FingerprintSHA256(k))
		}
		for _, an := range t.AccountNames {
			a := t.Accounts[an]
			cred := cfg.Credentials[a.Credential]
			ta := api.TargetAccount{Name: a.Name, Approval: api.Mode(a.Approval.String()),
				MaxTimeoutS: int(a.MaxTimeout / time.Second), Output: string(a.Output), Certificate: cred != nil && cred.CA,
				AccountPolicy: accountPolicy(cfg, a)}
			for _, sc := range cfg.Secrets {
				if _, ok := sc.GrantFor(t.Name, a.Name); ok {
					ta.Secrets = append(ta.Secrets, sc.Name)
				}
			}
			slices.Sort(ta.Secrets)
			v.Accounts = append(v.Accounts, ta)
		}
		v.Via = t.Via
		out = append(out, v)
	}
	return out
}

// quoteArgv renders argv for the audit log, each argument quoted.
func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}
