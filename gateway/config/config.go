package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/deploy/hclcheck"
	"github.com/airlockgw/airlock/deploy/policy"
	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/classify"
	"github.com/airlockgw/airlock/sshexec"
)

// Defaults for what the configuration leaves out.
const (
	DefaultHTTPAddr          = "127.0.0.1:7422"
	DefaultApprovalTimeout   = 120 * time.Second
	DefaultRunTTL            = time.Hour
	DefaultMaxRunTTL         = 8 * time.Hour
	DefaultCheckpointEntries = 100
	DefaultCheckpointEvery   = 30 * time.Second
	DefaultMaxParallel       = 4
	DefaultMaxTimeout        = 10 * time.Minute
	DefaultActionTimeout     = 60 * time.Second
	// maxConfigSize bounds the configuration file.
	maxConfigSize = 4 << 20
)

// Config is a loaded, validated configuration. Paths in it are absolute.
type Config struct {
	// Path is the file it was loaded from; Digest the SHA-256 of its
	// bytes, in hex, as recorded in the audit log's config.loaded entry.
	Path   string
	Digest string

	StateDir  string
	LogFormat string // "text" or "json"
	LogLevel  string

	Listen   Listen
	Approval Approval
	Audit    Audit
	MCP      MCP
	Notify   *Notify

	// ReviewerLinks are, per reviewer, the identities linked to it (Unix
	// user names, and agents as "agent:NAME/"): the reviewer never
	// decides their requests.
	ReviewerLinks map[string][]string

	// Agents are the agent blocks by name: how a remote agent of that
	// name proves who it is (OIDC, client certificate), and the limits
	// every run of that name is held to, whatever the identity kind.
	Agents map[string]*Agent

	// SSO is the sso block: reviewers log in through an OpenID provider.
	SSO *SSO

	// Secrets are the secret blocks by name: values the gateway holds and
	// writes to a command's standard input for the accounts they are
	// granted to.
	Secrets map[string]*Secret

	// Redact are the redact blocks: patterns, beside the built-in
	// detectors, of credentials that must not be stored in a command.
	Redact []Redact

	// OPA is the policy block's external policy engine, asked about every
	// action the local policy allows, which may only refuse it. nil: none.
	OPA *OPA

	// Telemetry is the telemetry block: traces sent over OTLP/HTTP and the
	// profiler. nil: neither.
	Telemetry *Telemetry

	// Storage is the storage block: the gateway's state and audit log in
	// a PostgreSQL database that several replicas share. nil: SQLite
	// files in StateDir.
	Storage *Storage

	// Credentials and Targets by name; TargetNames in file order.
	Credentials map[string]*Credential
	Targets     map[string]*Target
	TargetNames []string
}

// Agent is one agent block.
type Agent struct {
	Name string
	// Limits are the targets (or target accounts) the agent's runs may
	// act on; empty: any.
	Limits []approvals.Scope
	OIDC   *AgentOIDC
	MTLS   *AgentMTLS
}

// AgentOIDC is an agent block's oidc block: a workload identity token
// (a JWT from GitHub Actions, a Kubernetes service account, any issuer
// with discovery and JWKS) verified for issuer, audience, expiry and
// required claims.
type AgentOIDC struct {
	Issuer   string
	Audience string
	// SubjectClaim names the claim that says which workload it is (the
	// requester is agent:NAME/<its value>); "sub" by default.
	SubjectClaim string
	// RequiredClaims must each be in the token with this value (or, for
	// a list claim, contain it).
	RequiredClaims map[string]string
	// CAFile, when set, is the only trust for the issuer's TLS
	// certificate (a private identity provider).
	CAFile string
}

// AgentMTLS is an agent block's mtls block: a client certificate from
// listen.client_ca_file whose common name, DNS or URI name is one of
// Subjects.
type AgentMTLS struct {
	Subjects []string
}

// SSO is the sso block: the reviewer pages' single sign-on (OpenID
// Connect, authorization code with PKCE).
type SSO struct {
	Issuer           string
	ClientID         string
	ClientSecretFile string // "" for a public client (PKCE alone)
	// Groups admit a reviewer: the groups claim must hold one of them.
	Groups      []string
	GroupsClaim string
	// NameClaim is the claim whose value is the reviewer's name.
	NameClaim string
	Scopes    []string
	CAFile    string
	// LinksClaim names a claim listing identities the reviewer is
	// (unix:NAME, agent:NAME, agent:NAME/SUBJECT): it never decides
	// their requests. "": none.
	LinksClaim string
	// DeviceClientID and DeviceClientSecretFile are the client of the
	// device authorization grant (airlock login); by default the same
	// client.
	DeviceClientID         string
	DeviceClientSecretFile string
}

// OPA is the policy block's Open Policy Agent, asked over its REST API.
type OPA struct {
	// URL is the decision's data API URL, for example
	// http://127.0.0.1:8181/v1/data/airlock/decision.
	URL     string
	Timeout time.Duration
	// FailClosed refuses an action when OPA cannot be asked or answers
	// nothing usable (the default); false lets it through, recorded.
	FailClosed bool
	// TokenFile holds a bearer token for OPA's authentication, CAFile
	// the CA of its https certificate; "" for none.
	TokenFile string
	CAFile    string
}

// Telemetry is the telemetry block. Both parts are off unless set.
type Telemetry struct {
	// OTLPEndpoint is the base URL of an OpenTelemetry collector's
	// OTLP/HTTP receiver (traces go to its /v1/traces), such as
	// http://127.0.0.1:4318; "" sends no traces.
	OTLPEndpoint string
	// OTLPTokenFile holds a bearer token for the collector, OTLPCAFile the
	// CA of its https certificate; "" for none.
	OTLPTokenFile string
	OTLPCAFile    string
	// ServiceName is the service.name resource attribute ("airlock").
	ServiceName string
	// SampleRatio is the fraction of actions traced, 0 to 1 (1).
	SampleRatio float64
	// PprofListen is a loopback address serving Go's /debug/pprof; ""
	// serves none.
	PprofListen string
}

// Storage is the storage block.
type Storage struct {
	// Postgres is the database's libpq URL (no password in it).
	Postgres string
	// PasswordFile holds the password; "" for none.
	PasswordFile string
	// Lease is how long a replica's lease lasts without a heartbeat:
	// after it, survivors finish the replica's in-flight actions as
	// interrupted (DefaultLease).
	Lease time.Duration
}

// DefaultLease is storage.lease when it is not set.
const DefaultLease = 15 * time.Second

// DefaultServiceName is telemetry.service_name when it is not set.
const DefaultServiceName = "airlock"

// The policy block's defaults and bounds.
const (
	DefaultOPATimeout = 2 * time.Second
	MaxOPATimeout     = 30 * time.Second
)

// The sso block's defaults.
const (
	DefaultGroupsClaim = "groups"
	DefaultNameClaim   = "preferred_username"
)

// DefaultSubjectClaim is oidc.subject_claim when it is not set.
const DefaultSubjectClaim = "sub"

// MCP is the mcp block: how the MCP tools size what they return.
type MCP struct {
	// OutputBudget is how many bytes of each output stream a tool
	// result carries (its head and its end).
	OutputBudget int
}

// DefaultMCPOutputBudget is mcp.output_budget when it is not set.
const DefaultMCPOutputBudget = 32 << 10

// Listen is the listen block.
type Listen struct {
	HTTP        string // "" disables the HTTP listener
	TLSCert     string
	TLSKey      string
	Socket      string
	SocketGroup string
	// ClientCAFile holds the CA certificates whose client certificates
	// the TLS listener accepts (agents with an mtls block).
	ClientCAFile string
	// AllowedHosts are the host names (and address literals) an HTTP
	// request's Host may name, without the port: the listen address's
	// host, localhost and the loopback literals, and what allowed_hosts
	// adds. Any other Host is refused (DNS rebinding).
	AllowedHosts []string
}

// GroupID is socket_group's numeric id, -1 without one.
func (l Listen) GroupID() (int, error) {
	if l.SocketGroup == "" {
		return -1, nil
	}
	g, err := user.LookupGroup(l.SocketGroup)
	if err != nil {
		return 0, fmt.Errorf("socket_group %q: %w", l.SocketGroup, err)
	}
	return strconv.Atoi(g.Gid)
}

// SocketUnderStateDir reports whether the socket is inside the state
// directory (the default): its group must then pass through that
// directory.
func (c *Config) SocketUnderStateDir() bool {
	rel, err := filepath.Rel(c.StateDir, c.Listen.Socket)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..")
}

// SocketReachable checks that socket_group's members can reach the
// socket: every existing directory above the ones the gateway makes and
// manages itself (the socket's, and the state directory when the socket
// is inside it) must let the group pass.
func (c *Config) SocketReachable() error {
	gid, err := c.Listen.GroupID()
	if err != nil || gid < 0 {
		return err
	}
	managed := map[string]bool{filepath.Dir(c.Listen.Socket): true}
	if c.SocketUnderStateDir() {
		for d := filepath.Dir(c.Listen.Socket); d != c.StateDir && d != "/"; d = filepath.Dir(d) {
			managed[d] = true
		}
		managed[c.StateDir] = true
	}
	for d := filepath.Dir(c.Listen.Socket); ; d = filepath.Dir(d) {
		if !managed[d] {
			var st syscall.Stat_t
			if err := syscall.Stat(d, &st); err == nil {
				if st.Mode&0o001 == 0 && (st.Mode&0o010 == 0 || int(st.Gid) != gid) {
					return fmt.Errorf("listen.socket_group %q cannot reach the socket %s: the directory %s (mode %04o) lets neither that group nor others pass; fix: chmod o+x %s, or chgrp %s %s && chmod g+x %s",
						c.Listen.SocketGroup, c.Listen.Socket, d, st.Mode&0o7777, d, c.Listen.SocketGroup, d, d)
				}
			}
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// Approval is the approval block.
type Approval struct {
	Timeout   time.Duration
	RunTTL    time.Duration
	MaxRunTTL time.Duration
	// MaxPendingPerRun and MaxPendingPerRequester cap the requests that
	// wait for a decision at once, of one run and of one requester.
	MaxPendingPerRun       int
	MaxPendingPerRequester int
}

// Audit is the audit block.
type Audit struct {
	// CheckpointEntries and CheckpointInterval: sign a checkpoint after
	// this many entries and/or this much time; zero disables that trigger.
	CheckpointEntries  int
	CheckpointInterval time.Duration
	WitnessCommand     string
}

// Notify is the notify block (reviewer webhook).
type Notify struct {
	URL        string
	SecretFile string
}

// Credential is one credential block.
type Credential struct {
	Name           string
	PrivateKeyFile string
	PassphraseFile string
	// CA makes per-action certificates signed by the gateway CA, with
	// optional force-command and source-address critical options.
	CA            bool
	ForceCommand  string
	SourceAddress string
}

// Secret is one secret block.
type Secret struct {
	Name string
	// File holds the value; SystemdCredential names a credential of the
	// service instead (LoadCredential=), read from $CREDENTIALS_DIRECTORY.
	File              string
	SystemdCredential string
	// Grants are the target accounts that may be given the secret; an
	// empty Account grants every account of the target.
	Grants []approvals.Scope
}

// GrantFor returns the grant that lets account of target have the secret,
// as written ("target/account" or "target"), and whether there is one.
func (s *Secret) GrantFor(target, account string) (string, bool) {
	for _, g := range s.Grants {
		if g.Target == target && (g.Account == "" || g.Account == account) {
			if g.Account == "" {
				return g.Target, true
			}
			return g.Target + "/" + g.Account, true
		}
	}
	return "", false
}

// Redact is one redact block: a pattern of text that must not be stored
// as it is in a command, under a name that replaces it
// ("[redacted:NAME]").
type Redact struct {
	Name    string
	Pattern *regexp.Regexp
}

// Target is one target block.
type Target struct {
	Name           string
	Address        string
	HostKeys       []ssh.PublicKey
	KnownHostsFile string
	DefaultAccount string
	MaxParallel    int
	Accounts       map[string]*Account
	AccountNames   []string
	// Via is the jump host (another target) this one is reached through,
	// and ViaAccount its account used for the hop; empty: dialed directly.
	Via        string
	ViaAccount string
}

// Route returns the jump hosts of t, the first dialed first, each with the
// account used on it. A configuration that loaded has no loop and at most
// sshexec.MaxHops of them.
func (cfg *Config) Route(t *Target) (hops []*Target, accounts []*Account) {
	for at := t; at.Via != "" && len(hops) <= sshexec.MaxHops; {
		j := cfg.Targets[at.Via]
		if j == nil {
			break
		}
		hops = append([]*Target{j}, hops...)
		accounts = append([]*Account{j.Accounts[at.ViaAccount]}, accounts...)
		at = j
	}
	return hops, accounts
}

// Account is one account block of a target.
type Account struct {
	Name       string
	Credential string
	Approval   approvals.Mode
	MaxTimeout time.Duration
	Output     OutputPolicy
	// MaxStdin bounds the standard input an action may send.
	MaxStdin int64
	// MaxTransfer bounds a file put to or got from the account; 0
	// refuses transfers.
	MaxTransfer int64
	// OnSecret is what happens to a command in which a detector finds a
	// credential: OnSecretRedact (the default) or OnSecretRefuse.
	OnSecret string
	// Escalate are the classes of command (gateway/classify) that a run
	// approval does not cover on this account: each asks its own call
	// approval. Refuse are the classes rejected outright, and
	// DenyPatterns commands rejected whatever their class.
	Escalate     []classify.Class
	Refuse       []classify.Class
	DenyPatterns []*regexp.Regexp
	// AllowUnreviewed are the classes that pass with no reviewer at all
	// (read_only at most), recorded as unreviewed; none by default.
	AllowUnreviewed []classify.Class
	// MaxGrant bounds how long a reviewer may let an approved call's
	// exact action pass again; 0 (the default) allows no grants.
	MaxGrant time.Duration
	// Quota bounds the account's actions per run and per rolling window.
	Quota approvals.Quota
	// ActionPolicy is a copy of the airlock-action policy the account's
	// forced command enforces on the target (action_policy, read from
	// ActionPolicyFile): a request is judged by the verb it names, and
	// one that names none is refused before anything is dialed. nil for
	// a shell account.
	ActionPolicy     *policy.Policy
	ActionPolicyFile string
}

// Bounds of the policy fields.
const (
	MaxGrantLimit = 24 * time.Hour
	// DefaultQuotaWindow is quota.window when per_window is set alone.
	DefaultQuotaWindow = time.Hour
)

// What an account does with a command that holds a credential.
const (
	OnSecretRedact = "redact" // stored redacted, with an HMAC of the original
	OnSecretRefuse = "refuse" // rejected, nothing stored but the redacted text
)

// The bounds of an account's max_stdin.
const (
	DefaultMaxStdin = 1 << 20
	// DefaultMaxTransfer and MaxTransferLimit bound a file transfer.
	DefaultMaxTransfer = 64 << 20
	MaxTransferLimit   = 16 << 30
	MaxStdinLimit      = api.MaxStdin
)

// OutputPolicy is how much of an action's output the agent gets back; the
// output store keeps up to its cap whatever the policy.
type OutputPolicy string

// The output policies.
const (
	OutputFull OutputPolicy = "full" // everything kept (up to the store cap)
	OutputTail OutputPolicy = "tail" // the last 64 KiB of each stream
	OutputNone OutputPolicy = "none" // nothing; sizes and digests only
)

// Error is every problem found in a configuration file, each with its
// file:line. LoadConfig returns it so that `airlock config check` can show
// all of them at once.
type Error struct {
	Problems []Problem
}

// Problem is one configuration problem at a place in a file.
type Problem = hclcheck.Problem

func (e *Error) Error() string {
	return hclcheck.Text("config", e.Problems)
}

// Path returns the configuration file to use: flag if set, else
// $AIRLOCK_CONFIG, else ./airlock.hcl.
func Path(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv("AIRLOCK_CONFIG"); env != "" {
		return env
	}
	return "airlock.hcl"
}

// Load reads, decodes and validates the configuration file at path.
// Every problem found is reported in a *Error with its file:line.
func Load(path string) (*Config, error) {
	return loadConfig(path, false)
}

// LoadAdmin is Load for the administration verbs that come
// before a target's host key is pinned (ca init, deploy authorized-keys,
// hosts pin): it accepts targets without host_keys or known_hosts_file.
// The gateway itself never starts from such a configuration.
func LoadAdmin(path string) (*Config, error) {
	return loadConfig(path, true)
}

func loadConfig(path string, allowUnpinned bool) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: read %s: %w", path, err)
	}
	if len(src) > maxConfigSize {
		return nil, fmt.Errorf("config: %s is larger than %d bytes", path, maxConfigSize)
	}
	return parseConfig(src, abs, allowUnpinned)
}

// Parse decodes and validates configuration source; filename is used
// in messages and to resolve relative paths.
func Parse(src []byte, filename string) (*Config, error) {
	return parseConfig(src, filename, false)
}

func parseConfig(src []byte, filename string, allowUnpinned bool) (*Config, error) {
	p := hclparse.NewParser()
	file, diags := p.ParseHCL(src, filename)
	c := &checker{Collector: hclcheck.Collector{File: filename}, allowUnpinned: allowUnpinned}
	c.Diags(diags)
	if file == nil || diags.HasErrors() {
		return nil, c.err()
	}
	var raw rawConfig
	c.Diags(gohcl.DecodeBody(file.Body, nil, &raw))
	if c.Failed() {
		return nil, c.err()
	}
	sum := sha256.Sum256(src)
	cfg := &Config{
		Path:        filename,
		Digest:      hex.EncodeToString(sum[:]),
		Credentials: map[string]*Credential{},
		Targets:     map[string]*Target{},
	}
	base := filepath.Dir(filename)
	c.build(cfg, &raw, base)
	if c.Failed() {
		return nil, c.err()
	}
	return cfg, nil
}

// The raw shapes gohcl decodes into. Attributes are kept as *hcl.Attribute so
// that every value error can name its file:line.
type rawConfig struct {
	StateDir    *hcl.Attribute   `hcl:"state_dir,optional"`
	LogFormat   *hcl.Attribute   `hcl:"log_format,optional"`
	LogLevel    *hcl.Attribute   `hcl:"log_level,optional"`
	Listen      *rawListen       `hcl:"listen,block"`
	Approval    *rawApproval     `hcl:"approval,block"`
	Audit       *rawAudit        `hcl:"audit,block"`
	MCP         *rawMCP          `hcl:"mcp,block"`
	Notify      *rawNotify       `hcl:"notify,block"`
	Credentials []*rawCredential `hcl:"credential,block"`
	Targets     []*rawTarget     `hcl:"target,block"`
	Reviewers   []*rawReviewer   `hcl:"reviewer,block"`
	Agents      []*rawAgent      `hcl:"agent,block"`
	SSO         *rawSSO          `hcl:"sso,block"`
	Secrets     []*rawSecret     `hcl:"secret,block"`
	Redact      []*rawRedact     `hcl:"redact,block"`
	Policy      *rawPolicy       `hcl:"policy,block"`
	Telemetry   *rawTelemetry    `hcl:"telemetry,block"`
	Storage     *rawStorage      `hcl:"storage,block"`
}

type rawStorage struct {
	Postgres     *hcl.Attribute `hcl:"postgres,optional"`
	PasswordFile *hcl.Attribute `hcl:"password_file,optional"`
	Lease        *hcl.Attribute `hcl:"lease,optional"`
	DefRange     hcl.Range      `hcl:",def_range"`
}

type rawTelemetry struct {
	OTLPEndpoint  *hcl.Attribute `hcl:"otlp_endpoint,optional"`
	OTLPTokenFile *hcl.Attribute `hcl:"otlp_token_file,optional"`
	OTLPCAFile    *hcl.Attribute `hcl:"otlp_ca_file,optional"`
	ServiceName   *hcl.Attribute `hcl:"service_name,optional"`
	SampleRatio   *hcl.Attribute `hcl:"sample_ratio,optional"`
	PprofListen   *hcl.Attribute `hcl:"pprof_listen,optional"`
	DefRange      hcl.Range      `hcl:",def_range"`
}

type rawPolicy struct {
	URL        *hcl.Attribute `hcl:"opa_url"`
	Timeout    *hcl.Attribute `hcl:"opa_timeout,optional"`
	FailClosed *hcl.Attribute `hcl:"fail_closed,optional"`
	TokenFile  *hcl.Attribute `hcl:"opa_token_file,optional"`
	CAFile     *hcl.Attribute `hcl:"opa_ca_file,optional"`
	DefRange   hcl.Range      `hcl:",def_range"`
}

type rawSecret struct {
	Name              string         `hcl:"name,label"`
	File              *hcl.Attribute `hcl:"file,optional"`
	SystemdCredential *hcl.Attribute `hcl:"systemd_credential,optional"`
	Accounts          *hcl.Attribute `hcl:"accounts"`
	DefRange          hcl.Range      `hcl:",def_range"`
}

type rawRedact struct {
	Name     *hcl.Attribute `hcl:"name"`
	Pattern  *hcl.Attribute `hcl:"pattern"`
	DefRange hcl.Range      `hcl:",def_range"`
}

type rawSSO struct {
	Issuer           *hcl.Attribute `hcl:"issuer"`
	ClientID         *hcl.Attribute `hcl:"client_id"`
	ClientSecretFile *hcl.Attribute `hcl:"client_secret_file,optional"`
	Groups           *hcl.Attribute `hcl:"reviewer_groups"`
	GroupsClaim      *hcl.Attribute `hcl:"groups_claim,optional"`
	NameClaim        *hcl.Attribute `hcl:"name_claim,optional"`
	Scopes           *hcl.Attribute `hcl:"scopes,optional"`
	CAFile           *hcl.Attribute `hcl:"ca_file,optional"`
	LinksClaim       *hcl.Attribute `hcl:"links_claim,optional"`
	DeviceClientID   *hcl.Attribute `hcl:"device_client_id,optional"`
	DeviceSecretFile *hcl.Attribute `hcl:"device_client_secret_file,optional"`
	DefRange         hcl.Range      `hcl:",def_range"`
}

type rawAgent struct {
	Name     string         `hcl:"name,label"`
	Limits   *hcl.Attribute `hcl:"limits,optional"`
	OIDC     []*rawOIDC     `hcl:"oidc,block"`
	MTLS     []*rawMTLS     `hcl:"mtls,block"`
	DefRange hcl.Range      `hcl:",def_range"`
}

type rawOIDC struct {
	Issuer         *hcl.Attribute `hcl:"issuer"`
	Audience       *hcl.Attribute `hcl:"audience"`
	SubjectClaim   *hcl.Attribute `hcl:"subject_claim,optional"`
	RequiredClaims *hcl.Attribute `hcl:"required_claims,optional"`
	CAFile         *hcl.Attribute `hcl:"ca_file,optional"`
	DefRange       hcl.Range      `hcl:",def_range"`
}

type rawMTLS struct {
	Subjects *hcl.Attribute `hcl:"subjects"`
	DefRange hcl.Range      `hcl:",def_range"`
}

type rawReviewer struct {
	Name      string         `hcl:"name,label"`
	UnixUsers *hcl.Attribute `hcl:"unix_users,optional"`
	Agents    *hcl.Attribute `hcl:"agents,optional"`
	Subjects  *hcl.Attribute `hcl:"agent_subjects,optional"`
	DefRange  hcl.Range      `hcl:",def_range"`
}

type rawListen struct {
	HTTP         *hcl.Attribute `hcl:"http,optional"`
	TLSCert      *hcl.Attribute `hcl:"tls_cert,optional"`
	TLSKey       *hcl.Attribute `hcl:"tls_key,optional"`
	Socket       *hcl.Attribute `hcl:"socket,optional"`
	SocketGroup  *hcl.Attribute `hcl:"socket_group,optional"`
	AllowedHosts *hcl.Attribute `hcl:"allowed_hosts,optional"`
	ClientCAFile *hcl.Attribute `hcl:"client_ca_file,optional"`
	DefRange     hcl.Range      `hcl:",def_range"`
}

type rawApproval struct {
	Timeout   *hcl.Attribute `hcl:"timeout,optional"`
	RunTTL    *hcl.Attribute `hcl:"run_ttl,optional"`
	MaxRunTTL *hcl.Attribute `hcl:"max_run_ttl,optional"`
	PerRun    *hcl.Attribute `hcl:"max_pending_per_run,optional"`
	PerAsker  *hcl.Attribute `hcl:"max_pending_per_requester,optional"`
	DefRange  hcl.Range      `hcl:",def_range"`
}

type rawMCP struct {
	OutputBudget *hcl.Attribute `hcl:"output_budget,optional"`
}

type rawAudit struct {
	CheckpointEvery *hcl.Attribute `hcl:"checkpoint_every,optional"`
	WitnessCommand  *hcl.Attribute `hcl:"witness_command,optional"`
}

type rawNotify struct {
	URL        *hcl.Attribute `hcl:"url"`
	SecretFile *hcl.Attribute `hcl:"secret_file"`
	DefRange   hcl.Range      `hcl:",def_range"`
}

type rawCredential struct {
	Name           string         `hcl:"name,label"`
	PrivateKeyFile *hcl.Attribute `hcl:"private_key_file,optional"`
	PassphraseFile *hcl.Attribute `hcl:"passphrase_file,optional"`
	CA             *hcl.Attribute `hcl:"ca,optional"`
	ForceCommand   *hcl.Attribute `hcl:"force_command,optional"`
	SourceAddress  *hcl.Attribute `hcl:"source_address,optional"`
	DefRange       hcl.Range      `hcl:",def_range"`
}

type rawTarget struct {
	Name           string         `hcl:"name,label"`
	Address        *hcl.Attribute `hcl:"address"`
	HostKeys       *hcl.Attribute `hcl:"host_keys,optional"`
	KnownHostsFile *hcl.Attribute `hcl:"known_hosts_file,optional"`
	DefaultAccount *hcl.Attribute `hcl:"default_account,optional"`
	MaxParallel    *hcl.Attribute `hcl:"max_parallel,optional"`
	Via            *hcl.Attribute `hcl:"via,optional"`
	Accounts       []*rawAccount  `hcl:"account,block"`
	DefRange       hcl.Range      `hcl:",def_range"`
}

type rawAccount struct {
	Name       string         `hcl:"name,label"`
	Credential *hcl.Attribute `hcl:"credential"`
	Approval   *hcl.Attribute `hcl:"approval,optional"`
	MaxTimeout *hcl.Attribute `hcl:"max_timeout,optional"`
	Output     *hcl.Attribute `hcl:"output,optional"`
	MaxStdin   *hcl.Attribute `hcl:"max_stdin,optional"`
	OnSecret   *hcl.Attribute `hcl:"on_secret,optional"`
	Escalate   *hcl.Attribute `hcl:"escalate,optional"`
	Refuse     *hcl.Attribute `hcl:"refuse,optional"`
	Deny       *hcl.Attribute `hcl:"deny_patterns,optional"`
	Unreviewed *hcl.Attribute `hcl:"allow_unreviewed,optional"`
	MaxXfer    *hcl.Attribute `hcl:"max_transfer,optional"`
	ActionPol  *hcl.Attribute `hcl:"action_policy,optional"`
	MaxGrant   *hcl.Attribute `hcl:"max_grant,optional"`
	Quota      *hcl.Attribute `hcl:"quota,optional"`
	DefRange   hcl.Range      `hcl:",def_range"`
}

// checker collects problems with their positions.
type checker struct {
	hclcheck.Collector
	allowUnpinned bool
}

func (c *checker) err() error {
	if !c.Failed() {
		return nil
	}
	return &Error{Problems: c.Problems}
}

// require records a problem when a required attribute is missing (gohcl
// does not enforce presence for *hcl.Attribute fields) and reports whether
// it is there.
func (c *checker) require(a *hcl.Attribute, block hcl.Range, what string) bool {
	if a == nil {
		c.Errorf(block, "%s is required", what)
		return false
	}
	return true
}

func (c *checker) str(a *hcl.Attribute, def string) string {
	if a == nil {
		return def
	}
	s, ok := c.strOK(a)
	if !ok {
		return def
	}
	return s
}

// strOK decodes a string attribute (gohcl, no variables or functions);
// false means a problem was recorded.
func (c *checker) strOK(a *hcl.Attribute) (string, bool) {
	var s string
	if !c.Decode(a, &s) {
		return "", false
	}
	if strings.ContainsAny(s, "\x00\n\r") {
		c.Errorf(a.Range, "%s must not contain NUL or line breaks", a.Name)
		return "", false
	}
	return s, true
}

// strList decodes a list of strings; a single string is a list of one
// (checkpoint_every = "30s").
func (c *checker) strList(a *hcl.Attribute) []string {
	if a == nil {
		return nil
	}
	if v, diags := a.Expr.Value(nil); !diags.HasErrors() && v.Type() == cty.String {
		if s, ok := c.strOK(a); ok {
			return []string{s}
		}
		return nil
	}
	var l []string
	if !c.Decode(a, &l) {
		return nil
	}
	return l
}

// strMap decodes a map of strings (required_claims = { repository = "acme/app" }).
func (c *checker) strMap(a *hcl.Attribute) map[string]string {
	if a == nil {
		return nil
	}
	var m map[string]string
	if !c.Decode(a, &m) {
		return nil
	}
	for k, v := range m {
		if k == "" || strings.ContainsAny(k+v, "\x00\n\r") {
			c.Errorf(a.Range, "%s: %q = %q: names must not be empty, and neither may contain NUL or line breaks", a.Name, k, v)
		}
	}
	return m
}

func (c *checker) boolean(a *hcl.Attribute) bool {
	var b bool
	if a == nil || !c.Decode(a, &b) {
		return false
	}
	return b
}

func (c *checker) integer(a *hcl.Attribute, def, min, max int) int {
	if a == nil {
		return def
	}
	var i int
	if !c.Decode(a, &i) {
		return def
	}
	if i < min || i > max {
		c.Errorf(a.Range, "%s must be a whole number from %d to %d", a.Name, min, max)
		return def
	}
	return i
}

// sizeRE is a size: a number of bytes, or one with a unit.
var sizeRE = regexp.MustCompile(`^\s*([0-9]+)\s*(B|KiB|MiB|GiB)?\s*$`)

// size parses a number of bytes: a whole number, or a string with a unit
// ("512", "64KiB", "1MiB").
func (c *checker) size(a *hcl.Attribute, def, min, max int64) int64 {
	if a == nil {
		return def
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		c.Diags(diags)
		return def
	}
	var text string
	switch v.Type() {
	case cty.Number:
		bf := v.AsBigFloat()
		if !bf.IsInt() {
			c.Errorf(a.Range, "%s must be a whole number of bytes", a.Name)
			return def
		}
		text = bf.Text('f', 0)
	case cty.String:
		text = v.AsString()
	default:
		c.Errorf(a.Range, `%s must be a size: bytes (1048576) or with a unit ("64KiB", "1MiB")`, a.Name)
		return def
	}
	m := sizeRE.FindStringSubmatch(text)
	if m == nil {
		m = []string{"", "x", ""}
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		c.Errorf(a.Range, `%s = %q is not a size: write bytes (1048576) or with a unit ("64KiB", "1MiB")`, a.Name, text)
		return def
	}
	for _, u := range []struct {
		name  string
		shift uint
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}} {
		if m[2] == u.name {
			if n > max>>u.shift {
				n = max + 1
			} else {
				n <<= u.shift
			}
		}
	}
	if n < min || n > max {
		c.Errorf(a.Range, "%s = %s must be from %d to %d bytes", a.Name, strings.TrimSpace(text), min, max)
		return def
	}
	return n
}

// duration parses a duration written as a string ("90s", "10m", "1h30m").
func (c *checker) duration(a *hcl.Attribute, def, max time.Duration) time.Duration {
	if a == nil {
		return def
	}
	s, ok := c.strOK(a)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		c.Errorf(a.Range, `%s = %q is not a positive duration; write it like "30s", "10m" or "1h"`, a.Name, s)
		return def
	}
	if max > 0 && d > max {
		c.Errorf(a.Range, "%s = %s is more than the maximum %s", a.Name, d, max)
		return def
	}
	return d
}

func (c *checker) path(a *hcl.Attribute, base string) string {
	if a == nil {
		return ""
	}
	s, ok := c.strOK(a)
	if !ok {
		return ""
	}
	if s == "" {
		c.Errorf(a.Range, "%s must not be empty", a.Name)
		return ""
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(base, s)
	}
	return filepath.Clean(s)
}

// nameRE is what target, account and credential names may look like: they
// appear in commands, URLs and authorized_keys comments.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

var checkpointEveryRE = regexp.MustCompile(`^([0-9]+) entries$`)

func (c *checker) build(cfg *Config, raw *rawConfig, base string) {
	// Top level.
	if raw.StateDir != nil {
		cfg.StateDir = c.path(raw.StateDir, base)
	} else if d, err := api.DefaultStateDir(); err != nil {
		c.Add(nil, err.Error())
	} else {
		cfg.StateDir = d
	}
	cfg.LogFormat = c.str(raw.LogFormat, "text")
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		c.Errorf(raw.LogFormat.Range, `log_format must be "text" or "json"`)
	}
	cfg.LogLevel = strings.ToLower(c.str(raw.LogLevel, "info"))
	switch cfg.LogLevel {
	case "trace", "debug", "info", "warn", "error":
	default:
		c.Errorf(raw.LogLevel.Range, `log_level must be one of "trace", "debug", "info", "warn", "error"`)
	}

	// listen.
	cfg.Listen.HTTP = DefaultHTTPAddr
	cfg.Listen.Socket = filepath.Join(cfg.StateDir, "run", "airlock.sock")
	if l := raw.Listen; l != nil {
		cfg.Listen.HTTP = c.str(l.HTTP, DefaultHTTPAddr)
		cfg.Listen.TLSCert = c.path(l.TLSCert, base)
		cfg.Listen.TLSKey = c.path(l.TLSKey, base)
		if l.Socket != nil {
			cfg.Listen.Socket = c.path(l.Socket, base)
		}
		cfg.Listen.SocketGroup = c.str(l.SocketGroup, "")
		if cfg.Listen.SocketGroup != "" {
			if _, err := user.LookupGroup(cfg.Listen.SocketGroup); err != nil {
				c.Errorf(l.SocketGroup.Range, "socket_group %q: no such group; create it or remove socket_group", cfg.Listen.SocketGroup)
			}
		}
		if (cfg.Listen.TLSCert == "") != (cfg.Listen.TLSKey == "") {
			c.Errorf(l.DefRange, "listen needs both tls_cert and tls_key, or neither")
		}
		cfg.Listen.ClientCAFile = c.path(l.ClientCAFile, base)
		if cfg.Listen.ClientCAFile != "" && cfg.Listen.TLSCert == "" {
			c.Errorf(l.ClientCAFile.Range, "listen.client_ca_file needs tls_cert and tls_key: client certificates are presented over TLS")
		}
		if cfg.Listen.HTTP != "" {
			host, _, err := net.SplitHostPort(cfg.Listen.HTTP)
			switch {
			case err != nil:
				c.Errorf(l.HTTP.Range, `listen.http = %q is not host:port, e.g. "127.0.0.1:7422"`, cfg.Listen.HTTP)
			case !IsLoopback(host) && cfg.Listen.TLSCert == "":
				c.Errorf(l.HTTP.Range, "listen.http = %q is not a loopback address: set tls_cert and tls_key, or listen on 127.0.0.1", cfg.Listen.HTTP)
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
		} else if raw.Listen != nil && raw.Listen.AllowedHosts == nil {
			c.Errorf(raw.Listen.DefRange, "listen.http = %q listens on every address: set allowed_hosts to the host names clients use (a request naming any other Host is refused)", cfg.Listen.HTTP)
		}
	}
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		if !slices.Contains(cfg.Listen.AllowedHosts, h) {
			cfg.Listen.AllowedHosts = append(cfg.Listen.AllowedHosts, h)
		}
	}

	// approval.
	cfg.Approval = Approval{Timeout: DefaultApprovalTimeout, RunTTL: DefaultRunTTL, MaxRunTTL: DefaultMaxRunTTL,
		MaxPendingPerRun: approvals.DefaultMaxPendingPerRun, MaxPendingPerRequester: approvals.DefaultMaxPendingPerRequester}
	if a := raw.Approval; a != nil {
		cfg.Approval.MaxPendingPerRun = c.integer(a.PerRun, approvals.DefaultMaxPendingPerRun, 1, 10000)
		cfg.Approval.MaxPendingPerRequester = c.integer(a.PerAsker, approvals.DefaultMaxPendingPerRequester, 1, 10000)
		cfg.Approval.Timeout = c.duration(a.Timeout, DefaultApprovalTimeout, 24*time.Hour)
		cfg.Approval.MaxRunTTL = c.duration(a.MaxRunTTL, DefaultMaxRunTTL, 30*24*time.Hour)
		cfg.Approval.RunTTL = c.duration(a.RunTTL, min(DefaultRunTTL, cfg.Approval.MaxRunTTL), 0)
		if cfg.Approval.RunTTL > cfg.Approval.MaxRunTTL {
			c.Errorf(a.DefRange, "approval.run_ttl (%s) is more than max_run_ttl (%s)", cfg.Approval.RunTTL, cfg.Approval.MaxRunTTL)
		}
	}

	// reviewer blocks: separation of duties.
	cfg.ReviewerLinks = map[string][]string{}
	for _, rr := range raw.Reviewers {
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

	// mcp.
	cfg.MCP.OutputBudget = DefaultMCPOutputBudget
	if m := raw.MCP; m != nil {
		// At most twice the end the output store keeps of a long stream.
		cfg.MCP.OutputBudget = int(c.size(m.OutputBudget, DefaultMCPOutputBudget, 1<<10, 128<<10))
	}

	// audit.
	cfg.Audit = Audit{CheckpointEntries: DefaultCheckpointEntries, CheckpointInterval: DefaultCheckpointEvery}
	if a := raw.Audit; a != nil {
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
		cfg.Audit.WitnessCommand = c.path(a.WitnessCommand, base)
	}

	// notify.
	if n := raw.Notify; n != nil && c.require(n.URL, n.DefRange, "notify.url") && c.require(n.SecretFile, n.DefRange, "notify.secret_file") {
		cfg.Notify = &Notify{URL: c.str(n.URL, ""), SecretFile: c.path(n.SecretFile, base)}
		if !strings.HasPrefix(cfg.Notify.URL, "https://") && !strings.HasPrefix(cfg.Notify.URL, "http://") {
			c.Errorf(n.URL.Range, "notify.url must be an http:// or https:// URL")
		}
	}

	// credentials.
	for _, r := range raw.Credentials {
		if !nameRE.MatchString(r.Name) {
			c.Errorf(r.DefRange, "credential name %q: use letters, digits, '.', '_' and '-' (at most 63)", r.Name)
			continue
		}
		if _, dup := cfg.Credentials[r.Name]; dup {
			c.Errorf(r.DefRange, "credential %q is defined twice", r.Name)
			continue
		}
		cr := &Credential{
			Name:           r.Name,
			PrivateKeyFile: c.path(r.PrivateKeyFile, base),
			PassphraseFile: c.path(r.PassphraseFile, base),
			CA:             c.boolean(r.CA),
			ForceCommand:   c.str(r.ForceCommand, ""),
			SourceAddress:  c.str(r.SourceAddress, ""),
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

	// targets.
	for _, r := range raw.Targets {
		c.target(cfg, r, base)
	}
	for _, r := range raw.Targets {
		c.via(cfg, r)
	}
	for _, r := range raw.Targets {
		c.chain(cfg, r)
	}

	// sso.
	if r := raw.SSO; r != nil && c.require(r.Issuer, r.DefRange, "sso.issuer") && c.require(r.ClientID, r.DefRange, "sso.client_id") &&
		c.require(r.Groups, r.DefRange, "sso.reviewer_groups") {
		s := &SSO{
			Issuer:           c.str(r.Issuer, ""), // exactly as the provider names itself
			ClientID:         c.str(r.ClientID, ""),
			ClientSecretFile: c.path(r.ClientSecretFile, base),
			Groups:           c.strList(r.Groups),
			GroupsClaim:      c.str(r.GroupsClaim, DefaultGroupsClaim),
			NameClaim:        c.str(r.NameClaim, DefaultNameClaim),
			Scopes:           c.strList(r.Scopes),
			CAFile:           c.path(r.CAFile, base),
		}
		s.DeviceClientID = c.str(r.DeviceClientID, s.ClientID)
		s.LinksClaim = c.str(r.LinksClaim, "")
		s.DeviceClientSecretFile = c.path(r.DeviceSecretFile, base)
		if !c.issuerURL(s.Issuer) {
			c.Errorf(r.Issuer.Range, "sso.issuer %q must be the provider's https:// URL as its tokens name it (http:// only on loopback)", s.Issuer)
		}
		if s.ClientID == "" {
			c.Errorf(r.ClientID.Range, "sso.client_id must not be empty")
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

	c.opa(cfg, raw.Policy, base)
	c.telemetry(cfg, raw.Telemetry, base)
	c.storage(cfg, raw.Storage, base)

	// secrets (after targets: their grants name them).
	cfg.Secrets = map[string]*Secret{}
	for _, r := range raw.Secrets {
		c.secret(cfg, r, base)
	}
	for _, r := range raw.Redact {
		if !c.require(r.Name, r.DefRange, "redact.name") || !c.require(r.Pattern, r.DefRange, "redact.pattern") {
			continue
		}
		name, pattern := c.str(r.Name, ""), c.str(r.Pattern, "")
		if !nameRE.MatchString(name) {
			c.Errorf(r.Name.Range, "redact name %q: use letters, digits, '.', '_' and '-' (at most 63)", name)
			continue
		}
		re, err := regexp.Compile(pattern)
		switch {
		case err != nil:
			c.Errorf(r.Pattern.Range, "redact %q: pattern: %v", name, err)
		case re.MatchString(""):
			c.Errorf(r.Pattern.Range, "redact %q: pattern %q matches the empty string, so it would redact nothing", name, pattern)
		default:
			cfg.Redact = append(cfg.Redact, Redact{Name: name, Pattern: re})
		}
	}

	// agents (after targets: their limits name them).
	cfg.Agents = map[string]*Agent{}
	for _, r := range raw.Agents {
		c.agent(cfg, r, base)
	}
}

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
		if !c.require(o.Issuer, o.DefRange, "oidc.issuer") || !c.require(o.Audience, o.DefRange, "oidc.audience") {
			break
		}
		a.OIDC = &AgentOIDC{
			Issuer:       c.str(o.Issuer, ""), // exactly as tokens name it (some end in "/")
			Audience:     c.str(o.Audience, ""),
			SubjectClaim: c.str(o.SubjectClaim, DefaultSubjectClaim),
			CAFile:       c.path(o.CAFile, base),
		}
		if !c.issuerURL(a.OIDC.Issuer) {
			c.Errorf(o.Issuer.Range, "agent %q: oidc.issuer %q must be the issuer's https:// URL as its tokens name it (http:// only on loopback)", r.Name, a.OIDC.Issuer)
		}
		if a.OIDC.Audience == "" {
			c.Errorf(o.Audience.Range, "agent %q: oidc.audience must not be empty: it is what the issuer puts in tokens meant for this gateway", r.Name)
		}
		if a.OIDC.SubjectClaim == "" {
			c.Errorf(o.SubjectClaim.Range, "agent %q: oidc.subject_claim must not be empty", r.Name)
		}
		a.OIDC.RequiredClaims = c.strMap(o.RequiredClaims)
	}
	switch {
	case len(r.MTLS) > 1:
		c.Errorf(r.MTLS[1].DefRange, "agent %q has more than one mtls block", r.Name)
	case len(r.MTLS) == 1:
		m := r.MTLS[0]
		if !c.require(m.Subjects, m.DefRange, "mtls.subjects") {
			break
		}
		a.MTLS = &AgentMTLS{}
		for _, s := range c.strList(m.Subjects) {
			if s == "" || !printable(s) {
				c.Errorf(m.Subjects.Range, "agent %q: mtls.subjects: %q is not a certificate name", r.Name, s)
				continue
			}
			a.MTLS.Subjects = append(a.MTLS.Subjects, s)
		}
		if len(a.MTLS.Subjects) == 0 {
			c.Errorf(m.DefRange, "agent %q: mtls.subjects must name at least one certificate (its common name, DNS or URI name)", r.Name)
		}
		if cfg.Listen.ClientCAFile == "" {
			c.Errorf(m.DefRange, "agent %q: an mtls block needs listen.client_ca_file (the CA that issues the agents' certificates)", r.Name)
		}
	}
	cfg.Agents[r.Name] = a
}

func (c *checker) secret(cfg *Config, r *rawSecret, base string) {
	if !nameRE.MatchString(r.Name) {
		c.Errorf(r.DefRange, "secret name %q: use letters, digits, '.', '_' and '-' (at most 63)", r.Name)
		return
	}
	if _, dup := cfg.Secrets[r.Name]; dup {
		c.Errorf(r.DefRange, "secret %q is defined twice", r.Name)
		return
	}
	s := &Secret{Name: r.Name, File: c.path(r.File, base), SystemdCredential: c.str(r.SystemdCredential, "")}
	switch {
	case (s.File == "") == (s.SystemdCredential == ""):
		c.Errorf(r.DefRange, "secret %q: set file (a file only the gateway's user can read) or systemd_credential (a LoadCredential= name of the service), one of them", r.Name)
	case r.SystemdCredential != nil && (!nameRE.MatchString(s.SystemdCredential)):
		c.Errorf(r.SystemdCredential.Range, "secret %q: systemd_credential %q is not a credential name", r.Name, s.SystemdCredential)
	}
	if !c.require(r.Accounts, r.DefRange, fmt.Sprintf("secret %q: accounts", r.Name)) {
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

// issuerURL reports whether s may be an OpenID issuer: https, or http on
// loopback; no query, fragment or user.
func (c *checker) issuerURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Host != "" && u.RawQuery == "" && u.Fragment == "" && u.User == nil &&
		(u.Scheme == "https" || u.Scheme == "http" && IsLoopback(u.Hostname()))
}

// printable reports whether s is free of control and format characters.
func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
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

// clip shortens a name for a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func (c *checker) target(cfg *Config, r *rawTarget, base string) {
	if !nameRE.MatchString(r.Name) {
		c.Errorf(r.DefRange, "target name %q: use letters, digits, '.', '_' and '-' (at most 63)", r.Name)
		return
	}
	if _, dup := cfg.Targets[r.Name]; dup {
		c.Errorf(r.DefRange, "target %q is defined twice", r.Name)
		return
	}
	if !c.require(r.Address, r.DefRange, fmt.Sprintf("target %q: address", r.Name)) {
		return
	}
	t := &Target{
		Name:           r.Name,
		Address:        c.str(r.Address, ""),
		KnownHostsFile: c.path(r.KnownHostsFile, base),
		DefaultAccount: c.str(r.DefaultAccount, ""),
		MaxParallel:    c.integer(r.MaxParallel, DefaultMaxParallel, 1, 1024),
		Accounts:       map[string]*Account{},
	}
	if addr, err := deploy.SSHAddress(t.Address); err == nil {
		t.Address = addr // port 22 for a host alone
	} else {
		c.Errorf(r.Address.Range, `target %q: address %q is not host:port or a host alone, e.g. "10.0.0.24:22", "build-box" or "[2001:db8::5]"`, r.Name, t.Address)
	}
	before := len(c.Problems)
	if r.HostKeys != nil {
		for i, line := range c.strList(r.HostKeys) {
			k, err := sshexec.ParseHostKey(line)
			if err != nil {
				c.Errorf(r.HostKeys.Range, "target %q: host_keys[%d] is not a public key line such as \"ssh-ed25519 AAAA…\": %v", r.Name, i, err)
				continue
			}
			t.HostKeys = append(t.HostKeys, k)
		}
	}
	if len(t.HostKeys) == 0 && t.KnownHostsFile == "" && len(c.Problems) == before && !c.allowUnpinned {
		c.Errorf(r.DefRange, "target %q has no host_keys and no known_hosts_file: airlock never trusts a host key on first use; run `airlock hosts scan %s`, confirm the fingerprint out of band, then `airlock hosts pin %s --fingerprint SHA256:… --config %s`", r.Name, t.Address, r.Name, cfg.Path)
	}
	for _, ra := range r.Accounts {
		if !nameRE.MatchString(ra.Name) {
			c.Errorf(ra.DefRange, "account name %q: use letters, digits, '.', '_' and '-' (at most 63)", ra.Name)
			continue
		}
		if _, dup := t.Accounts[ra.Name]; dup {
			c.Errorf(ra.DefRange, "target %q: account %q is defined twice", r.Name, ra.Name)
			continue
		}
		c.require(ra.Credential, ra.DefRange, fmt.Sprintf("target %q account %q: credential", r.Name, ra.Name))
		a := &Account{
			Name:        ra.Name,
			Credential:  c.str(ra.Credential, ""),
			Approval:    approvals.ModeCall,
			MaxTimeout:  c.duration(ra.MaxTimeout, DefaultMaxTimeout, 24*time.Hour),
			Output:      OutputPolicy(c.str(ra.Output, string(OutputFull))),
			MaxStdin:    c.size(ra.MaxStdin, DefaultMaxStdin, 0, MaxStdinLimit),
			MaxTransfer: c.size(ra.MaxXfer, DefaultMaxTransfer, 0, MaxTransferLimit),
			OnSecret:    c.str(ra.OnSecret, OnSecretRedact),
		}
		if a.OnSecret != OnSecretRedact && a.OnSecret != OnSecretRefuse {
			c.Errorf(ra.OnSecret.Range, `target %q account %q: on_secret must be "redact" or "refuse"`, r.Name, ra.Name)
		}
		a.Escalate = c.classes(ra.Escalate, r.Name, ra.Name)
		a.Refuse = c.classes(ra.Refuse, r.Name, ra.Name)
		for _, p := range c.strList(ra.Deny) {
			re, err := regexp.Compile(p)
			if err != nil {
				c.Errorf(ra.Deny.Range, "target %q account %q: deny_patterns: %v", r.Name, ra.Name, err)
				continue
			}
			a.DenyPatterns = append(a.DenyPatterns, re)
		}
		c.policy(a, ra, r.Name)
		if ra.ActionPol != nil {
			a.ActionPolicyFile = c.path(ra.ActionPol, base)
			if a.ActionPolicyFile != "" {
				p, err := policy.Load(a.ActionPolicyFile)
				if err != nil {
					c.Errorf(ra.ActionPol.Range, "target %q account %q: action_policy: %v", r.Name, ra.Name, err)
				}
				a.ActionPolicy = p
			}
		}
		if _, ok := cfg.Credentials[a.Credential]; !ok && ra.Credential != nil {
			c.Errorf(ra.Credential.Range, "target %q account %q: no credential %q is defined (defined: %s)", r.Name, ra.Name, a.Credential, names(cfg.Credentials))
		}
		if ra.Approval != nil {
			if s, ok := c.strOK(ra.Approval); ok {
				if m, err := approvals.ParseMode(s); err == nil {
					a.Approval = m
				} else {
					c.Errorf(ra.Approval.Range, `target %q account %q: approval must be "run" or "call"`, r.Name, ra.Name)
				}
			}
		}
		switch a.Output {
		case OutputFull, OutputTail, OutputNone:
		default:
			c.Errorf(ra.Output.Range, `target %q account %q: output must be "full", "tail" or "none"`, r.Name, ra.Name)
		}
		t.Accounts[a.Name] = a
		t.AccountNames = append(t.AccountNames, a.Name)
	}
	switch {
	case len(t.Accounts) == 0:
		c.Errorf(r.DefRange, "target %q has no account block", r.Name)
	case t.DefaultAccount == "" && len(t.Accounts) == 1:
		t.DefaultAccount = t.AccountNames[0]
	case t.DefaultAccount != "":
		if _, ok := t.Accounts[t.DefaultAccount]; !ok {
			c.Errorf(r.DefaultAccount.Range, "target %q: default_account %q is not one of its accounts (%s)", r.Name, t.DefaultAccount, names(t.Accounts))
		}
	}
	cfg.Targets[t.Name] = t
	cfg.TargetNames = append(cfg.TargetNames, t.Name)
}

// via checks a target's via: another target, and the account on it
// ("account@bastion", or the bastion's default account), with no loop and
// at most sshexec.MaxHops jump hosts on the way.
func (c *checker) via(cfg *Config, r *rawTarget) {
	t := cfg.Targets[r.Name]
	if r.Via == nil || t == nil || t.Name != r.Name {
		return
	}
	v, ok := c.strOK(r.Via)
	if !ok {
		return
	}
	acct, name, hasAcct := strings.Cut(v, "@")
	if !hasAcct {
		acct, name = "", v
	}
	j, ok := cfg.Targets[name]
	switch {
	case !ok:
		c.Errorf(r.Via.Range, "target %q: via %q: no target %q is defined (a jump host is another target block, with its own host keys and account; targets: %s)", r.Name, clip(v), clip(name), names(cfg.Targets))
		return
	case name == t.Name:
		c.Errorf(r.Via.Range, "target %q: via names the target itself", r.Name)
		return
	case acct == "":
		acct = j.DefaultAccount
		if acct == "" {
			c.Errorf(r.Via.Range, "target %q: via %q: target %q has several accounts and no default_account; write via = \"ACCOUNT@%s\"", r.Name, v, name, name)
			return
		}
	}
	if _, ok := j.Accounts[acct]; !ok {
		c.Errorf(r.Via.Range, "target %q: via %q: target %q has no account %q (accounts: %s)", r.Name, clip(v), name, clip(acct), names(j.Accounts))
		return
	}
	t.Via, t.ViaAccount = name, acct
}

// chain checks a target's way through its jump hosts, once every via is
// known: a loop, or more hops than allowed, is an error of each target on
// it.
func (c *checker) chain(cfg *Config, r *rawTarget) {
	t := cfg.Targets[r.Name]
	if r.Via == nil || t == nil || t.Via == "" {
		return
	}
	seen := map[string]bool{t.Name: true}
	hops := 0
	for at := cfg.Targets[t.Via]; at != nil; at = cfg.Targets[at.Via] {
		if seen[at.Name] {
			c.Errorf(r.Via.Range, "target %q: via makes a loop through %q", r.Name, at.Name)
			return
		}
		seen[at.Name] = true
		if hops++; hops > sshexec.MaxHops {
			c.Errorf(r.Via.Range, "target %q: more than %d jump hosts on the way", r.Name, sshexec.MaxHops)
			return
		}
		if at.Via == "" {
			return
		}
	}
}

// policy reads an account's allow_unreviewed, max_grant and quota.
func (c *checker) policy(a *Account, ra *rawAccount, target string) {
	a.AllowUnreviewed = c.classes(ra.Unreviewed, target, ra.Name)
	for _, cl := range a.AllowUnreviewed {
		if cl > classify.ReadOnly {
			// A mutating command can already make later ones run
			// programs (a configuration file, a start-up file, a
			// symbolic link); only reading passes with no one.
			c.Errorf(ra.Unreviewed.Range, "target %q account %q: allow_unreviewed may list read_only only: %s commands always need a reviewer", target, ra.Name, cl)
		}
		for _, esc := range a.Escalate {
			if cl >= esc {
				c.Errorf(ra.Unreviewed.Range, "target %q account %q: %s is both allowed unreviewed and escalated", target, ra.Name, cl)
			}
		}
	}
	if ra.MaxGrant != nil {
		if s, ok := c.strOK(ra.MaxGrant); ok && s == "0" {
			a.MaxGrant = 0
		} else {
			a.MaxGrant = c.duration(ra.MaxGrant, 0, MaxGrantLimit)
		}
	}
	if ra.Quota != nil {
		q, err := parseQuota(ra.Quota)
		if err != nil {
			c.Errorf(ra.Quota.Range, "target %q account %q: quota: %v", target, ra.Name, err)
		}
		a.Quota = q
	}
}

// quotaRE is the short form of a quota: actions per rolling window.
var quotaRE = regexp.MustCompile(`^([0-9]+)/([0-9a-z.]+)$`)

// parseQuota reads an account's quota: "500/24h" (actions per rolling
// window), or { per_run = 50, per_window = 500, window = "24h" }.
func parseQuota(a *hcl.Attribute) (approvals.Quota, error) {
	var q approvals.Quota
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return q, diags
	}
	count := func(v cty.Value, what string) (int, error) {
		if v.Type() != cty.Number || !v.AsBigFloat().IsInt() {
			return 0, fmt.Errorf("%s must be a whole number", what)
		}
		n, _ := v.AsBigFloat().Int64()
		if n < 1 || n > 1<<30 {
			return 0, fmt.Errorf("%s must be from 1 to %d", what, 1<<30)
		}
		return int(n), nil
	}
	window := func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > approvals.MaxQuotaWindow {
			return 0, fmt.Errorf("the window %q must be a duration such as \"1h\" or \"24h\", at most %s", s, approvals.MaxQuotaWindow)
		}
		return d, nil
	}
	switch {
	case v.Type() == cty.String:
		m := quotaRE.FindStringSubmatch(v.AsString())
		if m == nil {
			return q, fmt.Errorf("%q is not ACTIONS/WINDOW, such as \"500/24h\"", v.AsString())
		}
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 1 || n > 1<<30 {
			return q, fmt.Errorf("%q: the number of actions must be from 1 to %d", v.AsString(), 1<<30)
		}
		d, err := window(m[2])
		q.PerWindow, q.Window = n, d
		return q, err
	case v.Type().IsObjectType():
		for name := range v.Type().AttributeTypes() {
			var err error
			switch f := v.GetAttr(name); name {
			case "per_run":
				q.PerRun, err = count(f, "per_run")
			case "per_window":
				q.PerWindow, err = count(f, "per_window")
			case "window":
				if f.Type() != cty.String {
					err = errors.New("window must be a duration string")
				} else {
					q.Window, err = window(f.AsString())
				}
			default:
				err = fmt.Errorf("unknown field %q (per_run, per_window, window)", name)
			}
			if err != nil {
				return q, err
			}
		}
		switch {
		case q.PerRun == 0 && q.PerWindow == 0:
			return q, errors.New("set per_run, per_window or both")
		case q.Window != 0 && q.PerWindow == 0:
			return q, errors.New("window needs per_window")
		case q.PerWindow != 0 && q.Window == 0:
			q.Window = DefaultQuotaWindow
		}
		return q, nil
	}
	return q, errors.New(`write "ACTIONS/WINDOW" (such as "500/24h") or { per_run = N, per_window = N, window = "24h" }`)
}

// opa reads the policy block: the external policy engine.
func (c *checker) opa(cfg *Config, r *rawPolicy, base string) {
	if r == nil || !c.require(r.URL, r.DefRange, "policy.opa_url") {
		return
	}
	o := &OPA{
		URL:        c.str(r.URL, ""),
		Timeout:    c.duration(r.Timeout, DefaultOPATimeout, MaxOPATimeout),
		FailClosed: true,
		TokenFile:  c.path(r.TokenFile, base),
		CAFile:     c.path(r.CAFile, base),
	}
	if r.FailClosed != nil {
		o.FailClosed = c.boolean(r.FailClosed)
	}
	u, err := url.Parse(o.URL)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" || u.RawQuery != "" ||
		!(u.Scheme == "https" || u.Scheme == "http" && IsLoopback(u.Hostname())) {
		c.Errorf(r.URL.Range, "policy.opa_url %q must be OPA's https:// data API URL, such as https://opa.internal:8181/v1/data/airlock/decision (http:// only on loopback)", o.URL)
	}
	cfg.OPA = o
}

// telemetry reads the telemetry block.
func (c *checker) telemetry(cfg *Config, r *rawTelemetry, base string) {
	if r == nil {
		return
	}
	t := &Telemetry{
		OTLPEndpoint:  c.str(r.OTLPEndpoint, ""),
		OTLPTokenFile: c.path(r.OTLPTokenFile, base),
		OTLPCAFile:    c.path(r.OTLPCAFile, base),
		ServiceName:   c.str(r.ServiceName, DefaultServiceName),
		SampleRatio:   1,
		PprofListen:   c.str(r.PprofListen, ""),
	}
	if t.OTLPEndpoint != "" {
		u, err := url.Parse(t.OTLPEndpoint)
		if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" || u.RawQuery != "" ||
			!(u.Scheme == "https" || u.Scheme == "http" && IsLoopback(u.Hostname())) {
			c.Errorf(r.OTLPEndpoint.Range, "telemetry.otlp_endpoint %q must be an OTLP/HTTP receiver's base https:// URL, such as https://otel.internal:4318 (http:// only on loopback)", t.OTLPEndpoint)
		}
	} else if r.OTLPTokenFile != nil || r.OTLPCAFile != nil || r.SampleRatio != nil {
		c.Errorf(r.DefRange, "telemetry: otlp_token_file, otlp_ca_file and sample_ratio need otlp_endpoint")
	}
	if r.SampleRatio != nil {
		if c.Decode(r.SampleRatio, &t.SampleRatio) && !(t.SampleRatio >= 0 && t.SampleRatio <= 1) {
			c.Errorf(r.SampleRatio.Range, "telemetry.sample_ratio must be a number from 0 to 1")
		}
	}
	if r.ServiceName != nil && (t.ServiceName == "" || len(t.ServiceName) > 255) {
		c.Errorf(r.ServiceName.Range, "telemetry.service_name must be 1 to 255 characters")
	}
	if t.PprofListen != "" {
		host, port, err := net.SplitHostPort(t.PprofListen)
		if err != nil || !IsLoopback(host) || port == "" {
			c.Errorf(r.PprofListen.Range, "telemetry.pprof_listen %q must be a loopback address with a port, such as 127.0.0.1:7423: profiles are for the host's operator", t.PprofListen)
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
		Postgres:     c.str(r.Postgres, ""),
		PasswordFile: c.path(r.PasswordFile, base),
		Lease:        c.duration(r.Lease, DefaultLease, 10*time.Minute),
	}
	if r.Postgres == nil {
		c.Errorf(r.DefRange, "storage: postgres is required (without a storage block, the state stays in SQLite files in state_dir)")
	} else if err := sqldb.CheckURL(s.Postgres); err != nil {
		c.Errorf(r.Postgres.Range, "storage.postgres: %v", err)
	}
	if s.Lease < 3*time.Second {
		c.Errorf(r.Lease.Range, "storage.lease = %s is less than the minimum 3s: heartbeats must fit in it several times", s.Lease)
	}
	cfg.Storage = s
}

// classes reads a list of command classes (escalate, refuse).
func (c *checker) classes(a *hcl.Attribute, target, account string) []classify.Class {
	var out []classify.Class
	for _, s := range c.strList(a) {
		cl, err := classify.ParseClass(s)
		if err != nil {
			c.Errorf(a.Range, "target %q account %q: %s: %v", target, account, a.Name, err)
			continue
		}
		out = append(out, cl)
	}
	return out
}

func names[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, strconv.Quote(k))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// IsLoopback reports whether host is "localhost" or a loopback address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
