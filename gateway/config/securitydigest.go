package config

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy/policy"
	"github.com/airlockgw/airlock/gateway/classify"
)

// The security digest names what a configuration lets agents do and who
// decides it, so that gateway replicas sharing one database can tell
// whether they enforce the same thing. It is a SHA-256 over a canonical
// JSON document built for it (securityView), not over the file's bytes:
// comments, blank lines, the order of blocks and of set-like lists do not
// count, and neither do what legitimately differs from host to host
// (listen addresses, the state directory, key and secret file paths).
// Secret values, passphrases and private keys never enter it; a secret
// counts by its name and grants alone.
//
// What counts: every target (address, pinned host keys, the contents of
// its known_hosts file as read when the digest is made, jump host,
// accounts with their approval mode, policy, bounds, action policy and
// credential), the credentials' names and kinds, the approval block, the
// reviewer blocks' links, the agent blocks (limits, oidc and mtls
// identity), the secrets' names and grants, the redact patterns, the
// policy block's OPA settings and the sso block.

// SecurityDigestVersion is the version of the canonical document the
// security digest hashes. A change to what it covers or how it is
// written takes the next number: replicas of builds with different
// versions never compare equal.
const SecurityDigestVersion = 1

// ShortDigestLen is how many hex digits of a security digest are shown
// where a short form is enough to tell replicas apart.
const ShortDigestLen = 12

// SecurityDigest returns the security digest of cfg, in hex. It reads
// the targets' known_hosts files (their current contents count).
func SecurityDigest(cfg *Config) string {
	b := securityDocument(cfg)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ShortDigest is the first ShortDigestLen hex digits of digest (the whole
// of a shorter one).
func ShortDigest(digest string) string {
	if len(digest) <= ShortDigestLen {
		return digest
	}
	return digest[:ShortDigestLen]
}

// securityDocument is the canonical JSON the security digest hashes:
// encoding/json writes struct fields in declaration order and map keys
// sorted; every set-like list is sorted before.
func securityDocument(cfg *Config) []byte {
	b, err := json.Marshal(newSecurityView(cfg))
	if err != nil {
		// Only strings, numbers, bools, slices and maps of them: a bug.
		panic("config: security digest: " + err.Error())
	}
	return b
}

// securityView is the document the security digest covers. Field names
// are part of the digest: renaming one is a new SecurityDigestVersion.
type securityView struct {
	Version       int                           `json:"version"`
	Targets       map[string]securityTarget     `json:"targets"`
	Credentials   map[string]securityCredential `json:"credentials"`
	Approval      securityApproval              `json:"approval"`
	ReviewerLinks map[string][]string           `json:"reviewer_links"`
	Agents        map[string]securityAgent      `json:"agents"`
	Secrets       map[string][]string           `json:"secrets"`
	Redact        map[string]string             `json:"redact"`
	OPA           *securityOPA                  `json:"opa"`
	SSO           *securitySSO                  `json:"sso"`
}

type securityTarget struct {
	Address        string                     `json:"address"`
	HostKeys       []string                   `json:"host_keys"`
	KnownHosts     *securityKnownHosts        `json:"known_hosts"`
	DefaultAccount string                     `json:"default_account"`
	MaxParallel    int                        `json:"max_parallel"`
	Via            string                     `json:"via"`
	ViaAccount     string                     `json:"via_account"`
	Accounts       map[string]securityAccount `json:"accounts"`
}

// securityKnownHosts is a known_hosts file's entries: its lines without
// comments and blank lines, whitespace collapsed, sorted (sshd and
// knownhosts match any line, whatever its place). Error says why the
// file could not be read: a replica that cannot read it trusts nothing
// in it.
type securityKnownHosts struct {
	Lines []string `json:"lines"`
	Error string   `json:"error,omitempty"`
}

type securityAccount struct {
	Credential      string          `json:"credential"`
	Approval        string          `json:"approval"`
	MaxTimeout      string          `json:"max_timeout"`
	Output          string          `json:"output"`
	MaxStdin        int64           `json:"max_stdin"`
	MaxTransfer     int64           `json:"max_transfer"`
	OnSecret        string          `json:"on_secret"`
	Escalate        []string        `json:"escalate"`
	Refuse          []string        `json:"refuse"`
	DenyPatterns    []string        `json:"deny_patterns"`
	AllowUnreviewed []string        `json:"allow_unreviewed"`
	MaxGrant        string          `json:"max_grant"`
	Quota           approvals.Quota `json:"quota"`
	ActionPolicy    *securityPolicy `json:"action_policy"`
	EnforceReadOnly bool            `json:"enforce_read_only"`
}

// securityPolicy is an account's copy of the airlock-action policy:
// verbs by name (the first word of a request picks one, whatever the
// file's order), parameters in their order (the request's).
type securityPolicy struct {
	Verbs    map[string]securityVerb `json:"verbs"`
	Transfer *securityTransfer       `json:"transfer"`
}

type securityTransfer struct {
	PutUnder []string `json:"put_under"`
	GetUnder []string `json:"get_under"`
	MaxSize  int64    `json:"max_size"`
}

type securityVerb struct {
	Argv    []string        `json:"argv"`
	Params  []securityParam `json:"params"`
	Timeout string          `json:"timeout"`
	RunAs   string          `json:"run_as"`
	Dir     string          `json:"dir"`
	Env     []string        `json:"env"`
	Class   string          `json:"class"`
}

type securityParam struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"`
	Values      []string `json:"values"`
	Pattern     string   `json:"pattern"`
	LeadingDash bool     `json:"leading_dash"`
	Min         int64    `json:"min"`
	Max         int64    `json:"max"`
	Under       string   `json:"under"`
}

// securityCredential is a credential's kind and the options of the
// certificates it makes; never its key.
type securityCredential struct {
	Kind          string `json:"kind"` // "key" or "ca"
	ForceCommand  string `json:"force_command"`
	SourceAddress string `json:"source_address"`
}

type securityApproval struct {
	Timeout                string `json:"timeout"`
	RunTTL                 string `json:"run_ttl"`
	MaxRunTTL              string `json:"max_run_ttl"`
	MaxPendingPerRun       int    `json:"max_pending_per_run"`
	MaxPendingPerRequester int    `json:"max_pending_per_requester"`
}

type securityAgent struct {
	Limits []string           `json:"limits"`
	OIDC   *securityAgentOIDC `json:"oidc"`
	MTLS   []string           `json:"mtls_subjects"`
}

type securityAgentOIDC struct {
	Issuer         string            `json:"issuer"`
	Audience       string            `json:"audience"`
	SubjectClaim   string            `json:"subject_claim"`
	RequiredClaims map[string]string `json:"required_claims"`
}

type securityOPA struct {
	URL        string `json:"url"`
	Timeout    string `json:"timeout"`
	FailClosed bool   `json:"fail_closed"`
}

type securitySSO struct {
	Issuer         string   `json:"issuer"`
	ClientID       string   `json:"client_id"`
	Groups         []string `json:"groups"`
	GroupsClaim    string   `json:"groups_claim"`
	NameClaim      string   `json:"name_claim"`
	Scopes         []string `json:"scopes"`
	LinksClaim     string   `json:"links_claim"`
	DeviceClientID string   `json:"device_client_id"`
	DeviceLogin    bool     `json:"device_login"`
}

func newSecurityView(cfg *Config) securityView {
	v := securityView{
		Version:       SecurityDigestVersion,
		Targets:       map[string]securityTarget{},
		Credentials:   map[string]securityCredential{},
		ReviewerLinks: map[string][]string{},
		Agents:        map[string]securityAgent{},
		Secrets:       map[string][]string{},
		Redact:        map[string]string{},
		Approval: securityApproval{
			Timeout: dur(cfg.Approval.Timeout), RunTTL: dur(cfg.Approval.RunTTL), MaxRunTTL: dur(cfg.Approval.MaxRunTTL),
			MaxPendingPerRun: cfg.Approval.MaxPendingPerRun, MaxPendingPerRequester: cfg.Approval.MaxPendingPerRequester,
		},
	}
	for name, t := range cfg.Targets {
		v.Targets[name] = newSecurityTarget(t)
	}
	for name, c := range cfg.Credentials {
		kind := "key"
		if c.CA {
			kind = "ca"
		}
		v.Credentials[name] = securityCredential{Kind: kind, ForceCommand: c.ForceCommand, SourceAddress: c.SourceAddress}
	}
	for name, links := range cfg.ReviewerLinks {
		v.ReviewerLinks[name] = sortedSet(links)
	}
	for name, a := range cfg.Agents {
		v.Agents[name] = newSecurityAgent(a)
	}
	for name, s := range cfg.Secrets {
		v.Secrets[name] = scopes(s.Grants)
	}
	for _, r := range cfg.Redact {
		v.Redact[r.Name] = r.Pattern.String()
	}
	if o := cfg.OPA; o != nil {
		v.OPA = &securityOPA{URL: o.URL, Timeout: dur(o.Timeout), FailClosed: o.FailClosed}
	}
	if s := cfg.SSO; s != nil {
		v.SSO = &securitySSO{Issuer: s.Issuer, ClientID: s.ClientID, Groups: sortedSet(s.Groups), GroupsClaim: s.GroupsClaim,
			NameClaim: s.NameClaim, Scopes: sortedSet(s.Scopes), LinksClaim: s.LinksClaim, DeviceClientID: s.DeviceClientID, DeviceLogin: s.DeviceLogin}
	}
	return v
}

func newSecurityTarget(t *Target) securityTarget {
	st := securityTarget{Address: t.Address, DefaultAccount: t.DefaultAccount, MaxParallel: t.MaxParallel,
		Via: t.Via, ViaAccount: t.ViaAccount, HostKeys: []string{}, Accounts: map[string]securityAccount{}}
	for _, k := range t.HostKeys {
		st.HostKeys = append(st.HostKeys, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))))
	}
	st.HostKeys = sortedSet(st.HostKeys)
	if t.KnownHostsFile != "" {
		st.KnownHosts = readKnownHosts(t.KnownHostsFile)
	}
	for name, a := range t.Accounts {
		st.Accounts[name] = securityAccount{
			Credential: a.Credential, Approval: a.Approval.String(), MaxTimeout: dur(a.MaxTimeout), Output: string(a.Output),
			MaxStdin: a.MaxStdin, MaxTransfer: a.MaxTransfer, OnSecret: a.OnSecret,
			Escalate: classes(a.Escalate), Refuse: classes(a.Refuse), AllowUnreviewed: classes(a.AllowUnreviewed),
			DenyPatterns: patterns(a.DenyPatterns), MaxGrant: dur(a.MaxGrant), Quota: a.Quota,
			ActionPolicy: newSecurityPolicy(a.ActionPolicy), EnforceReadOnly: a.EnforceReadOnly,
		}
	}
	return st
}

func newSecurityPolicy(p *policy.Policy) *securityPolicy {
	if p == nil {
		return nil
	}
	sp := &securityPolicy{Verbs: map[string]securityVerb{}}
	if tr := p.Transfer; tr != nil {
		sp.Transfer = &securityTransfer{PutUnder: sortedSet(tr.PutUnder), GetUnder: sortedSet(tr.GetUnder), MaxSize: tr.MaxSize}
	}
	for _, vb := range p.Verbs {
		sv := securityVerb{Argv: vb.Argv, Params: []securityParam{}, Timeout: dur(vb.Timeout), RunAs: vb.RunAs, Dir: vb.Dir,
			Env: sortedSet(vb.Env), Class: vb.Class}
		for _, pm := range vb.Params {
			sv.Params = append(sv.Params, securityParam{Name: pm.Name, Kind: pm.Kind.String(), Values: sortedSet(pm.Values),
				Pattern: pm.Pattern, LeadingDash: pm.LeadingDash, Min: pm.Min, Max: pm.Max, Under: pm.Under})
		}
		sp.Verbs[vb.Name] = sv
	}
	return sp
}

func newSecurityAgent(a *Agent) securityAgent {
	sa := securityAgent{Limits: scopes(a.Limits)}
	if o := a.OIDC; o != nil {
		sa.OIDC = &securityAgentOIDC{Issuer: o.Issuer, Audience: o.Audience, SubjectClaim: o.SubjectClaim, RequiredClaims: o.RequiredClaims}
	}
	if m := a.MTLS; m != nil {
		sa.MTLS = []string{}
		for _, s := range m.Subjects {
			sa.MTLS = append(sa.MTLS, s.String())
		}
		sa.MTLS = sortedSet(sa.MTLS)
	}
	return sa
}

// maxKnownHostsDigest bounds what is read of a known_hosts file for the
// digest; the rest counts as an error.
const maxKnownHostsDigest = 16 << 20

// readKnownHosts reads a known_hosts file's entries for the digest.
func readKnownHosts(path string) *securityKnownHosts {
	b, err := os.ReadFile(path)
	if err != nil {
		// The error's kind, not its text: the path may differ by host.
		return &securityKnownHosts{Lines: []string{}, Error: fileErrorKind(err)}
	}
	if len(b) > maxKnownHostsDigest {
		return &securityKnownHosts{Lines: []string{}, Error: "too large"}
	}
	kh := &securityKnownHosts{Lines: []string{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	for sc.Scan() {
		line := strings.Join(strings.Fields(sc.Text()), " ")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kh.Lines = append(kh.Lines, line)
	}
	kh.Lines = sortedSet(kh.Lines)
	return kh
}

// fileErrorKind names why a file could not be read, without its path.
func fileErrorKind(err error) string {
	switch {
	case os.IsNotExist(err):
		return "missing"
	case os.IsPermission(err):
		return "permission denied"
	}
	return "unreadable"
}

// sortedSet is a sorted copy of s without duplicates, never nil.
func sortedSet(s []string) []string {
	out := append([]string{}, s...)
	slices.Sort(out)
	return slices.Compact(out)
}

func classes(cs []classify.Class) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.String())
	}
	return sortedSet(out)
}

func patterns[P interface{ String() string }](ps []P) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.String())
	}
	return sortedSet(out)
}

func scopes(ss []approvals.Scope) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s.Account == "" {
			out = append(out, s.Target)
		} else {
			out = append(out, s.Target+"/"+s.Account)
		}
	}
	return sortedSet(out)
}

// dur is a duration as the digest writes it.
func dur(d time.Duration) string { return d.String() }
