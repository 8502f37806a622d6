package approvals

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// AgentID identifies an agent token: "agt_" and 32 hex digits.
type AgentID string

const (
	agentIDPrefix    = "agt_"
	agentTokenPrefix = "airlock_agent_"
)

// Agent is an identity an operator issued a token for: a remote agent
// presents the token to create runs, and its runs are named after it and
// held to its limits.
type Agent struct {
	ID   AgentID `json:"id"`
	Name string  `json:"name"`
	// Limits are the targets (or target accounts) its runs may act on;
	// empty: any.
	Limits    []Scope   `json:"limits,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the token stops working; zero: never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	RevokedBy string    `json:"revoked_by,omitempty"`

	// Via says how a remote agent proved its identity when it is not an
	// agent token: "oidc" (a workload identity token) or "mtls" (a client
	// certificate); Verified is then the subject that proof names (the
	// token's subject claim, the certificate's name). Such an agent has
	// no ID: it is defined in the configuration, not issued.
	Via      string `json:"via,omitempty"`
	Verified string `json:"verified,omitempty"`

	hash []byte
}

// Subject is what the agent's runs name as their requester:
// "agent:NAME/ID" for a token, "agent:NAME/SUBJECT" for a verified
// workload identity or certificate.
func (a Agent) Subject() string {
	if a.Verified != "" {
		return "agent:" + a.Name + "/" + a.Verified
	}
	return "agent:" + a.Name + "/" + string(a.ID)
}

// ValidSubject reports whether s may stand as a verified subject in a
// requester: 1 to 200 characters of letters, digits and . _ - : @ / + = ~
// (a GitHub "repo:acme/app:ref:refs/heads/main", a Kubernetes
// "system:serviceaccount:ns:name", a SPIFFE ID, a host name, an e-mail).
func ValidSubject(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._-:@/+=~", r):
		default:
			return false
		}
	}
	return true
}

// Intersect is the scope both a and b allow (an empty list allows every
// target): what a run is held to when an agent token's own limits and its
// agent block's both apply. Both non-empty and disjoint: nil, ok false.
func Intersect(a, b []Scope) (out []Scope, ok bool) {
	switch {
	case len(a) == 0:
		return b, true
	case len(b) == 0:
		return a, true
	}
	for _, x := range a {
		for _, y := range b {
			if x.Target != y.Target {
				continue
			}
			switch {
			case x.Account == "":
				out = append(out, y)
			case y.Account == "" || y.Account == x.Account:
				out = append(out, x)
			}
		}
	}
	return out, len(out) > 0
}

// Usable reports whether the token may still create runs at now.
func (a Agent) Usable(now time.Time) bool {
	return a.RevokedAt.IsZero() && (a.ExpiresAt.IsZero() || now.Before(a.ExpiresAt))
}

// ErrAgentNotUsable: the agent token was revoked or has expired.
var ErrAgentNotUsable = errors.New("agent token revoked or expired")

// ErrUnknownAgent: no agent token has that id or name.
var ErrUnknownAgent = errors.New("no such agent token")

// AddAgent issues a token for the agent name, held to limits, that works
// for ttl (zero: until revoked). The token is returned once; only its hash
// is kept. Recorded (EventAgentAdded) before it exists.
func (s *Store) AddAgent(ctx context.Context, name string, limits []Scope, ttl time.Duration) (Agent, Secret, error) {
	if !ValidName(name) {
		return Agent{}, Secret{}, fmt.Errorf("agent name %q: %w", name, ErrBadReviewerName)
	}
	if ttl < 0 {
		return Agent{}, Secret{}, ErrBadTTL
	}
	for _, sc := range limits {
		if sc.Target == "" {
			return Agent{}, Secret{}, fmt.Errorf("a limit without a target: %w", ErrBadScope)
		}
	}
	if err := s.lock(); err != nil {
		return Agent{}, Secret{}, err
	}
	defer s.unlock()
	now := s.clock.Now()
	id := AgentID(newID(agentIDPrefix))
	tok, hash := newToken(agentTokenPrefix, strings.TrimPrefix(string(id), agentIDPrefix))
	a := Agent{ID: id, Name: name, Limits: limits, CreatedAt: now, hash: hash[:]}
	if ttl > 0 {
		a.ExpiresAt = now.Add(ttl)
	}
	if err := s.commitAgent(ctx, &a, Event{Kind: EventAgentAdded, Time: now, Agent: &a}); err != nil {
		return Agent{}, Secret{}, err
	}
	return a, tok, nil
}

// Agents lists the agent tokens, newest first, revoked ones included.
func (s *Store) Agents(ctx context.Context) ([]Agent, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+agentColumns+` FROM agents ORDER BY created_at DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("state database: read agent tokens: %w", err)
	}
	defer rows.Close()
	var out []Agent
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, fmt.Errorf("state database: read agent tokens: %w", err)
		}
		out = append(out, *a)
	}
	return out, rows.Err()
}

// RevokeAgent revokes the token with id, or every usable token of the
// agent named so; by names who did it. Every live run created with a
// revoked token ends with it (EndAgentRevoked: its pending requests are
// withdrawn, and the gateway cancels its running actions). Recorded
// (EventAgentRevoked, then EventRunEnded per run) for each token.
func (s *Store) RevokeAgent(ctx context.Context, idOrName, by string) ([]Agent, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.unlock()
	all, err := s.Agents(ctx)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	var done []Agent
	for _, a := range all {
		if (string(a.ID) != idOrName && a.Name != idOrName) || !a.RevokedAt.IsZero() {
			continue
		}
		a.RevokedAt, a.RevokedBy = now, by
		if err := s.commitAgent(ctx, &a, Event{Kind: EventAgentRevoked, Time: now, Agent: &a}); err != nil {
			return done, err
		}
		done = append(done, a)
		if err := s.endAgentRuns(ctx, a.ID, by); err != nil {
			return done, err
		}
	}
	if len(done) == 0 {
		return nil, fmt.Errorf("agent token %q: %w", idOrName, ErrUnknownAgent)
	}
	return done, nil
}

// endAgentRuns ends every live run created with agent token id: a
// revoked token's authority ends with everything it started. Called with
// s.mu held.
func (s *Store) endAgentRuns(ctx context.Context, id AgentID, by string) error {
	rs, err := loadRuns(ctx, s.db, "agent_id = ? AND state IN (?, ?)", string(id), RunPending.String(), RunApproved.String())
	if err != nil {
		return err
	}
	for _, r := range rs {
		if err := s.endRun(ctx, r, EndAgentRevoked, by, "the agent token was revoked"); err != nil {
			return err
		}
	}
	return nil
}

// VerifyAgent returns the agent a token belongs to, comparing its hash in
// constant time: ErrMalformedToken for what is no agent token,
// ErrWrongToken for a wrong one, ErrAgentNotUsable for a revoked or
// expired one.
func (s *Store) VerifyAgent(ctx context.Context, token Secret) (Agent, error) {
	hexID, hash, err := parseToken(agentTokenPrefix, token)
	if err != nil {
		return Agent{}, err
	}
	a, err := scanAgent(s.db.QueryRowContext(ctx, `SELECT `+agentColumns+` FROM agents WHERE id = ?`, agentIDPrefix+hexID))
	if errors.Is(err, sql.ErrNoRows) {
		return Agent{}, ErrWrongToken
	}
	if err != nil {
		return Agent{}, fmt.Errorf("state database: read agent token: %w", err)
	}
	if !equalHash(a.hash, hash[:]) {
		return Agent{}, ErrWrongToken
	}
	if !a.Usable(s.clock.Now()) {
		return *a, ErrAgentNotUsable
	}
	return *a, nil
}

// IsAgentToken reports whether t has the form of an agent token.
func IsAgentToken(t Secret) bool { return strings.HasPrefix(t.s, agentTokenPrefix) }

// commitAgent writes a and records ev in one transaction. Called with s.mu
// held.
func (s *Store) commitAgent(ctx context.Context, a *Agent, ev Event) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state database: begin: %w", err)
	}
	defer tx.Rollback()
	var limits any
	if len(a.Limits) > 0 {
		b, err := json.Marshal(a.Limits)
		if err != nil {
			return err
		}
		limits = string(b)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO agents (`+agentColumns+`) VALUES (?,?,?,?,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET revoked_at=excluded.revoked_at, revoked_by=excluded.revoked_by`,
		string(a.ID), a.Name, a.hash, limits, ns(a.CreatedAt), ns(a.ExpiresAt), ns(a.RevokedAt), nullStr(a.RevokedBy)); err != nil {
		return fmt.Errorf("state database: write agent token %s: %w", a.ID, err)
	}
	if err := s.sink.Record(ctx, ev); err != nil {
		return &eventError{kind: ev.Kind, err: err}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("state database: commit: %w", err)
	}
	return nil
}

const agentColumns = `id, name, hash, limits, created_at, expires_at, revoked_at, revoked_by`

func scanAgent(sc scanner) (*Agent, error) {
	var (
		a                               Agent
		id                              string
		limits, revokedBy               sql.NullString
		createdAt, expiresAt, revokedAt sql.NullInt64
	)
	if err := sc.Scan(&id, &a.Name, &a.hash, &limits, &createdAt, &expiresAt, &revokedAt, &revokedBy); err != nil {
		return nil, err
	}
	a.ID = AgentID(id)
	if limits.Valid {
		if err := json.Unmarshal([]byte(limits.String), &a.Limits); err != nil {
			return nil, fmt.Errorf("state database: decode limits of %s: %w", id, err)
		}
	}
	a.CreatedAt, a.ExpiresAt, a.RevokedAt = fromNS(createdAt), fromNS(expiresAt), fromNS(revokedAt)
	a.RevokedBy = revokedBy.String
	return &a, nil
}
