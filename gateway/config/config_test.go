package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/classify"
	"github.com/google/go-cmp/cmp"
)

const testHostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKnQ7cBmrfILU8y0HCfFXb5n5bd2OoB25Bhz9wGtK6Ko build-box"

// contractExample is the configuration from the contract, with real values.
var contractExample = `state_dir = "/var/lib/airlock"

listen {
  http   = "127.0.0.1:7422"
  socket = "/run/airlock/airlock.sock"
}

approval {
  timeout     = "120s"
  run_ttl     = "1h"
  max_run_ttl = "8h"
}

audit {
  checkpoint_every = ["100 entries", "30s"]
  witness_command  = "/usr/local/bin/push-checkpoint"
}

credential "deploy" {
  private_key_file = "/etc/airlock/keys/deploy_ed25519"
  passphrase_file  = "/run/credentials/airlock.service/deploy-pass"
}

credential "ca" {
  ca = true
}

target "build-box" {
  address         = "10.0.0.24:22"
  host_keys       = ["` + testHostKey + `"]
  default_account = "deploy"
  max_parallel    = 4

  account "deploy" {
    credential  = "deploy"
    approval    = "run"
    max_timeout = "10m"
    output      = "full"
  }
  account "root" {
    credential = "ca"
    approval   = "call"
    output     = "tail"
  }
}

target "db" {
  address          = "db.internal"
  known_hosts_file = "known_hosts"
  account "postgres" {
    credential = "deploy"
  }
}
`

func TestParseConfigContractExample(t *testing.T) {
	cfg, err := Parse([]byte(contractExample), "/etc/airlock/airlock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StateDir != "/var/lib/airlock" || cfg.Listen.Socket != "/run/airlock/airlock.sock" || cfg.Listen.HTTP != "127.0.0.1:7422" {
		t.Errorf("top level: %+v %+v", cfg.StateDir, cfg.Listen)
	}
	if diff := cmp.Diff(Approval{Timeout: 120 * time.Second, RunTTL: time.Hour, MaxRunTTL: 8 * time.Hour,
		MaxPendingPerRun: approvals.DefaultMaxPendingPerRun, MaxPendingPerRequester: approvals.DefaultMaxPendingPerRequester}, cfg.Approval); diff != "" {
		t.Errorf("approval (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Audit{CheckpointEntries: 100, CheckpointInterval: 30 * time.Second, WitnessCommand: []string{"/usr/local/bin/push-checkpoint"}}, cfg.Audit); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"build-box", "db"}, cfg.TargetNames); diff != "" {
		t.Errorf("target names (-want +got):\n%s", diff)
	}
	bb := cfg.Targets["build-box"]
	if len(bb.HostKeys) != 1 || bb.DefaultAccount != "deploy" || bb.MaxParallel != 4 {
		t.Errorf("build-box: %+v", bb)
	}
	if a := bb.Accounts["root"]; a.Approval != approvals.ModeCall || a.Output != OutputTail || a.MaxTimeout != DefaultMaxTimeout {
		t.Errorf("build-box/root: %+v", a)
	}
	db := cfg.Targets["db"]
	if db.Address != "db.internal:22" || db.KnownHostsFile != "/etc/airlock/known_hosts" || db.DefaultAccount != "postgres" {
		t.Errorf("db: address %q known_hosts %q default %q", db.Address, db.KnownHostsFile, db.DefaultAccount)
	}
	if a := db.Accounts["postgres"]; a.Approval != approvals.ModeCall || a.Output != OutputFull {
		t.Errorf("an account without approval must default to the stronger mode, call: %+v", a)
	}
	if !cfg.Credentials["ca"].CA || cfg.Credentials["deploy"].PassphraseFile == "" {
		t.Errorf("credentials: %+v", cfg.Credentials)
	}
	if len(cfg.Digest) != 64 {
		t.Errorf("digest %q", cfg.Digest)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	t.Setenv("AIRLOCK_STATE_DIR", "/srv/airlock-state")
	cfg, err := Parse([]byte(`
credential "k" { private_key_file = "k" }
target "t" {
  address   = "127.0.0.1:2222"
  host_keys = ["`+testHostKey+`"]
  account "a" { credential = "k" }
}`), "/etc/airlock/airlock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StateDir != "/srv/airlock-state" || cfg.Listen.Socket != "/srv/airlock-state/run/airlock.sock" || cfg.Listen.HTTP != DefaultHTTPAddr {
		t.Errorf("state dir %q socket %q http %q", cfg.StateDir, cfg.Listen.Socket, cfg.Listen.HTTP)
	}
	if cfg.Approval.Timeout != DefaultApprovalTimeout || cfg.Approval.MaxPendingPerRun != approvals.DefaultMaxPendingPerRun ||
		cfg.Approval.MaxPendingPerRequester != approvals.DefaultMaxPendingPerRequester || cfg.Audit.CheckpointEntries != DefaultCheckpointEntries {
		t.Errorf("defaults: %+v %+v", cfg.Approval, cfg.Audit)
	}
	if cfg.Credentials["k"].PrivateKeyFile != "/etc/airlock/k" {
		t.Errorf("relative paths resolve against the config's directory: %q", cfg.Credentials["k"].PrivateKeyFile)
	}
}

func TestParseConfigPolicyFields(t *testing.T) {
	cfg, err := Parse([]byte(`
credential "k" { private_key_file = "k" }
target "t" {
  address   = "127.0.0.1:2222"
  host_keys = ["`+testHostKey+`"]
  account "a" {
    credential       = "k"
    allow_unreviewed = ["read_only"]
    max_grant        = "30m"
    quota            = { per_run = 50, per_window = 200 }
  }
  account "b" { credential = "k" }
  account "c" {
    credential = "k"
    quota      = "500/24h"
  }
}
policy {
  opa_url     = "http://127.0.0.1:8181/v1/data/airlock/decision"
  fail_closed = false
}`), "/etc/airlock/airlock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Targets["t"].Accounts["a"], cfg.Targets["t"].Accounts["b"]
	if len(a.AllowUnreviewed) != 1 || a.AllowUnreviewed[0] != classify.ReadOnly || a.MaxGrant != 30*time.Minute ||
		a.Quota != (approvals.Quota{PerRun: 50, PerWindow: 200, Window: DefaultQuotaWindow}) {
		t.Errorf("account a: %+v", a)
	}
	if q := cfg.Targets["t"].Accounts["c"].Quota; q != (approvals.Quota{PerWindow: 500, Window: 24 * time.Hour}) {
		t.Errorf("quota \"500/24h\": %+v", q)
	}
	if len(b.AllowUnreviewed) != 0 || b.MaxGrant != 0 || b.Quota != (approvals.Quota{}) || b.ActionPolicy != nil {
		t.Errorf("defaults narrow nothing and widen nothing: %+v", b)
	}
	if o := cfg.OPA; o == nil || o.FailClosed || o.Timeout != DefaultOPATimeout {
		t.Errorf("opa: %+v", o)
	}
}

func TestParseConfigTelemetry(t *testing.T) {
	cfg, err := Parse([]byte(contractExample+`
telemetry {
  otlp_endpoint   = "https://otel.example:4318"
  otlp_token_file = "otel-token"
  sample_ratio    = 0.25
  pprof_listen    = "127.0.0.1:7423"
}`), "/etc/airlock/airlock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := Telemetry{OTLPEndpoint: "https://otel.example:4318", OTLPTokenFile: "/etc/airlock/otel-token",
		ServiceName: DefaultServiceName, SampleRatio: 0.25, PprofListen: "127.0.0.1:7423"}
	if cfg.Telemetry == nil || *cfg.Telemetry != want {
		t.Errorf("telemetry: %+v, want %+v", cfg.Telemetry, want)
	}
	if cfg, err := Parse([]byte(contractExample), "/etc/airlock/airlock.hcl"); err != nil || cfg.Telemetry != nil {
		t.Errorf("without a telemetry block: %+v %v (tracing and profiles must be off)", cfg.Telemetry, err)
	}
	for name, block := range map[string]string{
		"plain http off loopback": `otlp_endpoint = "http://otel.example:4318"`,
		"a query":                 `otlp_endpoint = "https://otel.example:4318/?k=v"`,
		"credentials in the URL":  `otlp_endpoint = "https://u:p@otel.example:4318"`,
		"ratio above 1":           "otlp_endpoint = \"https://otel.example:4318\"\n  sample_ratio = 1.5",
		"ratio without endpoint":  `sample_ratio = 0.5`,
		"pprof on every address":  `pprof_listen = "0.0.0.0:7423"`,
		"pprof without a port":    `pprof_listen = "127.0.0.1"`,
		"empty service name":      "otlp_endpoint = \"https://otel.example:4318\"\n  service_name = \"\"",
	} {
		_, err := Parse([]byte(contractExample+"\ntelemetry {\n  "+block+"\n}\n"), "/etc/airlock/airlock.hcl")
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "telemetry") {
			t.Errorf("%s: err = %v, want a telemetry problem", name, err)
		}
	}
}

func TestParseConfigStorage(t *testing.T) {
	cfg, err := Parse([]byte(contractExample+`
storage {
  postgres      = "postgres://airlock@db.internal/airlock?sslmode=verify-full"
  password_file = "pg-password"
}`), "/etc/airlock/airlock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := Storage{Postgres: "postgres://airlock@db.internal/airlock?sslmode=verify-full", PasswordFile: "/etc/airlock/pg-password", Lease: DefaultLease}
	if cfg.Storage == nil || *cfg.Storage != want {
		t.Errorf("storage: %+v, want %+v", cfg.Storage, want)
	}
	if cfg, err := Parse([]byte(contractExample), "/etc/airlock/airlock.hcl"); err != nil || cfg.Storage != nil {
		t.Errorf("without a storage block: %+v %v (SQLite files in state_dir)", cfg.Storage, err)
	}
	cfg, err = Parse([]byte(contractExample+"\nstorage {\n  postgres = \"postgres://airlock@127.0.0.1/airlock\"\n  lease = \"30s\"\n}\n"), "/etc/airlock/airlock.hcl")
	if err != nil || cfg.Storage.Lease != 30*time.Second {
		t.Errorf("loopback without TLS, a 30s lease: %+v %v", cfg.Storage, err)
	}
	for name, block := range map[string]string{
		"a password in the URL":       `postgres = "postgres://airlock:hunter2@db.internal/airlock?sslmode=verify-full"`,
		"no TLS over a network":       `postgres = "postgres://airlock@db.internal/airlock"`,
		"unverified TLS":              `postgres = "postgres://airlock@db.internal/airlock?sslmode=require"`,
		"no URL":                      `password_file = "pg-password"`,
		"an empty URL":                `postgres = ""`,
		"a lease too short":           "postgres = \"postgres://airlock@127.0.0.1/airlock\"\n  lease = \"1s\"",
		"a lease that is no duration": "postgres = \"postgres://airlock@127.0.0.1/airlock\"\n  lease = \"soon\"",
	} {
		_, err := Parse([]byte(contractExample+"\nstorage {\n  "+block+"\n}\n"), "/etc/airlock/airlock.hcl")
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "storage") && !strings.Contains(err.Error(), "lease") && !strings.Contains(err.Error(), "postgres") {
			t.Errorf("%s: err = %v, want a storage problem", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error quotes the password: %v", name, err)
		}
	}
}

func TestParseConfigPendingCaps(t *testing.T) {
	src := strings.Replace(contractExample, "max_run_ttl = \"8h\"\n", "max_run_ttl = \"8h\"\n  max_pending_per_run = 3\n  max_pending_per_requester = 7\n", 1)
	cfg, err := Parse([]byte(src), "/etc/airlock/airlock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Approval.MaxPendingPerRun != 3 || cfg.Approval.MaxPendingPerRequester != 7 || cfg.Approval.RunTTL != time.Hour {
		t.Errorf("approval: %+v", cfg.Approval)
	}
}

func TestParseConfigSizes(t *testing.T) {
	for src, want := range map[string]int{
		"":                                   DefaultMCPOutputBudget,
		"mcp {\n  output_budget = 4096\n}\n": 4096,
		"mcp {\n  output_budget = \"64KiB\"\n}\n":  64 << 10,
		"mcp {\n  output_budget = \"128KiB\"\n}\n": 128 << 10,
	} {
		cfg, err := Parse([]byte(contractExample+src), "/etc/airlock/airlock.hcl")
		if err != nil || cfg.MCP.OutputBudget != want {
			t.Errorf("%q: %v, budget %d, want %d", src, err, cfg.MCP.OutputBudget, want)
		}
	}
}

// TestParseConfigMCPMaxWait: mcp.max_wait, whose default answers before
// the 60 s request timeout of most MCP hosts (the TypeScript SDK's).
func TestParseConfigMCPMaxWait(t *testing.T) {
	if DefaultMCPMaxWait >= 60*time.Second {
		t.Errorf("DefaultMCPMaxWait = %s: a host with the common 60 s request timeout gives up first", DefaultMCPMaxWait)
	}
	for src, want := range map[string]time.Duration{
		"":                                   DefaultMCPMaxWait,
		"mcp {\n  output_budget = 4096\n}\n": DefaultMCPMaxWait,
		"mcp {\n  max_wait = \"5s\"\n}\n":    5 * time.Second,
		"mcp {\n  max_wait = \"10m\"\n}\n":   10 * time.Minute,
	} {
		cfg, err := Parse([]byte(contractExample+src), "/etc/airlock/airlock.hcl")
		if err != nil || cfg.MCP.MaxWait != want {
			t.Errorf("%q: %v, max_wait %s, want %s", src, err, cfg.MCP.MaxWait, want)
		}
	}
}

// witness_command is a program and its arguments, run without a shell: a
// list; a string is a plain program path, and one with spaces or shell
// syntax is refused with the list form to write.
func TestParseConfigWitnessCommand(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        []string
		wantErr     []string
	}{
		{name: "list", value: `["/usr/local/bin/push", "--to", "/mnt/w/notes.log"]`, want: []string{"/usr/local/bin/push", "--to", "/mnt/w/notes.log"}},
		{name: "list, program relative to the file", value: `["bin/push", "a b"]`, want: []string{"/etc/airlock/bin/push", "a b"}},
		{name: "a plain program path", value: `"/usr/local/bin/push-checkpoint"`, want: []string{"/usr/local/bin/push-checkpoint"}},
		{name: "shell syntax", value: `"cat >> /mnt/witness/notes.log"`,
			wantErr: []string{"run without a shell", `witness_command = ["/usr/local/bin/push-checkpoint", "--to", "/mnt/witness/notes.log"]`, "put the commands in a script"}},
		{name: "spaces", value: `"/usr/local/bin/push --to /mnt/w"`,
			wantErr: []string{"run without a shell", `witness_command = ["/usr/local/bin/push", "--to", "/mnt/w"]`}},
		{name: "empty list", value: `[]`, wantErr: []string{"must name a program"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(validConfig("audit {\n  witness_command = "+tc.value+"\n}\n")), "/etc/airlock/airlock.hcl")
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, cfg.Audit.WitnessCommand); diff != "" {
					t.Errorf("witness_command (-want +got):\n%s", diff)
				}
				return
			}
			for _, want := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want one with %q", err, want)
				}
			}
		})
	}
}

// TestParseConfigTransfer: the transfer block's budgets, their defaults,
// and the share of one requester following spool_max when not set.
func TestParseConfigTransfer(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      Transfer
	}{
		{"no block", "", Transfer{SpoolMax: 1 << 30, SpoolMaxPerRequester: 256 << 20, MinFree: 512 << 20}},
		{"spool_max alone", "transfer {\n  spool_max = \"2GiB\"\n}\n", Transfer{SpoolMax: 2 << 30, SpoolMaxPerRequester: 512 << 20, MinFree: 512 << 20}},
		{"all three", "transfer {\n  spool_max = \"300MiB\"\n  spool_max_per_requester = \"100MiB\"\n  min_free = 0\n}\n",
			Transfer{SpoolMax: 300 << 20, SpoolMaxPerRequester: 100 << 20, MinFree: 0}},
	} {
		cfg, err := Parse([]byte(contractExample+tt.src), "/etc/airlock/airlock.hcl")
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(tt.want, cfg.Transfer); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestParseConfigAllowedHosts(t *testing.T) {
	src := contractExample + "\n"
	cfg, err := Parse([]byte(strings.Replace(src, "listen {", "listen {\n  allowed_hosts = [\"Airlock.Example.COM.\", \"[2001:db8::1]\"]", 1)), "/etc/airlock/airlock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"airlock.example.com", "2001:db8::1", "127.0.0.1", "localhost", "::1"}
	if diff := cmp.Diff(want, cfg.Listen.AllowedHosts); diff != "" {
		t.Errorf("allowed hosts (-want +got):\n%s", diff)
	}
}

func TestParseConfigReviewerLinks(t *testing.T) {
	cfg, err := Parse([]byte(contractExample+"reviewer \"alice\" {\n  unix_users = [\"alice\", \"deploy\"]\n  agents = [\"ci-bot\"]\n  agent_subjects = [\"ci/repo:alice/app:ref:refs/heads/main\"]\n}\n"), "/etc/airlock/airlock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{"alice": {"alice", "deploy", "agent:ci-bot/", "agent:ci/repo:alice/app:ref:refs/heads/main"}}, cfg.ReviewerLinks); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}
}

func TestParseConfigAgents(t *testing.T) {
	src := strings.Replace(contractExample, "listen {", `listen {
  tls_cert       = "/etc/airlock/tls.crt"
  tls_key        = "/etc/airlock/tls.key"
  client_ca_file = "agents-ca.pem"`, 1) + `
agent "ci" {
  limits = ["build-box", "postgres@db"]
  oidc {
    issuer          = "https://token.actions.githubusercontent.com"
    audience        = "airlock"
    required_claims = { repository = "acme/app" }
  }
}
agent "runner" {
  mtls {
    subjects = ["runner-1.ci.example"]
  }
}
`
	cfg, err := Parse([]byte(src), "/etc/airlock/airlock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*Agent{
		"ci": {Name: "ci", Limits: []approvals.Scope{{Target: "build-box"}, {Target: "db", Account: "postgres"}},
			OIDC: &AgentOIDC{Issuer: "https://token.actions.githubusercontent.com", Audience: "airlock", SubjectClaim: "sub",
				RequiredClaims: map[string]string{"repository": "acme/app"}}},
		"runner": {Name: "runner", MTLS: &AgentMTLS{Subjects: []CertName{{Type: CertDNS, Name: "runner-1.ci.example"}}}},
	}
	if diff := cmp.Diff(want, cfg.Agents); diff != "" {
		t.Errorf("agents (-want +got):\n%s", diff)
	}
	if cfg.Listen.ClientCAFile != "/etc/airlock/agents-ca.pem" {
		t.Errorf("client_ca_file %q", cfg.Listen.ClientCAFile)
	}
}

// validConfig is a valid configuration with extra appended: its first
// added line is line 7.
func validConfig(extra string) string {
	return `credential "k" { private_key_file = "/k" }
target "t" {
  address   = "10.0.0.1:22"
  host_keys = ["` + testHostKey + `"]
  account "a" { credential = "k" }
}
` + extra
}

// configProblems are configurations Parse must refuse, with the lines
// its problems must name.
var configProblems = []struct {
	name      string
	src       string
	wantLines []int
}{
	{"unknown top-level field", "statedir = \"/x\"\n", []int{1}},
	{"unknown field in a target", `credential "k" { private_key_file = "/k" }
target "t" {
  adress = "10.0.0.1:22"
  account "a" { credential = "k" }
}`, []int{3}},
	{"syntax error", "target \"t\" {\n  address = \n}\n", []int{2}},
	{"duration not a string", validConfig("approval {\n  timeout = 120\n}\n"), []int{8}},
	{"duration garbage", validConfig("approval {\n  timeout = \"two minutes\"\n}\n"), []int{8}},
	{"negative duration", validConfig("approval {\n  run_ttl = \"-1h\"\n}\n"), []int{8}},
	{"run_ttl over max", validConfig("approval {\n  run_ttl = \"9h\"\n}\n"), []int{7}},
	{"no pending request allowed", validConfig("approval {\n  max_pending_per_run = 0\n}\n"), []int{8}},
	{"pending cap not a number", validConfig("approval {\n  max_pending_per_requester = \"many\"\n}\n"), []int{8}},
	{"non-loopback http without TLS", validConfig("listen {\n  http = \"10.1.2.3:7422\"\n}\n"), []int{8}},
	{"every address without allowed_hosts", validConfig("listen {\n  http = \"0.0.0.0:7422\"\n  tls_cert = \"/c\"\n  tls_key = \"/k\"\n}\n"), []int{7}},
	{"allowed_hosts with a scheme", validConfig("listen {\n  allowed_hosts = [\"https://airlock.example.com\"]\n}\n"), []int{8}},
	{"size over the maximum", validConfig("mcp {\n  output_budget = \"129KiB\"\n}\n"), []int{8}},
	{"size under the minimum", validConfig("mcp {\n  output_budget = 10\n}\n"), []int{8}},
	{"size with an unknown unit", validConfig("mcp {\n  output_budget = \"32KB\"\n}\n"), []int{8}},
	{"size not whole", validConfig("mcp {\n  output_budget = 1.5\n}\n"), []int{8}},
	{"max_wait not a duration", validConfig("mcp {\n  max_wait = \"soon\"\n}\n"), []int{8}},
	{"max_wait zero", validConfig("mcp {\n  max_wait = \"0s\"\n}\n"), []int{8}},
	{"max_wait under a second", validConfig("mcp {\n  max_wait = \"500ms\"\n}\n"), []int{8}},
	{"max_wait over an hour", validConfig("mcp {\n  max_wait = \"2h\"\n}\n"), []int{8}},
	{"size huge", validConfig("mcp {\n  output_budget = \"99999999999999999999GiB\"\n}\n"), []int{8}},
	{"reviewer linked to no user name", validConfig("reviewer \"alice\" {\n  unix_users = [\"al ice\"]\n}\n"), []int{8}},
	{"reviewer linked to a malformed agent subject", validConfig("reviewer \"alice\" {\n  agent_subjects = [\"ci\"]\n}\n"), []int{8}},
	{"reviewer defined twice", validConfig("reviewer \"alice\" {\n}\nreviewer \"alice\" {\n}\n"), []int{9}},
	{"agent limit naming no target", validConfig("agent \"ci\" {\n  limits = [\"nowhere\"]\n}\n"), []int{8}},
	{"agent limit naming no account", validConfig("agent \"ci\" {\n  limits = [\"root@t\"]\n}\n"), []int{8}},
	{"oidc issuer over plain http", validConfig("agent \"ci\" {\n  oidc {\n    issuer = \"http://idp.example\"\n    audience = \"airlock\"\n  }\n}\n"), []int{9}},
	{"oidc without an audience", validConfig("agent \"ci\" {\n  oidc {\n    issuer = \"https://idp.example\"\n  }\n}\n"), []int{8}},
	{"oidc required claim not a string", validConfig("agent \"ci\" {\n  oidc {\n    issuer = \"https://idp.example\"\n    audience = \"a\"\n    required_claims = { ref = [\"x\"] }\n  }\n}\n"), []int{11}},
	{"mtls without a client CA", validConfig("agent \"ci\" {\n  mtls {\n    subjects = [\"runner\"]\n  }\n}\n"), []int{8}},
	{"client CA without TLS", validConfig("listen {\n  client_ca_file = \"/ca.pem\"\n}\n"), []int{8}},
	{"agent defined twice", validConfig("agent \"ci\" {\n}\nagent \"ci\" {\n}\n"), []int{9}},
	{"bad checkpoint_every", validConfig("audit {\n  checkpoint_every = \"often\"\n}\n"), []int{8}},
	{"no host keys", `credential "k" { private_key_file = "/k" }
target "t" {
  address = "10.0.0.1:22"
  account "a" { credential = "k" }
}`, []int{2}},
	{"bad host key", `credential "k" { private_key_file = "/k" }
target "t" {
  address   = "10.0.0.1:22"
  host_keys = ["ssh-ed25519 nope"]
  account "a" { credential = "k" }
}`, []int{4}},
	{"unknown credential", `credential "k" { private_key_file = "/k" }
target "t" {
  address   = "10.0.0.1:22"
  host_keys = ["` + testHostKey + `"]
  account "a" {
    credential = "missing"
  }
}`, []int{6}},
	{"bad approval mode and output", `credential "k" { private_key_file = "/k" }
target "t" {
  address   = "10.0.0.1:22"
  host_keys = ["` + testHostKey + `"]
  account "a" {
    credential = "k"
    approval   = "never"
    output     = "some"
  }
}`, []int{7, 8}},
	{"default account not defined", `credential "k" { private_key_file = "/k" }
target "t" {
  address         = "10.0.0.1:22"
  host_keys       = ["` + testHostKey + `"]
  default_account = "root"
  account "a" { credential = "k" }
}`, []int{5}},
	{"duplicate target", validConfig(`target "t" {
  address   = "10.0.0.2:22"
  host_keys = ["` + testHostKey + `"]
  account "a" { credential = "k" }
}
`), []int{7}},
	{"credential with neither key nor ca", validConfig("credential \"empty\" {}\n"), []int{7}},
	{"bad target name", `credential "k" { private_key_file = "/k" }
target "t;rm -rf /" {
  address   = "10.0.0.1:22"
  host_keys = ["` + testHostKey + `"]
  account "a" { credential = "k" }
}`, []int{2}},
	{"max_parallel out of range", `credential "k" { private_key_file = "/k" }
target "t" {
  address      = "10.0.0.1:22"
  host_keys    = ["` + testHostKey + `"]
  max_parallel = 0
  account "a" { credential = "k" }
}`, []int{5}},
	{"target without address", "credential \"k\" { private_key_file = \"/k\" }\ntarget \"t\" {}\n", []int{2}},
	{"account without credential", `credential "k" { private_key_file = "/k" }
target "t" {
  address   = "10.0.0.1:22"
  host_keys = ["` + testHostKey + `"]
  account "a" {}
}`, []int{5}},
	{"duplicate listen block", validConfig("listen {}\nlisten {}\n"), []int{8}},
	{"secret for an unknown target", validConfig("secret \"s\" {\n  file = \"/s\"\n  accounts = [\"nowhere/a\"]\n}\n"), []int{9}},
	{"secret for an unknown account", validConfig("secret \"s\" {\n  file = \"/s\"\n  accounts = [\"t/root\"]\n}\n"), []int{9}},
	{"secret with file and systemd_credential", validConfig("secret \"s\" {\n  file = \"/s\"\n  systemd_credential = \"s\"\n  accounts = [\"t\"]\n}\n"), []int{7}},
	{"secret without accounts", validConfig("secret \"s\" {\n  file = \"/s\"\n}\n"), []int{7}},
	{"redact pattern that does not compile", validConfig("redact {\n  name = \"x\"\n  pattern = \"(\"\n}\n"), []int{9}},
	{"redact pattern that matches nothing", validConfig("redact {\n  name = \"x\"\n  pattern = \"a*\"\n}\n"), []int{9}},
	{"on_secret unknown", `credential "k" { private_key_file = "/k" }
target "t" {
  address   = "10.0.0.1:22"
  host_keys = ["` + testHostKey + `"]
  account "a" {
    credential = "k"
    on_secret = "ignore"
  }
}`, []int{7}},
	{"escalate an unknown class", `credential "k" { private_key_file = "/k" }
target "t" {
  address   = "10.0.0.1:22"
  host_keys = ["` + testHostKey + `"]
  account "a" {
    credential = "k"
    escalate   = ["dangerous"]
    deny_patterns = ["(unclosed"]
  }
}`, []int{7, 8}},
	{"policy fields out of bounds", `credential "k" { private_key_file = "/k" }
target "t" {
  address   = "10.0.0.1:22"
  host_keys = ["` + testHostKey + `"]
  account "a" {
    credential = "k"
    escalate   = ["mutating"]
    allow_unreviewed = ["read_only", "mutating"]
    max_grant  = "48h"
    action_policy = "/nonexistent/action.hcl"
    quota = { window = "1h" }
  }
  account "b" {
    credential = "k"
    quota      = "500 per day"
  }
  account "c" {
    credential = "k"
    quota      = { per_run = 0, burst = 3 }
  }
}
policy {
  opa_url     = "http://opa.example:8181/v1/data/airlock/decision"
  opa_timeout = "1m"
}`, []int{8, 8, 9, 11, 10, 15, 19, 24, 23}},
	{"spool_max_per_requester over spool_max", validConfig("transfer {\n  spool_max = \"64MiB\"\n  spool_max_per_requester = \"128MiB\"\n}\n"), []int{9}},
	{"max_transfer over the share of one requester", validConfig("transfer {\n  spool_max = \"64MiB\"\n}\n"), []int{5}},
	{"min_free not a size", validConfig("transfer {\n  min_free = \"5%\"\n}\n"), []int{8}},
	{"via an unknown target", validConfig(jumpTarget("j", "nowhere")), []int{9}},
	{"via itself", validConfig(jumpTarget("j", "j")), []int{9}},
	{"via an unknown account", validConfig(jumpTarget("j", "root@t")), []int{9}},
	{"via loop", validConfig(jumpTarget("j1", "j2") + jumpTarget("j2", "j1")), []int{9, 15}},
	{"via too many hops", validConfig(jumpTarget("j1", "t") + jumpTarget("j2", "j1") + jumpTarget("j3", "j2") + jumpTarget("j4", "j3") + jumpTarget("j5", "j4")), []int{33}},
}

func TestParseConfigProblems(t *testing.T) {
	for _, tt := range configProblems {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "airlock.hcl")
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *Error", err)
			}
			var lines []int
			for _, p := range ce.Problems {
				if p.File != "airlock.hcl" {
					t.Errorf("problem %q names file %q", p.Message, p.File)
				}
				lines = append(lines, p.Line)
			}
			if diff := cmp.Diff(tt.wantLines, lines); diff != "" {
				t.Errorf("problem lines (-want +got):\n%s\nproblems: %v", diff, ce.Problems)
			}
		})
	}
}

func TestLoadConfigFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "airlock.hcl")
	if err := os.WriteFile(f, []byte(contractExample), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Path != f {
		t.Errorf("path %q", cfg.Path)
	}
	big := filepath.Join(dir, "big.hcl")
	if err := os.WriteFile(big, []byte(strings.Repeat("#\n", maxConfigSize)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil {
		t.Error("a config file over the size limit was accepted")
	}
	if _, err := Load(filepath.Join(dir, "missing.hcl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want os.ErrNotExist", err)
	}
}
