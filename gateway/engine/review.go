package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/api"
)

// The review service: what reviewers do, once, for the API, the pages and
// (through the API) the CLI.

// LoginTTL is how long a reviewer's login lasts (an API token, a page
// session).
const LoginTTL = 12 * time.Hour

// Limiter keys of reviewer logins: per address bucket (see Bucket), per
// reviewer name at a bucket, and per remembered login device (see
// devices.go). Across addresses, a name's checks are slowed, never
// refused for long (namebudget.go): nobody can lock a reviewer out from
// elsewhere, and guesses spread over many addresses are spaced all the
// same.
func loginAddr(bucket string) string       { return "login-addr:" + bucket }
func loginName(name, bucket string) string { return "login:" + name + "@" + bucket }

// loginNameAll is the audit log's subject of a name's budget across
// addresses.
func loginNameAll(name string) string { return "login-name:" + name }

// Login verifies a reviewer's name and password for a client at
// remoteAddr (host:port, as the listener saw it) that presented device,
// the proof a client keeps from an earlier password login of this name
// (RememberDevice; zero or anything else: an unknown device).
//
// An attempt from a remembered device is charged to that device's budget
// alone. Any other takes one from the budgets of the address bucket and
// of the name at the bucket before the password is hashed, so attempts
// sent all at once count at once (while failures and attempts in flight
// reach the limit, each is refused: ErrRateLimited); then, past the
// name's free failures, it waits for its slot in the name's schedule, or
// is refused at once (ErrRateLimited, with RetryAfter) when that slot is
// too far. A wrong name or password is ErrUnauthorized; a name no
// reviewer can have never reaches a key, the log or the audit log.
func (e *Review) Login(ctx context.Context, name, password string, device Secret, remoteAddr string) (Reviewer, error) {
	valid := approvals.ValidName(name)
	if valid {
		if id, ok := e.knownDevice(ctx, name, device); ok {
			key := loginDevice(name, id)
			done, ok := e.limiter.reserve(key)
			if !ok {
				d := e.limiter.retry(key)
				return Reviewer{}, refuseFor(d, "too many failed logins from this browser or CLI; "+retryText(d))
			}
			return e.checkPassword(ctx, name, password, remoteAddr, []string{key}, done, nil)
		}
	}
	bucket := Bucket(remoteAddr)
	keys := []string{loginAddr(bucket)}
	if valid {
		keys = append(keys, loginName(name, bucket))
	}
	done, ok := e.limiter.reserve(keys...)
	if !ok {
		d := e.limiter.retry(keys...)
		return Reviewer{}, refuseFor(d, "too many failed logins from this address; "+retryText(d))
	}
	if !valid {
		return e.checkPassword(ctx, name, password, remoteAddr, keys, done, nil)
	}
	nameDone, err := e.limiter.names.take(ctx, name)
	var slow *slowed
	switch {
	case errors.As(err, &slow):
		done(false)
		return Reviewer{}, refuseFor(slow.After, fmt.Sprintf("logins as %s are being slowed after %d failed or pending logins from unknown devices in the last %d minutes; a browser or CLI that logged in as %s before is not slowed; %s",
			name, slow.Failures, int(nameWindow/time.Minute), name, retryText(slow.After)))
	case err != nil:
		done(false)
		return Reviewer{}, err
	}
	return e.checkPassword(ctx, name, password, remoteAddr, keys, done, nameDone)
}

// checkPassword verifies name's password for an attempt charged to keys
// (reserved: done decides them) and, from an unknown device, to the
// name's budget across addresses (nameDone; nil for none). A failure is
// counted once, whatever the number of keys.
func (e *Review) checkPassword(ctx context.Context, name, password, remoteAddr string, keys []string, done func(bool) []int, nameDone func(bool) int) (Reviewer, error) {
	host := Host(remoteAddr)
	var rv approvals.Reviewer
	err := approvals.ErrBadCredentials
	if approvals.ValidName(name) {
		rv, err = e.store.Accounts().Verify(ctx, name, approvals.NewSecret(password))
	}
	failed := errors.Is(err, approvals.ErrBadCredentials)
	var ch []charged
	for i, n := range done(failed) {
		ch = append(ch, charged{keys[i], n, e.limiter.max})
	}
	if nameDone != nil {
		ch = append(ch, charged{loginNameAll(name), nameDone(failed), nameFree})
	}
	if !failed {
		return Reviewer{rv}, classify(err)
	}
	e.authFailure(ctx, "reviewer_password", ch...)
	if approvals.ValidName(name) {
		e.log.Warn("failed reviewer login", "reviewer", name, "addr", host)
	} else {
		e.log.Warn("failed reviewer login with a name no reviewer can have", "name_bytes", len(name), "addr", host)
	}
	return Reviewer{}, refuse(ErrUnauthorized, "wrong reviewer name or password")
}

// IssueToken issues a reviewer token for the API (POST /v1/login), valid
// for LoginTTL, and says until when.
func (e *Review) IssueToken(ctx context.Context, rv Reviewer) (Secret, time.Time, error) {
	tok, until, err := e.issueToken(ctx, rv.rv)
	return Secret{tok}, until, err
}

// issueToken is Review.IssueToken.
func (e *core) issueToken(ctx context.Context, rv approvals.Reviewer) (approvals.Secret, time.Time, error) {
	tok, err := e.store.Accounts().IssueTokenFor(ctx, rv, LoginTTL)
	return tok, e.clock.Now().Add(LoginTTL).UTC(), classify(err)
}

// Logout revokes a reviewer token.
func (e *Review) Logout(ctx context.Context, tok Secret) error {
	return e.store.Accounts().RevokeToken(ctx, tok.s)
}

// VerifyToken returns the reviewer a reviewer token stands for.
// ErrUnauthorized for a token that is not a reviewer's (approvals'
// ErrMalformedToken says whether it even looks like one).
func (e *Review) VerifyToken(ctx context.Context, tok Secret) (Reviewer, error) {
	rv, err := e.store.Accounts().VerifyToken(ctx, tok.s)
	return Reviewer{rv}, classify(err)
}

// Enabled reports whether a reviewer may still act: one disabled,
// removed or given a new password since it logged in is logged out at
// its next request.
func (e *Review) Enabled(ctx context.Context, rv Reviewer) bool {
	on, err := e.store.Accounts().Active(ctx, rv.rv)
	if err != nil {
		e.log.Error("reading a reviewer", "error", err)
		return false
	}
	return on
}

// LoginLinkTTL is how long a one-time login link works: the one lifetime
// every link has, stated as such wherever a link is made or shown (the
// CLI, the demo, the link page, docs/reviewers.md).
const LoginLinkTTL = 15 * time.Minute

// LoginLinkLifetime is LoginLinkTTL in words, as the CLI, the demo and
// the link page say it.
const LoginLinkLifetime = "15 minutes"

// LoginLink is a one-time login link's token and when it stops working.
type LoginLink struct {
	Token   Secret
	Expires time.Time
}

// NewLoginLink makes a one-time link that logs reviewer in without a
// password, working once for LoginLinkTTL. It stands for a short-lived
// reviewer token that never leaves the gateway. by is who asked for it
// (an operator, the demo): reviewer.link_issued records it, and who the
// link is for and until when, before the link exists; a link for an
// unknown or disabled reviewer is refused.
func (e *Admin) NewLoginLink(ctx context.Context, reviewer, by string) (LoginLink, error) {
	_, enabled, err := e.store.Accounts().Epoch(ctx, reviewer)
	switch {
	case err != nil:
		return LoginLink{}, ReviewerError(reviewer, err)
	case !enabled:
		return LoginLink{}, refuse(ErrForbidden, fmt.Sprintf("reviewer %q is disabled: no login link is made for it; enable it first (airlock reviewer enable %s)", reviewer, reviewer))
	}
	expires := e.clock.Now().Add(LoginLinkTTL)
	if _, err := e.record(ctx, "", "", linkIssued{Name: reviewer, By: by, ExpiresAt: expires}); err != nil {
		e.log.Error("audit append failed; no login link made", "error", err)
		return LoginLink{}, refuse(ErrUnavailable, "the login link could not be recorded in the audit log, so none was made")
	}
	rt, err := e.store.Accounts().IssueToken(ctx, reviewer, LoginLinkTTL)
	if err != nil {
		return LoginLink{}, ReviewerError(reviewer, err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return LoginLink{}, err
	}
	tok := hex.EncodeToString(b)
	e.links.add(tok, rt, expires)
	return LoginLink{Token: NewSecret(tok), Expires: expires}, nil
}

// LoginLink consumes a one-time login link's token for a client at
// remoteAddr:
// ErrUnauthorized when it is unknown, used or expired, ErrRateLimited as
// Login.
func (e *Review) LoginLink(ctx context.Context, token, remoteAddr string) (Reviewer, error) {
	host := Host(remoteAddr)
	addrKey := loginAddr(Bucket(remoteAddr))
	if e.blocked(addrKey) {
		d := e.limiter.retry(addrKey)
		return Reviewer{}, refuseFor(d, "too many failed logins from this address; "+retryText(d))
	}
	apiToken, ok := e.links.consume(token, e.clock.Now())
	if !ok {
		e.authFailed(ctx, "login_link", addrKey)
		e.log.Warn("unknown, used or expired login link", "addr", host)
		return Reviewer{}, refuse(ErrUnauthorized, "unknown, used or expired login link")
	}
	return e.VerifyToken(ctx, Secret{apiToken})
}

// loginLinks are one-time reviewer login links: a random token in the URL,
// kept here only as its SHA-256, standing for a reviewer token. A link
// works once.
type loginLinks struct {
	mu    sync.Mutex
	links map[[sha256.Size]byte]loginLink
}

type loginLink struct {
	reviewerToken approvals.Secret
	expires       time.Time
}

func (l *loginLinks) add(tok string, rt approvals.Secret, expires time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.links == nil {
		l.links = map[[sha256.Size]byte]loginLink{}
	}
	for h, e := range l.links { // forget the expired ones
		if !e.expires.After(expires.Add(-LoginLinkTTL)) {
			delete(l.links, h)
		}
	}
	l.links[sha256.Sum256([]byte(tok))] = loginLink{rt, expires}
}

// consume returns the reviewer token behind a link and forgets the link.
// The lookup is by hash, so comparing tokens leaks nothing by timing.
func (l *loginLinks) consume(tok string, now time.Time) (approvals.Secret, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := sha256.Sum256([]byte(tok))
	e, ok := l.links[h]
	if !ok {
		return approvals.Secret{}, false
	}
	delete(l.links, h)
	return e.reviewerToken, now.Before(e.expires)
}

// Pending returns the pending approval requests, oldest first.
func (e *Review) Pending(ctx context.Context) ([]Request, error) {
	reqs, err := e.store.Pending(ctx)
	if err != nil {
		return nil, classify(err)
	}
	out := make([]Request, 0, len(reqs))
	for _, q := range reqs {
		out = append(out, e.requestView(q))
	}
	return out, nil
}

// Request returns one approval request.
func (e *Review) Request(ctx context.Context, raw string) (Request, error) {
	id, err := requestID(raw)
	if err != nil {
		return Request{}, err
	}
	q, err := e.store.Request(ctx, id)
	if err != nil {
		return Request{}, classify(err)
	}
	return e.requestView(q), nil
}

// Decide records rv's decision on request id. The decision is bound to
// what the reviewer was shown: digest, when not empty, must be the
// request's (in hex), or nothing is decided (ErrChanged). A request its
// run's end expired is refused as ErrRunEnded, one its own deadline
// expired as ErrExpired; limits the policy does not allow are ErrInvalid,
// saying which.
func (e *Review) Decide(ctx context.Context, rv Reviewer, raw string, d Decision, digest string) (Request, error) {
	q, err := e.decide(ctx, rv, raw, d, digest)
	if err != nil {
		return Request{}, err
	}
	return e.requestView(q), nil
}

// decide is Decide, answering with the request as the store has it.
func (e *Review) decide(ctx context.Context, rv Reviewer, raw string, d Decision, digest string) (approvals.Request, error) {
	id, err := requestID(raw)
	if err != nil {
		return approvals.Request{}, err
	}
	if digest != "" {
		q, err := e.store.Request(ctx, id)
		if err != nil {
			return approvals.Request{}, classify(err)
		}
		if q.Digest.String() != digest {
			return approvals.Request{}, refuse(ErrChanged, "the request is not the one you reviewed (its digest differs); reload it")
		}
	}
	q, err := e.store.Decide(ctx, rv.rv, id, d.store())
	switch {
	case err == nil:
		e.log.Info("decision", "approval", id, "kind", q.Kind.String(), "decision", q.Status.String(), "reviewer", rv.Name())
		return q, nil
	case (errors.Is(err, approvals.ErrRequestExpired) || errors.Is(err, approvals.ErrWithdrawn)) && e.endedWithItsRun(ctx, id):
		return approvals.Request{}, refuse(ErrRunEnded, "the request's run ended before your decision; the request was withdrawn")
	case errors.Is(err, approvals.ErrTTLOverCap):
		_, maxTTL := e.TTLChoices()
		return approvals.Request{}, refuse(ErrInvalid, fmt.Sprintf("the approval's time is over the policy's maximum of %s", maxTTL))
	case errors.Is(err, approvals.ErrBadTTL):
		return approvals.Request{}, refuse(ErrInvalid, "the approval's time must be positive")
	case errors.Is(err, approvals.ErrGrantNotAllowed):
		q, _ := e.store.Request(ctx, id)
		if q.Secret != "" && q.Kind == approvals.KindCall {
			return approvals.Request{}, refuse(ErrInvalid, "no grant covers an action that uses a gateway-held secret (secret "+q.Secret+"): approve it without one; each use is asked")
		}
		if limit := e.MaxGrant(q.Target, q.Account); limit > 0 && q.Kind == approvals.KindCall {
			return approvals.Request{}, refuse(ErrInvalid, fmt.Sprintf("a grant lasts more than 0 and at most %s on %s@%s (max_grant), and goes with an approval", limit, q.Account, q.Target))
		}
		return approvals.Request{}, refuse(ErrInvalid, "a grant goes with the approval of a call request on an account whose policy allows grants (max_grant); this one allows none")
	case errors.Is(err, approvals.ErrTTLForCall), errors.Is(err, approvals.ErrBadScope):
		return approvals.Request{}, e.limitsRefusal(ctx, id, d, err)
	}
	return approvals.Request{}, classify(err)
}

// limitsRefusal says why the limits of decision d on request id were
// refused, with the fix: run limits on a call request, or run limits
// that are invalid, are two cases, never one message.
func (e *Review) limitsRefusal(ctx context.Context, id approvals.RequestID, d Decision, err error) error {
	if errors.Is(err, approvals.ErrTTLForCall) {
		msg := fmt.Sprintf("%s is a call request: its approval lets this one action run once, so it takes no run limits "+
			"(a time, --ttl; an action budget, --max-actions; a scope, --scope): approve it without them", id)
		if q, qerr := e.store.Request(ctx, id); qerr == nil && q.Secret == "" {
			if limit := e.MaxGrant(q.Target, q.Account); limit > 0 {
				msg += fmt.Sprintf("; to let the same action repeat without asking, approve it with a grant (--grant DUR, at most %s on %s@%s)", limit, q.Account, q.Target)
			}
		}
		return refuse(ErrInvalid, msg)
	}
	if d.MaxActions < 0 {
		return refuse(ErrInvalid, fmt.Sprintf("a run approval's action budget (--max-actions) is %d: give 0 (no limit) or more", d.MaxActions))
	}
	return refuse(ErrInvalid, "each scope of a run approval (--scope) names a target: TARGET or TARGET/ACCOUNT")
}

// endedWithItsRun reports whether request id expired because its run
// ended: a run that ends expires its pending requests in the same change,
// at the same instant. (Comparing with the request's deadline would depend
// on the clock not moving.)
func (e *core) endedWithItsRun(ctx context.Context, id approvals.RequestID) bool {
	q, err := e.store.Request(ctx, id)
	if err != nil {
		return false
	}
	run, err := e.store.Run(ctx, q.RunID)
	return err == nil && run.State.Terminal() && !run.EndedAt.IsZero() && run.EndedAt.Equal(q.DecidedAt)
}

// TTLChoices are the run-approval lifetimes a reviewer is offered: common
// ones up to the policy's cap, the default and the cap itself (the last).
// It returns them and the default.
func (e *Review) TTLChoices() ([]time.Duration, time.Duration) {
	ap := e.conf().cfg.Approval
	def, maxTTL := ap.RunTTL, ap.MaxRunTTL
	if def <= 0 {
		def = approvals.DefaultRunTTL
	}
	if maxTTL <= 0 {
		maxTTL = approvals.DefaultMaxRunTTL
	}
	def = min(def, maxTTL)
	out := []time.Duration{def, maxTTL}
	for _, d := range []time.Duration{5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 24 * time.Hour} {
		if d <= maxTTL {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), def
}

// MaxGrant is the longest grant a reviewer may give on a call approval of
// target/account (its max_grant), 0 for none.
func (e *Review) MaxGrant(target, account string) time.Duration {
	if t, ok := e.conf().cfg.Targets[target]; ok {
		if a, ok := t.Accounts[account]; ok {
			return a.MaxGrant
		}
	}
	return 0
}

// GrantChoices are the grants a reviewer is offered on a call approval of
// target/account: common lengths up to its max_grant, and that; none when
// it allows none.
func (e *Review) GrantChoices(target, account string) []time.Duration {
	limit := e.MaxGrant(target, account)
	if limit <= 0 {
		return nil
	}
	out := []time.Duration{limit}
	for _, d := range []time.Duration{5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 4 * time.Hour} {
		if d < limit {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// approvalView is an approval request as the API shows it.
func approvalView(q approvals.Request) api.Approval {
	v := api.Approval{
		ID: string(q.ID), Kind: api.Mode(q.Kind.String()), RunID: string(q.RunID), Target: q.Target, Account: q.Account,
		Command: q.Command, TimeoutS: int(q.Timeout / time.Second), Digest: q.Digest.String(),
		RequestedAt: q.RequestedAt, ExpiresAt: q.ExpiresAt, Requester: q.Requester, State: q.Status.String(),
		DecidedBy: q.DecidedBy, Reason: q.Reason, AgentReason: q.AgentReason, Secret: q.Secret,
		Redactions: apiRedactions(q.Redactions), Class: q.Class, ClassReason: q.ClassReason, Escalation: q.Escalation,
	}
	v.Renews = string(q.Renews)
	if in := q.Stdin; in != nil {
		v.StdinBytes, v.StdinSHA256, v.StdinText = in.Size, hex.EncodeToString(in.SHA256[:]), in.Text
	}
	v.DecidedAt = timeOrNil(q.DecidedAt)
	if !q.GrantUntil.IsZero() {
		t := q.GrantUntil.UTC()
		v.GrantUntil = &t
	}
	if t := q.Transfer; t != nil {
		v.Transfer = &api.Transfer{Direction: t.Direction, Path: t.Path, Overwrite: t.Overwrite}
		if t.Direction == "put" {
			v.Transfer.Mode = fmt.Sprintf("%04o", t.Mode)
			v.Transfer.Size, v.Transfer.SHA256 = v.StdinBytes, v.StdinSHA256
		}
	}
	return v
}

// requestView is an approval request as the front ends show it, with the
// grant its account allows (none for an action that uses a secret).
func (e *Review) requestView(q approvals.Request) Request {
	v := Request{Approval: approvalView(q), Timeout: q.Timeout}
	if q.Kind == approvals.KindCall && q.Status == approvals.StatusPending && q.Secret == "" {
		v.MaxGrantS = int(e.MaxGrant(q.Target, q.Account) / time.Second)
	}
	return v
}

// Output is an action's stored output, read by a reviewer.
type Output struct {
	Stdout, Stderr []byte
	// StdoutReceived and StderrReceived are what the command wrote, the
	// part over the store's cap included.
	StdoutReceived, StderrReceived int64
}

// ReadOutput returns an action's stored output to reviewer rv, after
// recording in the audit log (output.read, via names the front end) that
// rv read it: no record, no output (ErrUnavailable).
func (e *Review) ReadOutput(ctx context.Context, rv Reviewer, id, via string) (Output, error) {
	if !e.Enabled(ctx, rv) {
		return Output{}, refuse(ErrForbidden, "the reviewer may not read output")
	}
	recs, err := e.alog.Reader().ActionEntries(ctx, id)
	if err != nil {
		return Output{}, err
	}
	for _, rec := range recs {
		if rec.Kind != auditchain.KindActionFinished {
			continue
		}
		var f actionFinished
		if err := rec.Decode(&f); err != nil || f.Stdout == nil || f.Stderr == nil {
			return Output{}, refuse(ErrNotFound, "no output is stored for action "+id)
		}
		stdout, err := e.outputs.Get(ctx, f.Stdout.Digest)
		if err != nil {
			return Output{}, fmt.Errorf("reading stdout of %s: %w", id, err)
		}
		stderr, err := e.outputs.Get(ctx, f.Stderr.Digest)
		if err != nil {
			return Output{}, fmt.Errorf("reading stderr of %s: %w", id, err)
		}
		// Reading output is its own audited permission.
		outN, errN := int64(len(stdout)), int64(len(stderr))
		if _, err := e.record(ctx, id, rec.RunID, outputRead{Reviewer: rv.Name(), Via: via,
			StdoutSHA256: &f.Stdout.Digest, StderrSHA256: &f.Stderr.Digest,
			StdoutStored: &outN, StderrStored: &errN}); err != nil {
			e.log.Error("output.read not recorded; output withheld", "action", id, "error", err)
			return Output{}, refuse(ErrUnavailable, "the read could not be recorded in the audit log, so the output is withheld")
		}
		o := Output{Stdout: stdout, Stderr: stderr, StdoutReceived: int64(len(stdout)), StderrReceived: int64(len(stderr))}
		if r := f.Result; r != nil {
			o.StdoutReceived, o.StderrReceived = r.StdoutReceived, r.StderrReceived
		}
		return o, nil
	}
	return Output{}, refuse(ErrNotFound, "action "+id+" has not finished")
}

// RevealCommand returns the original command of a pending request that
// is stored redacted, to reviewer rv, after recording in the audit log
// (command.revealed, via names the front end) that rv read it: no record,
// no command (ErrUnavailable). A request that was not redacted, or is no
// longer pending (the original is erased then), has none (ErrNotFound).
func (e *Review) RevealCommand(ctx context.Context, rv Reviewer, raw string, via string) (string, error) {
	id, err := requestID(raw)
	if err != nil {
		return "", err
	}
	if !e.Enabled(ctx, rv) {
		return "", refuse(ErrForbidden, "the reviewer may not reveal commands")
	}
	q, err := e.store.Request(ctx, id)
	if err != nil {
		return "", classify(err)
	}
	orig, err := e.store.PendingOriginal(ctx, id)
	if errors.Is(err, approvals.ErrNoOriginal) {
		return "", refuse(ErrNotFound, "approval "+string(id)+" has no original command to reveal: it was not redacted, or it is no longer pending (the original is erased when a request ends)")
	}
	if err != nil {
		return "", err
	}
	if _, err := e.recordKind(ctx, auditchain.KindCommandRevealed, "", string(q.RunID), commandRevealed{Reviewer: rv.Name(), Via: via, ApprovalID: id}); err != nil {
		e.log.Error("command.revealed not recorded; command withheld", "approval", id, "error", err)
		return "", refuse(ErrUnavailable, "the reveal could not be recorded in the audit log, so the command is withheld")
	}
	return orig, nil
}

// ReviewerResult returns an action's result (as Result) to reviewer rv,
// after recording in the audit log (output.read, via names the front end)
// that rv read its output, when it returns any: no record, no output
// (ErrUnavailable).
func (e *Review) ReviewerResult(ctx context.Context, rv Reviewer, a *Action, via string) (api.Action, error) {
	obj, err := a.Result(ctx)
	if err != nil || (obj.Stdout == "" && obj.Stderr == "") {
		return obj, err
	}
	a.mu.Lock()
	out := a.out
	a.mu.Unlock()
	rec := outputRead{Reviewer: rv.Name(), Via: via, StdoutSHA256: &out.stdout.head, StderrSHA256: &out.stderr.head}
	if err := e.recordRead(ctx, obj, rec); err != nil {
		return api.Action{}, err
	}
	return obj, nil
}

// FollowedBy records that reviewer rv follows an action's event stream,
// its output included as it comes (via names the front end), before any
// event is sent: no record, no stream (ErrUnavailable).
func (e *Review) FollowedBy(ctx context.Context, rv Reviewer, a *Action, via string) error {
	return e.recordRead(ctx, a.Snapshot(), outputRead{Reviewer: rv.Name(), Via: via})
}

func (e *core) recordRead(ctx context.Context, obj api.Action, rec outputRead) error {
	if _, err := e.record(ctx, obj.ID, obj.RunID, rec); err != nil {
		e.log.Error("output.read not recorded; output withheld", "action", obj.ID, "error", err)
		return refuse(ErrUnavailable, "the read could not be recorded in the audit log, so the output is withheld")
	}
	return nil
}
