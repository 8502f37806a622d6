package config

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/api"
)

// build checks the decoded file and fills cfg from it, block by block, in
// the order of their dependencies: targets name credentials, secrets and
// agents name targets.
func (c *checker) build(cfg *Config, raw *rawConfig, base string) {
	c.top(cfg, raw, base)
	c.listen(cfg, raw.Listen, base)
	c.approval(cfg, raw.Approval)
	c.reviewers(cfg, raw.Reviewers)
	c.mcp(cfg, raw.MCP)
	c.audit(cfg, raw.Audit, base)
	c.notify(cfg, raw.Notify, base)
	c.transfer(cfg, raw.Transfer) // before targets: their max_transfer must fit the spool
	for _, r := range raw.Credentials {
		c.credential(cfg, r, base)
	}
	for _, r := range raw.Targets {
		c.target(cfg, r, base)
	}
	for _, r := range raw.Targets {
		c.via(cfg, r)
	}
	for _, r := range raw.Targets {
		c.chain(cfg, r)
	}
	c.sso(cfg, raw.SSO, base)
	c.opa(cfg, raw.Policy, base)
	c.telemetry(cfg, raw.Telemetry, base)
	c.storage(cfg, raw.Storage, base)

	// secrets (after targets: their grants name them).
	cfg.Secrets = map[string]*Secret{}
	for _, r := range raw.Secrets {
		c.secret(cfg, r, base)
	}
	for _, r := range raw.Redact {
		c.redact(cfg, r)
	}

	// agents (after targets: their limits name them).
	cfg.Agents = map[string]*Agent{}
	for _, r := range raw.Agents {
		c.agent(cfg, r, base)
	}
}

// top reads the attributes outside any block.
func (c *checker) top(cfg *Config, raw *rawConfig, base string) {
	if set(raw.StateDirRange) {
		cfg.StateDir = c.path("state_dir", raw.StateDir, raw.StateDirRange, base)
	} else if d, err := api.DefaultStateDir(); err != nil {
		c.Add(nil, err.Error())
	} else {
		cfg.StateDir = d
	}
	cfg.LogFormat = or(raw.LogFormat, c.Value(raw.LogFormatRange), "text")
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		c.Errorf(raw.LogFormatRange, `log_format must be "text" or "json"`)
	}
	cfg.LogLevel = strings.ToLower(or(raw.LogLevel, c.Value(raw.LogLevelRange), "info"))
	switch cfg.LogLevel {
	case "trace", "debug", "info", "warn", "error":
	default:
		c.Errorf(raw.LogLevelRange, `log_level must be one of "trace", "debug", "info", "warn", "error"`)
	}
}

// listen reads the listen block (l nil: none) and completes the hosts an
// HTTP request may name.
func (c *checker) listen(cfg *Config, l *rawListen, base string) {
	cfg.Listen.HTTP = DefaultHTTPAddr
	cfg.Listen.Socket = filepath.Join(cfg.StateDir, "run", "airlock.sock")
	if l != nil {
		cfg.Listen.HTTP = or(l.HTTP, c.Value(l.HTTPRange), DefaultHTTPAddr)
		cfg.Listen.TLSCert = c.path("tls_cert", l.TLSCert, l.TLSCertRange, base)
		cfg.Listen.TLSKey = c.path("tls_key", l.TLSKey, l.TLSKeyRange, base)
		if set(l.SocketRange) {
			cfg.Listen.Socket = c.path("socket", l.Socket, l.SocketRange, base)
		}
		cfg.Listen.SocketGroup = or(l.SocketGroup, c.Value(l.SocketGroupRange), "")
		if cfg.Listen.SocketGroup != "" && !groupExists(cfg.Listen.SocketGroup) {
			c.Errorf(l.SocketGroupRange, "socket_group %q: no such group; create it or remove socket_group", cfg.Listen.SocketGroup)
		}
		if (cfg.Listen.TLSCert == "") != (cfg.Listen.TLSKey == "") {
			c.Errorf(l.DefRange, "listen needs both tls_cert and tls_key, or neither")
		}
		cfg.Listen.ClientCAFile = c.path("client_ca_file", l.ClientCAFile, l.ClientCAFileRange, base)
		if cfg.Listen.ClientCAFile != "" && cfg.Listen.TLSCert == "" {
			c.Errorf(l.ClientCAFileRange, "listen.client_ca_file needs tls_cert and tls_key: client certificates are presented over TLS")
		}
		if cfg.Listen.HTTP != "" {
			host, _, err := net.SplitHostPort(cfg.Listen.HTTP)
			switch {
			case err != nil:
				c.Errorf(l.HTTPRange, `listen.http = %q is not host:port, e.g. "127.0.0.1:7422"`, cfg.Listen.HTTP)
			case !IsLoopback(host) && cfg.Listen.TLSCert == "":
				c.Errorf(l.HTTPRange, "listen.http = %q is not a loopback address: set tls_cert and tls_key, or listen on 127.0.0.1", cfg.Listen.HTTP)
			}
		}
		for _, h := range c.strList(l.AllowedHosts) {
			h = strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
			if h == "" || strings.ContainsAny(h, "/:@ ") && net.ParseIP(h) == nil {
				c.Errorf(l.AllowedHosts.Range, "allowed_hosts: %q is not a host name or an address (no scheme, port or path)", h)
				continue
			}
			cfg.Listen.AllowedHosts = append(cfg.Listen.AllowedHosts, h)
		}
	}
	if host, _, err := net.SplitHostPort(cfg.Listen.HTTP); err == nil {
		if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
			cfg.Listen.AllowedHosts = append(cfg.Listen.AllowedHosts, strings.ToLower(host))
		} else if l != nil && l.AllowedHosts == nil {
			c.Errorf(l.DefRange, "listen.http = %q listens on every address: set allowed_hosts to the host names clients use (a request naming any other Host is refused)", cfg.Listen.HTTP)
		}
	}
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		if !slices.Contains(cfg.Listen.AllowedHosts, h) {
			cfg.Listen.AllowedHosts = append(cfg.Listen.AllowedHosts, h)
		}
	}
}

// approval reads the approval block (a nil: none).
func (c *checker) approval(cfg *Config, a *rawApproval) {
	cfg.Approval = Approval{Timeout: DefaultApprovalTimeout, RunTTL: DefaultRunTTL, MaxRunTTL: DefaultMaxRunTTL,
		MaxPendingPerRun: approvals.DefaultMaxPendingPerRun, MaxPendingPerRequester: approvals.DefaultMaxPendingPerRequester}
	if a == nil {
		return
	}
	cfg.Approval.MaxPendingPerRun = c.within("max_pending_per_run", a.PerRun, a.PerRunRange, approvals.DefaultMaxPendingPerRun, 1, 10000)
	cfg.Approval.MaxPendingPerRequester = c.within("max_pending_per_requester", a.PerAsker, a.PerAskerRange, approvals.DefaultMaxPendingPerRequester, 1, 10000)
	cfg.Approval.Timeout = c.duration("timeout", a.Timeout, a.TimeoutRange, DefaultApprovalTimeout, 24*time.Hour)
	cfg.Approval.MaxRunTTL = c.duration("max_run_ttl", a.MaxRunTTL, a.MaxRunTTLRange, DefaultMaxRunTTL, 30*24*time.Hour)
	cfg.Approval.RunTTL = c.duration("run_ttl", a.RunTTL, a.RunTTLRange, min(DefaultRunTTL, cfg.Approval.MaxRunTTL), 0)
	if cfg.Approval.RunTTL > cfg.Approval.MaxRunTTL {
		c.Errorf(a.DefRange, "approval.run_ttl (%s) is more than max_run_ttl (%s)", cfg.Approval.RunTTL, cfg.Approval.MaxRunTTL)
	}
}

// reviewers reads the reviewer blocks: separation of duties.
func (c *checker) reviewers(cfg *Config, raw []*rawReviewer) {
	cfg.ReviewerLinks = map[string][]string{}
	for _, rr := range raw {
		if !approvals.ValidName(rr.Name) {
			c.Errorf(rr.DefRange, "reviewer %q: use 1 to 64 letters, digits, '.', '_' or '-'", rr.Name)
			continue
		}
		if _, dup := cfg.ReviewerLinks[rr.Name]; dup {
			c.Errorf(rr.DefRange, "reviewer %q is defined twice", rr.Name)
			continue
		}
		var links []string
		for _, u := range c.strList(rr.UnixUsers) {
			if !approvals.ValidName(u) {
				c.Errorf(rr.UnixUsers.Range, "reviewer %q: unix_users: %q is not a user name", rr.Name, u)
				continue
			}
			links = append(links, u)
		}
		for _, a := range c.strList(rr.Agents) {
			if !approvals.ValidName(a) {
				c.Errorf(rr.Agents.Range, "reviewer %q: agents: %q is not an agent name", rr.Name, a)
				continue
			}
			links = append(links, "agent:"+a+"/")
		}
		for _, as := range c.strList(rr.Subjects) {
			name, subject, ok := strings.Cut(as, "/")
			if !ok || !approvals.ValidName(name) || !approvals.ValidSubject(subject) {
				c.Errorf(rr.Subjects.Range, "reviewer %q: agent_subjects: %q is not NAME/SUBJECT (an agent's name and one verified subject, as in the requester agent:NAME/SUBJECT)", rr.Name, as)
				continue
			}
			links = append(links, "agent:"+as)
		}
		cfg.ReviewerLinks[rr.Name] = links
	}
}

// mcp reads the mcp block (m nil: none).
func (c *checker) mcp(cfg *Config, m *rawMCP) {
	cfg.MCP.OutputBudget = DefaultMCPOutputBudget
	cfg.MCP.MaxWait = DefaultMCPMaxWait
	if m == nil {
		return
	}
	// At most twice the end the output store keeps of a long stream.
	cfg.MCP.OutputBudget = int(c.size(m.OutputBudget, DefaultMCPOutputBudget, 1<<10, 128<<10))
	cfg.MCP.MaxWait = c.duration("max_wait", m.MaxWait, m.MaxWaitRange, DefaultMCPMaxWait, MaxMCPMaxWait)
	if cfg.MCP.MaxWait < time.Second {
		c.Errorf(m.MaxWaitRange, "max_wait = %s is under a second; write the time a tool call may hold its host, under the host's own request timeout (60s for most hosts), like %q", cfg.MCP.MaxWait, "50s")
		cfg.MCP.MaxWait = DefaultMCPMaxWait
	}
}

var checkpointEveryRE = regexp.MustCompile(`^([0-9]+) entries$`)

// audit reads the audit block (a nil: none).
func (c *checker) audit(cfg *Config, a *rawAudit, base string) {
	cfg.Audit = Audit{CheckpointEntries: DefaultCheckpointEntries, CheckpointInterval: DefaultCheckpointEvery}
	if a == nil {
		return
	}
	if a.CheckpointEvery != nil {
		cfg.Audit.CheckpointEntries, cfg.Audit.CheckpointInterval = 0, 0
		for _, s := range c.strList(a.CheckpointEvery) {
			if m := checkpointEveryRE.FindStringSubmatch(s); m != nil {
				n, err := strconv.Atoi(m[1])
				if err != nil || n < 1 || n > 1_000_000 {
					c.Errorf(a.CheckpointEvery.Range, "checkpoint_every %q: the count must be from 1 to 1000000", s)
					continue
				}
				cfg.Audit.CheckpointEntries = n
			} else if d, err := time.ParseDuration(s); err == nil && d >= time.Second {
				cfg.Audit.CheckpointInterval = d
			} else {
				c.Errorf(a.CheckpointEvery.Range, `checkpoint_every %q: write "N entries" or a duration of at least 1s such as "30s"; a list may give both`, s)
			}
		}
	}
	cfg.Audit.WitnessCommand = c.witnessCommand(a.WitnessCommand, base)
}

// notify reads the notify block (n nil: none).
func (c *checker) notify(cfg *Config, n *rawNotify, base string) {
	if n == nil || !c.require(set(n.URLRange), n.DefRange, "notify.url") || !c.require(set(n.SecretFileRange), n.DefRange, "notify.secret_file") {
		return
	}
	cfg.Notify = &Notify{URL: or(n.URL, c.Value(n.URLRange), ""), SecretFile: c.path("secret_file", n.SecretFile, n.SecretFileRange, base)}
	if !strings.HasPrefix(cfg.Notify.URL, "https://") && !strings.HasPrefix(cfg.Notify.URL, "http://") {
		c.Errorf(n.URLRange, "notify.url must be an http:// or https:// URL")
	}
}

// credential reads one credential block.
func (c *checker) credential(cfg *Config, r *rawCredential, base string) {
	if !nameRE.MatchString(r.Name) {
		c.Errorf(r.DefRange, "credential name %q: use letters, digits, '.', '_' and '-' (at most 63)", r.Name)
		return
	}
	if _, dup := cfg.Credentials[r.Name]; dup {
		c.Errorf(r.DefRange, "credential %q is defined twice", r.Name)
		return
	}
	cr := &Credential{
		Name:           r.Name,
		PrivateKeyFile: c.path("private_key_file", r.PrivateKeyFile, r.PrivateKeyFileRange, base),
		PassphraseFile: c.path("passphrase_file", r.PassphraseFile, r.PassphraseFileRange, base),
		CA:             or(r.CA, c.Value(r.CARange), false),
		ForceCommand:   or(r.ForceCommand, c.Value(r.ForceCommandRange), ""),
		SourceAddress:  or(r.SourceAddress, c.Value(r.SourceAddressRange), ""),
	}
	switch {
	case cr.CA && cr.PrivateKeyFile != "":
		c.Errorf(r.DefRange, "credential %q: set private_key_file or ca = true, not both", r.Name)
	case !cr.CA && cr.PrivateKeyFile == "":
		c.Errorf(r.DefRange, "credential %q: set private_key_file (a key the target trusts) or ca = true (per-action certificates)", r.Name)
	case cr.PassphraseFile != "" && cr.PrivateKeyFile == "":
		c.Errorf(r.DefRange, "credential %q: passphrase_file needs private_key_file", r.Name)
	case !cr.CA && (cr.ForceCommand != "" || cr.SourceAddress != ""):
		c.Errorf(r.DefRange, "credential %q: force_command and source_address are certificate options: they need ca = true (for a key, put them in its authorized_keys line)", r.Name)
	}
	cfg.Credentials[r.Name] = cr
}

// sso reads the sso block (r nil: none).
func (c *checker) sso(cfg *Config, r *rawSSO, base string) {
	if r == nil || !c.require(set(r.IssuerRange), r.DefRange, "sso.issuer") || !c.require(set(r.ClientIDRange), r.DefRange, "sso.client_id") ||
		!c.require(r.Groups != nil, r.DefRange, "sso.reviewer_groups") {
		return
	}
	s := &SSO{
		Issuer:           or(r.Issuer, c.Value(r.IssuerRange), ""), // exactly as the provider names itself
		ClientID:         or(r.ClientID, c.Value(r.ClientIDRange), ""),
		ClientSecretFile: c.path("client_secret_file", r.ClientSecretFile, r.ClientSecretFileRange, base),
		Groups:           c.strList(r.Groups),
		GroupsClaim:      or(r.GroupsClaim, c.Value(r.GroupsClaimRange), DefaultGroupsClaim),
		NameClaim:        or(r.NameClaim, c.Value(r.NameClaimRange), DefaultNameClaim),
		Scopes:           c.strList(r.Scopes),
		CAFile:           c.path("ca_file", r.CAFile, r.CAFileRange, base),
	}
	s.DeviceClientID = or(r.DeviceClientID, c.Value(r.DeviceClientIDRange), s.ClientID)
	s.LinksClaim = or(r.LinksClaim, c.Value(r.LinksClaimRange), "")
	s.DeviceClientSecretFile = c.path("device_client_secret_file", r.DeviceSecretFile, r.DeviceSecretFileRange, base)
	s.DeviceLogin = r.DeviceLogin
	if !httpsURL(s.Issuer) {
		c.Errorf(r.IssuerRange, "sso.issuer %q must be the provider's https:// URL as its tokens name it (http:// only on loopback)", s.Issuer)
	}
	if s.ClientID == "" {
		c.Errorf(r.ClientIDRange, "sso.client_id must not be empty")
	}
	if len(s.Groups) == 0 {
		c.Errorf(r.Groups.Range, "sso.reviewer_groups must name at least one group: only its members are reviewers")
	}
	if r.Scopes == nil {
		s.Scopes = []string{"openid", "profile", "email"}
	} else if !slices.Contains(s.Scopes, "openid") {
		c.Errorf(r.Scopes.Range, `sso.scopes must include "openid"`)
	}
	cfg.SSO = s
}

// redact reads one redact block.
func (c *checker) redact(cfg *Config, r *rawRedact) {
	if !c.require(set(r.NameRange), r.DefRange, "redact.name") || !c.require(set(r.PatternRange), r.DefRange, "redact.pattern") {
		return
	}
	name, pattern := or(r.Name, c.Value(r.NameRange), ""), or(r.Pattern, c.Value(r.PatternRange), "")
	if !nameRE.MatchString(name) {
		c.Errorf(r.NameRange, "redact name %q: use letters, digits, '.', '_' and '-' (at most 63)", name)
		return
	}
	re, err := regexp.Compile(pattern)
	switch {
	case err != nil:
		c.Errorf(r.PatternRange, "redact %q: pattern: %v", name, err)
	case re.MatchString(""):
		c.Errorf(r.PatternRange, "redact %q: pattern %q matches the empty string, so it would redact nothing", name, pattern)
	default:
		cfg.Redact = append(cfg.Redact, Redact{Name: name, Pattern: re})
	}
}

// agent reads one agent block and its oidc and mtls blocks.
func (c *checker) agent(cfg *Config, r *rawAgent, base string) {
	if !approvals.ValidName(r.Name) {
		c.Errorf(r.DefRange, "agent %q: use 1 to 64 letters, digits, '.', '_' or '-'", r.Name)
		return
	}
	if _, dup := cfg.Agents[r.Name]; dup {
		c.Errorf(r.DefRange, "agent %q is defined twice", r.Name)
		return
	}
	a := &Agent{Name: r.Name}
	for _, l := range c.strList(r.Limits) {
		sc, err := cfg.Limit(l)
		if err != nil {
			c.Errorf(r.Limits.Range, "agent %q: %v", r.Name, err)
			continue
		}
		a.Limits = append(a.Limits, sc)
	}
	switch {
	case len(r.OIDC) > 1:
		c.Errorf(r.OIDC[1].DefRange, "agent %q has more than one oidc block: define one agent per issuer and audience", r.Name)
	case len(r.OIDC) == 1:
		o := r.OIDC[0]
		if c.require(set(o.IssuerRange), o.DefRange, "oidc.issuer") && c.require(set(o.AudienceRange), o.DefRange, "oidc.audience") {
			a.OIDC = c.oidc(r.Name, o, base)
		}
	}
	switch {
	case len(r.MTLS) > 1:
		c.Errorf(r.MTLS[1].DefRange, "agent %q has more than one mtls block", r.Name)
	case len(r.MTLS) == 1:
		a.MTLS = c.mtls(cfg, r.Name, r.MTLS[0])
	}
	cfg.Agents[r.Name] = a
}

// mtls reads the mtls block of the agent name; nil when it has no
// subjects attribute. Every subject is one agent's: a name an earlier
// agent block (or this one) already lists is a problem.
func (c *checker) mtls(cfg *Config, name string, m *rawMTLS) *AgentMTLS {
	if !c.require(m.Subjects != nil, m.DefRange, "mtls.subjects") {
		return nil
	}
	out := &AgentMTLS{}
	given := c.strList(m.Subjects)
	if len(given) == 0 {
		c.Errorf(m.DefRange, "agent %q: mtls.subjects must name at least one certificate: %s", name, certNameForms)
	}
	for _, s := range given {
		n, err := ParseCertName(s)
		if err != nil {
			c.Errorf(m.Subjects.Range, "agent %q: mtls.subjects: %q: %v", name, clip(s), err)
			continue
		}
		if slices.Contains(out.Subjects, n) {
			c.Errorf(m.Subjects.Range, "agent %q: mtls.subjects: %q is listed twice", name, n.String())
			continue
		}
		if other := subjectOwner(cfg, n); other != "" {
			c.Errorf(m.Subjects.Range, "agent %q: mtls.subjects: %q is also agent %q's: a certificate is one agent", name, n.String(), other)
			continue
		}
		out.Subjects = append(out.Subjects, n)
	}
	if cfg.Listen.ClientCAFile == "" {
		c.Errorf(m.DefRange, "agent %q: an mtls block needs listen.client_ca_file (the CA that issues the agents' certificates)", name)
	}
	return out
}

// subjectOwner is the agent already read whose mtls block lists n, ""
// when none does.
func subjectOwner(cfg *Config, n CertName) string {
	for name, a := range cfg.Agents {
		if a.MTLS != nil && slices.Contains(a.MTLS.Subjects, n) {
			return name
		}
	}
	return ""
}

// oidc reads the oidc block of the agent name.
func (c *checker) oidc(name string, o *rawOIDC, base string) *AgentOIDC {
	a := &AgentOIDC{
		Issuer:       or(o.Issuer, c.Value(o.IssuerRange), ""), // exactly as tokens name it (some end in "/")
		Audience:     or(o.Audience, c.Value(o.AudienceRange), ""),
		SubjectClaim: or(o.SubjectClaim, c.Value(o.SubjectClaimRange), DefaultSubjectClaim),
		CAFile:       c.path("ca_file", o.CAFile, o.CAFileRange, base),
	}
	if !httpsURL(a.Issuer) {
		c.Errorf(o.IssuerRange, "agent %q: oidc.issuer %q must be the issuer's https:// URL as its tokens name it (http:// only on loopback)", name, a.Issuer)
	}
	if a.Audience == "" {
		c.Errorf(o.AudienceRange, "agent %q: oidc.audience must not be empty: it is what the issuer puts in tokens meant for this gateway", name)
	}
	if a.SubjectClaim == "" {
		c.Errorf(o.SubjectClaimRange, "agent %q: oidc.subject_claim must not be empty", name)
	}
	a.RequiredClaims = or(o.RequiredClaims, c.Value(o.RequiredClaimsRange), nil)
	for k, v := range a.RequiredClaims {
		if k == "" || strings.ContainsAny(k+v, "\x00\n\r") {
			c.Errorf(o.RequiredClaimsRange, "required_claims: %q = %q: names must not be empty, and neither may contain NUL or line breaks", k, v)
		}
	}
	return a
}

// secret reads one secret block.
func (c *checker) secret(cfg *Config, r *rawSecret, base string) {
	if !nameRE.MatchString(r.Name) {
		c.Errorf(r.DefRange, "secret name %q: use letters, digits, '.', '_' and '-' (at most 63)", r.Name)
		return
	}
	if _, dup := cfg.Secrets[r.Name]; dup {
		c.Errorf(r.DefRange, "secret %q is defined twice", r.Name)
		return
	}
	s := &Secret{Name: r.Name, File: c.path("file", r.File, r.FileRange, base), SystemdCredential: or(r.SystemdCredential, c.Value(r.SystemdCredentialRange), "")}
	switch {
	case (s.File == "") == (s.SystemdCredential == ""):
		c.Errorf(r.DefRange, "secret %q: set file (a file only the gateway's user can read) or systemd_credential (a LoadCredential= name of the service), one of them", r.Name)
	case set(r.SystemdCredentialRange) && (!nameRE.MatchString(s.SystemdCredential)):
		c.Errorf(r.SystemdCredentialRange, "secret %q: systemd_credential %q is not a credential name", r.Name, s.SystemdCredential)
	}
	if !c.require(r.Accounts != nil, r.DefRange, fmt.Sprintf("secret %q: accounts", r.Name)) {
		return
	}
	for _, g := range c.strList(r.Accounts) {
		target, account, _ := strings.Cut(g, "/")
		t, ok := cfg.Targets[target]
		switch {
		case !ok:
			c.Errorf(r.Accounts.Range, "secret %q: accounts: %q: no target %q (write \"TARGET/ACCOUNT\" or \"TARGET\"; targets: %s)", r.Name, clip(g), clip(target), names(cfg.Targets))
			continue
		case account != "" && t.Accounts[account] == nil:
			c.Errorf(r.Accounts.Range, "secret %q: accounts: target %q has no account %q (accounts: %s)", r.Name, target, clip(account), names(t.Accounts))
			continue
		}
		s.Grants = append(s.Grants, approvals.Scope{Target: target, Account: account})
	}
	if len(s.Grants) == 0 && len(c.strList(r.Accounts)) == 0 {
		c.Errorf(r.Accounts.Range, "secret %q: accounts must name at least one target account", r.Name)
	}
	cfg.Secrets[s.Name] = s
}

// Limit parses an agent limit, "target" or "account@target", against the
// configured targets.
func (cfg *Config) Limit(l string) (approvals.Scope, error) {
	sc := approvals.Scope{Target: l}
	if acct, target, ok := strings.Cut(l, "@"); ok {
		sc = approvals.Scope{Target: target, Account: acct}
	}
	t, ok := cfg.Targets[sc.Target]
	if !ok {
		return sc, fmt.Errorf("limit %q: no target %q (targets: %s)", clip(l), clip(sc.Target), names(cfg.Targets))
	}
	if _, ok := t.Accounts[sc.Account]; sc.Account != "" && !ok {
		return sc, fmt.Errorf("limit %q: target %q has no account %q (accounts: %s)", clip(l), t.Name, clip(sc.Account), names(t.Accounts))
	}
	return sc, nil
}

// opa reads the policy block: the external policy engine.
func (c *checker) opa(cfg *Config, r *rawPolicy, base string) {
	if r == nil || !c.require(set(r.URLRange), r.DefRange, "policy.opa_url") {
		return
	}
	o := &OPA{
		URL:        or(r.URL, c.Value(r.URLRange), ""),
		Timeout:    c.duration("opa_timeout", r.Timeout, r.TimeoutRange, DefaultOPATimeout, MaxOPATimeout),
		FailClosed: true,
		TokenFile:  c.path("opa_token_file", r.TokenFile, r.TokenFileRange, base),
		CAFile:     c.path("opa_ca_file", r.CAFile, r.CAFileRange, base),
	}
	o.FailClosed = or(r.FailClosed, c.Value(r.FailClosedRange), true)
	if !httpsURL(o.URL) {
		c.Errorf(r.URLRange, "policy.opa_url %q must be OPA's https:// data API URL, such as https://opa.internal:8181/v1/data/airlock/decision (http:// only on loopback)", o.URL)
	}
	cfg.OPA = o
}

// telemetry reads the telemetry block.
func (c *checker) telemetry(cfg *Config, r *rawTelemetry, base string) {
	if r == nil {
		return
	}
	t := &Telemetry{
		OTLPEndpoint:  or(r.OTLPEndpoint, c.Value(r.OTLPEndpointRange), ""),
		OTLPTokenFile: c.path("otlp_token_file", r.OTLPTokenFile, r.OTLPTokenFileRange, base),
		OTLPCAFile:    c.path("otlp_ca_file", r.OTLPCAFile, r.OTLPCAFileRange, base),
		ServiceName:   or(r.ServiceName, c.Value(r.ServiceNameRange), DefaultServiceName),
		SampleRatio:   1,
		PprofListen:   or(r.PprofListen, c.Value(r.PprofListenRange), ""),
	}
	if t.OTLPEndpoint != "" {
		if !httpsURL(t.OTLPEndpoint) {
			c.Errorf(r.OTLPEndpointRange, "telemetry.otlp_endpoint %q must be an OTLP/HTTP receiver's base https:// URL, such as https://otel.internal:4318 (http:// only on loopback)", t.OTLPEndpoint)
		}
	} else if set(r.OTLPTokenFileRange) || set(r.OTLPCAFileRange) || set(r.SampleRatioRange) {
		c.Errorf(r.DefRange, "telemetry: otlp_token_file, otlp_ca_file and sample_ratio need otlp_endpoint")
	}
	if c.Value(r.SampleRatioRange) {
		t.SampleRatio = r.SampleRatio
	}
	if set(r.SampleRatioRange) && !(t.SampleRatio >= 0 && t.SampleRatio <= 1) {
		c.Errorf(r.SampleRatioRange, "telemetry.sample_ratio must be a number from 0 to 1")
	}
	if set(r.ServiceNameRange) && (t.ServiceName == "" || len(t.ServiceName) > 255) {
		c.Errorf(r.ServiceNameRange, "telemetry.service_name must be 1 to 255 characters")
	}
	if t.PprofListen != "" {
		host, port, err := net.SplitHostPort(t.PprofListen)
		if err != nil || !IsLoopback(host) || port == "" {
			c.Errorf(r.PprofListenRange, "telemetry.pprof_listen %q must be a loopback address with a port, such as 127.0.0.1:7423: profiles are for the host's operator", t.PprofListen)
		}
	}
	cfg.Telemetry = t
}

// storage reads the storage block.
func (c *checker) storage(cfg *Config, r *rawStorage, base string) {
	if r == nil {
		return
	}
	s := &Storage{
		Postgres:     or(r.Postgres, c.Value(r.PostgresRange), ""),
		PasswordFile: c.path("password_file", r.PasswordFile, r.PasswordFileRange, base),
		Lease:        c.duration("lease", r.Lease, r.LeaseRange, DefaultLease, 10*time.Minute),
	}
	if !set(r.PostgresRange) {
		c.Errorf(r.DefRange, "storage: postgres is required (without a storage block, the state stays in SQLite files in state_dir)")
	} else if err := sqldb.CheckURL(s.Postgres); err != nil {
		c.Errorf(r.PostgresRange, "storage.postgres: %v", err)
	}
	if s.Lease < 3*time.Second {
		c.Errorf(r.LeaseRange, "storage.lease = %s is less than the minimum 3s: heartbeats must fit in it several times", s.Lease)
	}
	cfg.Storage = s
}

// transfer reads the transfer block (a nil: none): the spool's budgets.
func (c *checker) transfer(cfg *Config, t *rawTransfer) {
	cfg.Transfer = Transfer{SpoolMax: DefaultSpoolMax, SpoolMaxPerRequester: DefaultSpoolMax / 4, MinFree: DefaultMinFree}
	if t == nil {
		return
	}
	x := &cfg.Transfer
	x.SpoolMax = c.size(t.SpoolMax, DefaultSpoolMax, 1<<20, MaxSpoolLimit)
	// One requester may hold a quarter of the spool unless told otherwise.
	x.SpoolMaxPerRequester = c.size(t.PerRequester, x.SpoolMax/4, 1<<20, MaxSpoolLimit)
	x.MinFree = c.size(t.MinFree, DefaultMinFree, 0, MaxSpoolLimit)
	if x.SpoolMaxPerRequester > x.SpoolMax {
		c.Errorf(t.PerRequester.Range, "transfer.spool_max_per_requester (%d bytes) is more than spool_max (%d bytes)", x.SpoolMaxPerRequester, x.SpoolMax)
	}
}
