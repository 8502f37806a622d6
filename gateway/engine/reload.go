package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/opa"
	"github.com/airlockgw/airlock/gateway/redact"
)

// loaded is a configuration and what the engine made of it: the
// credentials loaded, a slot channel per target, the workload verifiers
// and the single sign-on. A reload swaps it whole; an action keeps the one
// it started under to its end.
type loaded struct {
	cfg     *config.Config
	signers map[string]ssh.Signer
	// ca signs per-action certificates for ca = true credentials.
	ca    ssh.Signer
	slots map[string]chan struct{}
	// workloads verify the oidc blocks' tokens, by agent name.
	workloads map[string]*workload
	// sso is the reviewers' single sign-on, nil without an sso block.
	sso *SSO
	// secrets are the secret blocks' values, by name.
	secrets map[string][]byte
	// redactor finds credentials in commands: the built-in detectors and
	// the redact blocks.
	redactor *redact.Redactor
	// opa asks the policy block's engine (OPA); nil without one.
	opa *opa.Client
}

// load makes what cfg needs. What prev made for an unchanged part is kept:
// a target's slots (so that max_parallel still counts the actions in
// flight), an issuer's discovered keys, the single sign-on's logins in
// progress.
func (e *core) load(cfg *config.Config, prev *loaded) (*loaded, error) {
	l := &loaded{cfg: cfg, signers: map[string]ssh.Signer{}, slots: map[string]chan struct{}{}}
	for _, c := range cfg.Credentials {
		if c.CA {
			if l.ca == nil {
				ca, err := config.LoadCA(cfg, c)
				if err != nil {
					return nil, err
				}
				l.ca = ca
			}
			continue
		}
		signer, err := config.LoadSigner(c)
		if err != nil {
			return nil, err
		}
		l.signers[c.Name] = signer
	}
	var rules []redact.Rule
	for _, r := range cfg.Redact {
		rules = append(rules, redact.Rule{Name: r.Name, Pattern: r.Pattern, Spaces: true})
	}
	l.redactor = redact.New(rules)
	if o := cfg.OPA; o != nil {
		c, err := opa.New(opa.Options{URL: o.URL, Timeout: o.Timeout, TokenFile: o.TokenFile, CAFile: o.CAFile})
		if err != nil {
			return nil, err
		}
		l.opa = c
	}
	l.secrets = make(map[string][]byte, len(cfg.Secrets))
	for _, sc := range cfg.Secrets {
		v, err := config.LoadSecretValue(sc)
		if err != nil {
			return nil, err
		}
		l.secrets[sc.Name] = v
	}
	for _, t := range cfg.Targets {
		if prev != nil {
			if old, ok := prev.cfg.Targets[t.Name]; ok && old.MaxParallel == t.MaxParallel {
				l.slots[t.Name] = prev.slots[t.Name]
				continue
			}
		}
		l.slots[t.Name] = make(chan struct{}, t.MaxParallel)
	}
	w, err := newWorkloads(cfg)
	if err != nil {
		return nil, err
	}
	for name, nw := range w {
		if prev != nil {
			if old, ok := prev.workloads[name]; ok && reflect.DeepEqual(old.agent.OIDC, nw.agent.OIDC) {
				w[name] = &workload{agent: nw.agent, discovery: old.discovery}
			}
		}
	}
	l.workloads = w
	if prev != nil && prev.sso != nil && reflect.DeepEqual(prev.cfg.SSO, cfg.SSO) {
		l.sso = prev.sso
	} else if l.sso, err = newSSO(e, cfg); err != nil {
		return nil, err
	}
	return l, nil
}

// ErrNeedsRestart: a reload changed settings a running gateway cannot
// take over.
var ErrNeedsRestart = errors.New("these settings change only with a restart (systemctl restart airlock)")

// Reload puts cfg in force: it is checked and everything it names is
// loaded first, config.loaded is recorded, and only then is it swapped in
// — whole, at once. Actions in flight finish under the configuration they
// started with. On any error the configuration in force stays, and the
// error says why. Settings of the listeners, the state directory, the
// audit log, approvals, MCP, notifications and logging need a restart
// (ErrNeedsRestart names them).
func (e *Admin) Reload(ctx context.Context, cfg *config.Config) error {
	// One reload at a time (SIGHUP and the API may race): the last one
	// recorded is the one in force.
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	prev := e.conf()
	if changed := restartOnly(prev.cfg, cfg); len(changed) > 0 {
		return fmt.Errorf("%w: %s changed; restart the gateway for them (nothing was reloaded)", ErrNeedsRestart, strings.Join(changed, ", "))
	}
	l, err := e.load(cfg, prev)
	if err != nil {
		return err
	}
	if e.pg != nil && l.ca != nil {
		// A CA that came to this replica since it started is the one
		// the replicas share, or it is not used.
		if err := claimSharedKeys(ctx, e.pg, cfg.StateDir, true); err != nil {
			return err
		}
	}
	if _, err := e.record(ctx, "", "", configLoaded{Path: cfg.Path, SHA256: cfg.Digest, Targets: int64(len(cfg.Targets))}); err != nil {
		return refuse(ErrUnavailable, "the new configuration could not be recorded in the audit log, so it is not in force: "+err.Error())
	}
	e.store.SetLinks(cfg.ReviewerLinks)
	if err := e.store.SetPolicy(approvalPolicy(cfg)); err != nil {
		return err // the configuration's modes were checked: a bug
	}
	e.cur.Store(l)
	e.log.Info("configuration reloaded", "path", cfg.Path, "sha256", cfg.Digest, "config_digest", config.ShortDigest(config.SecurityDigest(cfg)), "targets", len(cfg.Targets))
	if r := e.replica; r != nil {
		// The other replicas learn of it now, not at the next renewal.
		pctx, cancel := context.WithTimeout(ctx, r.lease/4)
		r.publishConfig(pctx)
		cancel()
	}
	return nil
}

// restartOnly names the settings that differ between a and b and that a
// reload cannot change.
func restartOnly(a, b *config.Config) []string {
	var out []string
	for _, f := range []struct {
		name string
		a, b any
	}{
		{"state_dir", a.StateDir, b.StateDir},
		{"log_format", a.LogFormat, b.LogFormat},
		{"log_level", a.LogLevel, b.LogLevel},
		{"listen", a.Listen, b.Listen},
		{"approval", a.Approval, b.Approval},
		{"audit", a.Audit, b.Audit},
		{"mcp", a.MCP, b.MCP},
		{"notify", a.Notify, b.Notify},
		{"storage", a.Storage, b.Storage},
	} {
		if !reflect.DeepEqual(f.a, f.b) {
			out = append(out, f.name)
		}
	}
	return out
}

// ReloadFile reads the configuration file in force again and reloads it
// (Reload). A file with problems changes nothing; the error lists them.
func (e *Admin) ReloadFile(ctx context.Context) (*config.Config, error) {
	cfg, err := config.Load(e.conf().cfg.Path)
	if err != nil {
		return nil, err
	}
	if err := e.Reload(ctx, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}
