package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy/hclcheck"
	"github.com/airlockgw/airlock/deploy/policy"
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
	Transfer Transfer
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
// listen.client_ca_file that carries one of Subjects, each compared with
// the certificate's names of its own type alone.
type AgentMTLS struct {
	Subjects []CertName
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
	// DeviceLogin turns on the device authorization grant (airlock login
	// over single sign-on). Off by default: whoever starts a device login
	// gets the session of the reviewer who approves it, so the operator
	// chooses it (see docs/threat-model.md).
	DeviceLogin bool
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

// MCP is the mcp block: how the MCP tools size what they return and how
// long they hold a call.
type MCP struct {
	// OutputBudget is how many bytes of each output stream a tool
	// result carries (its head and its end).
	OutputBudget int
	// MaxWait is how long ssh_exec, ssh_put and ssh_get hold a call that
	// gave no wait_s before they answer with the action still in flight
	// (waiting_approval or running): under the host's own request
	// timeout, so that the host never gives up first and cancels.
	MaxWait time.Duration
}

// The mcp block's defaults and bounds.
const (
	DefaultMCPOutputBudget = 32 << 10
	// DefaultMCPMaxWait is below the 60 s most MCP hosts (the
	// TypeScript SDK's default request timeout among them) give a call.
	DefaultMCPMaxWait = 50 * time.Second
	MaxMCPMaxWait     = time.Hour
)

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

// Transfer is the transfer block: how much of the gateway's disk the
// transfer spool (uploads waiting for their put, got files waiting for
// their agent) may take.
type Transfer struct {
	// SpoolMax caps the bytes of every spooled file together;
	// SpoolMaxPerRequester those of one requester's runs (a local user,
	// an agent identity).
	SpoolMax             int64
	SpoolMaxPerRequester int64
	// MinFree is the free space the spool leaves on its file system and
	// the state directory's: no file is taken in that would leave less.
	MinFree int64
}

// Audit is the audit block.
type Audit struct {
	// CheckpointEntries and CheckpointInterval: sign a checkpoint after
	// this many entries and/or this much time; zero disables that trigger.
	CheckpointEntries  int
	CheckpointInterval time.Duration
	// WitnessCommand is the program (an absolute path) and its arguments
	// run, without a shell, with each signed checkpoint note on standard
	// input; nil: none.
	WitnessCommand []string
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
	// MaxOutput bounds what the gateway keeps of each output stream of
	// an action for paging (output "full"): the first 8 MiB in memory,
	// the rest up to MaxOutput spilled to disk, and the last 64 KiB.
	MaxOutput int64
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
	// EnforceReadOnly (enforce_read_only) sends every command the
	// gateway rates read_only to the target marked read-only
	// (policy.ReadOnlyMark), where airlock-action runs it with every
	// mount read-only, or refuses it. Only for an account with an
	// ActionPolicy: a target that runs airlock-action.
	EnforceReadOnly bool
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
	// DefaultMaxOutput and MaxOutputLimit bound max_output; its least
	// is the in-memory cap, which spills nothing.
	DefaultMaxOutput = 64 << 20
	MinMaxOutput     = sshexec.DefaultOutputLimit
	MaxOutputLimit   = 4 << 30
	// DefaultSpoolMax caps the transfer spool: sixteen files of the
	// default max_transfer, small beside a state disk, and each file is
	// held an hour at most. One requester may hold a quarter of it.
	DefaultSpoolMax = 1 << 30
	// DefaultMinFree is the free space no transfer may take: room for
	// the audit log, the output store (up to 16 MiB per action) and their
	// write-ahead logs to keep writing for a long while after the spool
	// stops.
	DefaultMinFree = 512 << 20
	// MaxSpoolLimit bounds the transfer block's sizes (1 TiB).
	MaxSpoolLimit = 1 << 40
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
	return hclcheck.Text("configuration", e.Problems)
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
		return nil, fmt.Errorf("configuration file %s: %w", path, err)
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("configuration file: %w (give its path with --config FILE)", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("configuration file: read %s: %w", path, err)
	}
	if len(src) > maxConfigSize {
		return nil, fmt.Errorf("configuration file %s is larger than %d bytes: is --config the right file?", path, maxConfigSize)
	}
	return parseConfig(src, abs, allowUnpinned)
}

// Parse decodes and validates configuration source; filename is used
// in messages and to resolve relative paths.
func Parse(src []byte, filename string) (*Config, error) {
	return parseConfig(src, filename, false)
}
