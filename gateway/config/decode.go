package config

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/airlockgw/airlock/deploy/hclcheck"
)

func parseConfig(src []byte, filename string, allowUnpinned bool) (*Config, error) {
	p := hclparse.NewParser()
	file, diags := p.ParseHCL(src, filename)
	c := &checker{Collector: hclcheck.Collector{File: filename}, allowUnpinned: allowUnpinned}
	c.Diags(diags)
	if file == nil || diags.HasErrors() {
		return nil, c.err()
	}
	var raw rawConfig
	if !c.decode(file.Body, &raw) {
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
	if !c.Failed() {
		// A value no check read (none should be) still stops the load.
		c.SayHeld()
	}
	if c.Failed() {
		return nil, c.err()
	}
	return cfg, nil
}

// The raw shapes gohcl decodes into. An attribute is a typed field with
// its place beside it (attr_range: a zero range when it is not set). The
// attributes kept as *hcl.Attribute are read by hand: a list that may be
// written as one string (strList), a size with a unit, a quota.
type rawConfig struct {
	StateDir       string           `hcl:"state_dir,optional"`
	StateDirRange  hcl.Range        `hcl:"state_dir,attr_range"`
	LogFormat      string           `hcl:"log_format,optional"`
	LogFormatRange hcl.Range        `hcl:"log_format,attr_range"`
	LogLevel       string           `hcl:"log_level,optional"`
	LogLevelRange  hcl.Range        `hcl:"log_level,attr_range"`
	Listen         *rawListen       `hcl:"listen,block"`
	Approval       *rawApproval     `hcl:"approval,block"`
	Audit          *rawAudit        `hcl:"audit,block"`
	MCP            *rawMCP          `hcl:"mcp,block"`
	Notify         *rawNotify       `hcl:"notify,block"`
	Credentials    []*rawCredential `hcl:"credential,block"`
	Targets        []*rawTarget     `hcl:"target,block"`
	Reviewers      []*rawReviewer   `hcl:"reviewer,block"`
	Agents         []*rawAgent      `hcl:"agent,block"`
	SSO            *rawSSO          `hcl:"sso,block"`
	Secrets        []*rawSecret     `hcl:"secret,block"`
	Redact         []*rawRedact     `hcl:"redact,block"`
	Policy         *rawPolicy       `hcl:"policy,block"`
	Telemetry      *rawTelemetry    `hcl:"telemetry,block"`
	Storage        *rawStorage      `hcl:"storage,block"`
	Transfer       *rawTransfer     `hcl:"transfer,block"`
}

type rawTransfer struct {
	SpoolMax     *hcl.Attribute `hcl:"spool_max,optional"`
	PerRequester *hcl.Attribute `hcl:"spool_max_per_requester,optional"`
	MinFree      *hcl.Attribute `hcl:"min_free,optional"`
	DefRange     hcl.Range      `hcl:",def_range"`
}

type rawStorage struct {
	Postgres          string    `hcl:"postgres,optional"`
	PostgresRange     hcl.Range `hcl:"postgres,attr_range"`
	PasswordFile      string    `hcl:"password_file,optional"`
	PasswordFileRange hcl.Range `hcl:"password_file,attr_range"`
	Lease             string    `hcl:"lease,optional"`
	LeaseRange        hcl.Range `hcl:"lease,attr_range"`
	DefRange          hcl.Range `hcl:",def_range"`
}

type rawTelemetry struct {
	OTLPEndpoint       string    `hcl:"otlp_endpoint,optional"`
	OTLPEndpointRange  hcl.Range `hcl:"otlp_endpoint,attr_range"`
	OTLPTokenFile      string    `hcl:"otlp_token_file,optional"`
	OTLPTokenFileRange hcl.Range `hcl:"otlp_token_file,attr_range"`
	OTLPCAFile         string    `hcl:"otlp_ca_file,optional"`
	OTLPCAFileRange    hcl.Range `hcl:"otlp_ca_file,attr_range"`
	ServiceName        string    `hcl:"service_name,optional"`
	ServiceNameRange   hcl.Range `hcl:"service_name,attr_range"`
	SampleRatio        float64   `hcl:"sample_ratio,optional"`
	SampleRatioRange   hcl.Range `hcl:"sample_ratio,attr_range"`
	PprofListen        string    `hcl:"pprof_listen,optional"`
	PprofListenRange   hcl.Range `hcl:"pprof_listen,attr_range"`
	DefRange           hcl.Range `hcl:",def_range"`
}

type rawPolicy struct {
	URL             string    `hcl:"opa_url,optional"`
	URLRange        hcl.Range `hcl:"opa_url,attr_range"`
	Timeout         string    `hcl:"opa_timeout,optional"`
	TimeoutRange    hcl.Range `hcl:"opa_timeout,attr_range"`
	FailClosed      bool      `hcl:"fail_closed,optional"`
	FailClosedRange hcl.Range `hcl:"fail_closed,attr_range"`
	TokenFile       string    `hcl:"opa_token_file,optional"`
	TokenFileRange  hcl.Range `hcl:"opa_token_file,attr_range"`
	CAFile          string    `hcl:"opa_ca_file,optional"`
	CAFileRange     hcl.Range `hcl:"opa_ca_file,attr_range"`
	DefRange        hcl.Range `hcl:",def_range"`
}

type rawSecret struct {
	Name                   string         `hcl:"name,label"`
	File                   string         `hcl:"file,optional"`
	FileRange              hcl.Range      `hcl:"file,attr_range"`
	SystemdCredential      string         `hcl:"systemd_credential,optional"`
	SystemdCredentialRange hcl.Range      `hcl:"systemd_credential,attr_range"`
	Accounts               *hcl.Attribute `hcl:"accounts"`
	DefRange               hcl.Range      `hcl:",def_range"`
}

type rawRedact struct {
	Name         string    `hcl:"name,optional"`
	NameRange    hcl.Range `hcl:"name,attr_range"`
	Pattern      string    `hcl:"pattern,optional"`
	PatternRange hcl.Range `hcl:"pattern,attr_range"`
	DefRange     hcl.Range `hcl:",def_range"`
}

type rawSSO struct {
	Issuer                string         `hcl:"issuer,optional"`
	IssuerRange           hcl.Range      `hcl:"issuer,attr_range"`
	ClientID              string         `hcl:"client_id,optional"`
	ClientIDRange         hcl.Range      `hcl:"client_id,attr_range"`
	ClientSecretFile      string         `hcl:"client_secret_file,optional"`
	ClientSecretFileRange hcl.Range      `hcl:"client_secret_file,attr_range"`
	Groups                *hcl.Attribute `hcl:"reviewer_groups"`
	GroupsClaim           string         `hcl:"groups_claim,optional"`
	GroupsClaimRange      hcl.Range      `hcl:"groups_claim,attr_range"`
	NameClaim             string         `hcl:"name_claim,optional"`
	NameClaimRange        hcl.Range      `hcl:"name_claim,attr_range"`
	Scopes                *hcl.Attribute `hcl:"scopes,optional"`
	CAFile                string         `hcl:"ca_file,optional"`
	CAFileRange           hcl.Range      `hcl:"ca_file,attr_range"`
	LinksClaim            string         `hcl:"links_claim,optional"`
	LinksClaimRange       hcl.Range      `hcl:"links_claim,attr_range"`
	DeviceClientID        string         `hcl:"device_client_id,optional"`
	DeviceClientIDRange   hcl.Range      `hcl:"device_client_id,attr_range"`
	DeviceSecretFile      string         `hcl:"device_client_secret_file,optional"`
	DeviceSecretFileRange hcl.Range      `hcl:"device_client_secret_file,attr_range"`
	DeviceLogin           bool           `hcl:"device_login,optional"`
	DefRange              hcl.Range      `hcl:",def_range"`
}

type rawAgent struct {
	Name     string         `hcl:"name,label"`
	Limits   *hcl.Attribute `hcl:"limits,optional"`
	OIDC     []*rawOIDC     `hcl:"oidc,block"`
	MTLS     []*rawMTLS     `hcl:"mtls,block"`
	DefRange hcl.Range      `hcl:",def_range"`
}

type rawOIDC struct {
	Issuer              string            `hcl:"issuer,optional"`
	IssuerRange         hcl.Range         `hcl:"issuer,attr_range"`
	Audience            string            `hcl:"audience,optional"`
	AudienceRange       hcl.Range         `hcl:"audience,attr_range"`
	SubjectClaim        string            `hcl:"subject_claim,optional"`
	SubjectClaimRange   hcl.Range         `hcl:"subject_claim,attr_range"`
	RequiredClaims      map[string]string `hcl:"required_claims,optional"`
	RequiredClaimsRange hcl.Range         `hcl:"required_claims,attr_range"`
	CAFile              string            `hcl:"ca_file,optional"`
	CAFileRange         hcl.Range         `hcl:"ca_file,attr_range"`
	DefRange            hcl.Range         `hcl:",def_range"`
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
	HTTP              string         `hcl:"http,optional"`
	HTTPRange         hcl.Range      `hcl:"http,attr_range"`
	TLSCert           string         `hcl:"tls_cert,optional"`
	TLSCertRange      hcl.Range      `hcl:"tls_cert,attr_range"`
	TLSKey            string         `hcl:"tls_key,optional"`
	TLSKeyRange       hcl.Range      `hcl:"tls_key,attr_range"`
	Socket            string         `hcl:"socket,optional"`
	SocketRange       hcl.Range      `hcl:"socket,attr_range"`
	SocketGroup       string         `hcl:"socket_group,optional"`
	SocketGroupRange  hcl.Range      `hcl:"socket_group,attr_range"`
	AllowedHosts      *hcl.Attribute `hcl:"allowed_hosts,optional"`
	ClientCAFile      string         `hcl:"client_ca_file,optional"`
	ClientCAFileRange hcl.Range      `hcl:"client_ca_file,attr_range"`
	DefRange          hcl.Range      `hcl:",def_range"`
}

type rawApproval struct {
	Timeout        string    `hcl:"timeout,optional"`
	TimeoutRange   hcl.Range `hcl:"timeout,attr_range"`
	RunTTL         string    `hcl:"run_ttl,optional"`
	RunTTLRange    hcl.Range `hcl:"run_ttl,attr_range"`
	MaxRunTTL      string    `hcl:"max_run_ttl,optional"`
	MaxRunTTLRange hcl.Range `hcl:"max_run_ttl,attr_range"`
	PerRun         int       `hcl:"max_pending_per_run,optional"`
	PerRunRange    hcl.Range `hcl:"max_pending_per_run,attr_range"`
	PerAsker       int       `hcl:"max_pending_per_requester,optional"`
	PerAskerRange  hcl.Range `hcl:"max_pending_per_requester,attr_range"`
	DefRange       hcl.Range `hcl:",def_range"`
}

type rawMCP struct {
	OutputBudget *hcl.Attribute `hcl:"output_budget,optional"`
	MaxWait      string         `hcl:"max_wait,optional"`
	MaxWaitRange hcl.Range      `hcl:"max_wait,attr_range"`
}

type rawAudit struct {
	CheckpointEvery *hcl.Attribute `hcl:"checkpoint_every,optional"`
	WitnessCommand  *hcl.Attribute `hcl:"witness_command,optional"`
}

type rawNotify struct {
	URL             string    `hcl:"url,optional"`
	URLRange        hcl.Range `hcl:"url,attr_range"`
	SecretFile      string    `hcl:"secret_file,optional"`
	SecretFileRange hcl.Range `hcl:"secret_file,attr_range"`
	DefRange        hcl.Range `hcl:",def_range"`
}

type rawCredential struct {
	Name                string    `hcl:"name,label"`
	PrivateKeyFile      string    `hcl:"private_key_file,optional"`
	PrivateKeyFileRange hcl.Range `hcl:"private_key_file,attr_range"`
	PassphraseFile      string    `hcl:"passphrase_file,optional"`
	PassphraseFileRange hcl.Range `hcl:"passphrase_file,attr_range"`
	CA                  bool      `hcl:"ca,optional"`
	CARange             hcl.Range `hcl:"ca,attr_range"`
	ForceCommand        string    `hcl:"force_command,optional"`
	ForceCommandRange   hcl.Range `hcl:"force_command,attr_range"`
	SourceAddress       string    `hcl:"source_address,optional"`
	SourceAddressRange  hcl.Range `hcl:"source_address,attr_range"`
	DefRange            hcl.Range `hcl:",def_range"`
}

type rawTarget struct {
	Name                string         `hcl:"name,label"`
	Address             string         `hcl:"address,optional"`
	AddressRange        hcl.Range      `hcl:"address,attr_range"`
	HostKeys            *hcl.Attribute `hcl:"host_keys,optional"`
	KnownHostsFile      string         `hcl:"known_hosts_file,optional"`
	KnownHostsFileRange hcl.Range      `hcl:"known_hosts_file,attr_range"`
	DefaultAccount      string         `hcl:"default_account,optional"`
	DefaultAccountRange hcl.Range      `hcl:"default_account,attr_range"`
	MaxParallel         int            `hcl:"max_parallel,optional"`
	MaxParallelRange    hcl.Range      `hcl:"max_parallel,attr_range"`
	Via                 string         `hcl:"via,optional"`
	ViaRange            hcl.Range      `hcl:"via,attr_range"`
	Accounts            []*rawAccount  `hcl:"account,block"`
	DefRange            hcl.Range      `hcl:",def_range"`
}

type rawAccount struct {
	Name            string         `hcl:"name,label"`
	Credential      string         `hcl:"credential,optional"`
	CredentialRange hcl.Range      `hcl:"credential,attr_range"`
	Approval        string         `hcl:"approval,optional"`
	ApprovalRange   hcl.Range      `hcl:"approval,attr_range"`
	MaxTimeout      string         `hcl:"max_timeout,optional"`
	MaxTimeoutRange hcl.Range      `hcl:"max_timeout,attr_range"`
	Output          string         `hcl:"output,optional"`
	OutputRange     hcl.Range      `hcl:"output,attr_range"`
	MaxStdin        *hcl.Attribute `hcl:"max_stdin,optional"`
	OnSecret        string         `hcl:"on_secret,optional"`
	OnSecretRange   hcl.Range      `hcl:"on_secret,attr_range"`
	Escalate        *hcl.Attribute `hcl:"escalate,optional"`
	Refuse          *hcl.Attribute `hcl:"refuse,optional"`
	Deny            *hcl.Attribute `hcl:"deny_patterns,optional"`
	Unreviewed      *hcl.Attribute `hcl:"allow_unreviewed,optional"`
	MaxXfer         *hcl.Attribute `hcl:"max_transfer,optional"`
	MaxOutput       *hcl.Attribute `hcl:"max_output,optional"`
	ActionPol       string         `hcl:"action_policy,optional"`
	ActionPolRange  hcl.Range      `hcl:"action_policy,attr_range"`
	EnforceRO       bool           `hcl:"enforce_read_only,optional"`
	EnforceRORange  hcl.Range      `hcl:"enforce_read_only,attr_range"`
	MaxGrant        string         `hcl:"max_grant,optional"`
	MaxGrantRange   hcl.Range      `hcl:"max_grant,attr_range"`
	Quota           *hcl.Attribute `hcl:"quota,optional"`
	DefRange        hcl.Range      `hcl:",def_range"`
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

// require records a problem when a required attribute is missing (what:
// its name) and reports whether it is there. Required attributes are
// optional to gohcl so that a missing one is said in these words, and
// after the problems of structure.
func (c *checker) require(present bool, block hcl.Range, what string) bool {
	if !present {
		c.Errorf(block, "%s is required", what)
	}
	return present
}

// set reports whether the attribute whose attr_range is r is in the file.
func set(r hcl.Range) bool { return hclcheck.Set(r) }

// or is v when given (c.Value: set, its value usable), def when not.
func or[T any](v T, given bool, def T) T {
	if given {
		return v
	}
	return def
}

// decode decodes body into raw, a pointer to one of the raw structs, and
// reports whether the checks may follow. A problem of structure (an
// unknown attribute or block, one too many) stops there. A value that
// does not fit its attribute, or a string with NUL or a line break, is
// held and said where the checks read the attribute (c.Value), which
// then counts as given with no usable value (its default): every problem
// is shown at once, in the order the checks come to it.
func (c *checker) decode(body hcl.Body, raw any) bool {
	d := hclcheck.DecodeBody(body, raw)
	if len(d.Structure) > 0 {
		c.Diags(d.Structure)
		return false
	}
	for _, a := range d.Attributes {
		if s, ok := a.Value.Interface().(string); ok && strings.ContainsAny(s, "\x00\n\r") {
			d.Values[a.Range.Start] = append(d.Values[a.Range.Start], &hcl.Diagnostic{Severity: hcl.DiagError,
				Summary: a.Name + " must not contain NUL or line breaks", Subject: a.Range.Ptr()})
			a.Value.SetZero() // as a value that did not decode
		}
	}
	c.Hold(d.Values)
	return true
}
