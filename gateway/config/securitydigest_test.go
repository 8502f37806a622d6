package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const otherHostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBtJxaWSPYHgsjV9XDf2vmQpa7LHmOoP7ZzPLAz7zeqV other"

// digestConfig is a configuration with every part the security digest
// covers; dir holds the files it names.
func digestConfig(dir string) string {
	return `# the replicas' shared configuration
state_dir = "` + filepath.Join(dir, "state") + `"

listen {
  http           = "127.0.0.1:7422"
  tls_cert       = "/etc/airlock/tls.crt"
  tls_key        = "/etc/airlock/tls.key"
  client_ca_file = "/etc/airlock/agents-ca.pem"
}

approval {
  timeout     = "120s"
  max_run_ttl = "8h"
}

credential "deploy" {
  private_key_file = "/etc/airlock/keys/deploy"
}

credential "ca" {
  ca            = true
  force_command = "/usr/local/bin/airlock-action"
}

target "build-box" {
  address         = "10.0.0.24:22"
  host_keys       = ["` + testHostKey + `", "` + otherHostKey + `"]
  default_account = "deploy"

  account "deploy" {
    credential       = "deploy"
    approval         = "run"
    max_timeout      = "10m"
    escalate         = ["destructive", "privileged"]
    refuse           = ["forbidden"]
    deny_patterns    = ["rm -rf /", "shutdown"]
    allow_unreviewed = ["read_only"]
    max_grant        = "30m"
    quota            = { per_run = 50 }
  }
  account "ops" {
    credential        = "ca"
    approval          = "call"
    action_policy     = "` + filepath.Join(dir, "action.hcl") + `"
    enforce_read_only = true
  }
}

target "db" {
  address          = "db.internal:22"
  known_hosts_file = "` + filepath.Join(dir, "known_hosts") + `"
  account "postgres" {
    credential = "deploy"
  }
}

reviewer "alice" {
  unix_users = ["deploy", "alice2"]
  agents     = ["ci"]
}

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
    subjects = ["runner-1.ci.example", "uri:spiffe://ci.example/r"]
  }
}

secret "db-password" {
  file     = "` + filepath.Join(dir, "db-password") + `"
  accounts = ["db/postgres", "build-box"]
}

redact {
  name    = "api-key"
  pattern = "(?i)x-api-key: *[a-z0-9]{32}"
}

policy {
  opa_url = "http://127.0.0.1:8181/v1/data/airlock/decision"
}

sso {
  issuer          = "https://idp.example.com"
  client_id       = "airlock"
  reviewer_groups = ["airlock-reviewers", "sre"]
}
`
}

// digestFiles writes the files digestConfig names into dir.
func digestFiles(t *testing.T, dir string) {
	t.Helper()
	for name, content := range map[string]string{
		"action.hcl": `verb "status" {
  argv  = ["/bin/systemctl", "status", "{unit}"]
  param "unit" { enum = ["web", "worker"] }
  class = "read_only"
}
verb "restart" {
  argv = ["/bin/systemctl", "restart", "{unit}"]
  param "unit" { enum = ["web", "worker"] }
}
`,
		"known_hosts": "# pinned after out-of-band confirmation\n[db.internal]:22 " + testHostKey + "\n",
		"db-password": "correct-horse-battery-staple-1\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// digestOf parses src (in dir) and returns its security digest.
func digestOf(t *testing.T, dir, src string) string {
	t.Helper()
	cfg, err := Parse([]byte(src), filepath.Join(dir, "airlock.hcl"))
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	return SecurityDigest(cfg)
}

// mustReplace replaces old, which must be in s, by new once.
func mustReplace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("%q is not in the configuration", old)
	}
	return strings.Replace(s, old, new, 1)
}

// What does not change what a configuration enforces does not change its
// digest: comments, layout, the order of blocks and of set-like lists,
// what differs from host to host (listen, state_dir, file paths), the
// file's own bytes.
func TestSecurityDigestIgnoresFormAndHost(t *testing.T) {
	dir := t.TempDir()
	digestFiles(t, dir)
	base := digestConfig(dir)
	want := digestOf(t, dir, base)
	if len(want) != 64 || ShortDigest(want) != want[:ShortDigestLen] {
		t.Fatalf("digest %q", want)
	}
	other := t.TempDir()
	digestFiles(t, other)
	for _, c := range []struct {
		name string
		edit func(string) string
	}{
		{"comments and blank lines", func(s string) string {
			s = mustReplace(t, s, "# the replicas' shared configuration", "# edited by hand\n\n// another comment")
			return mustReplace(t, s, `  default_account = "deploy"`, "  /* inline */ default_account = \"deploy\" # trailing")
		}},
		{"indentation", func(s string) string {
			return mustReplace(t, s, `    credential       = "deploy"`, `credential = "deploy"`)
		}},
		{"targets in another order", func(s string) string {
			i, j := strings.Index(s, `target "build-box"`), strings.Index(s, `target "db"`)
			k := strings.Index(s, `reviewer "alice"`)
			return s[:i] + s[j:k] + s[i:j] + s[k:]
		}},
		{"accounts in another order", func(s string) string {
			i, j := strings.Index(s, `  account "deploy"`), strings.Index(s, `  account "ops"`)
			k := strings.Index(s, `target "db"`)
			end := strings.LastIndex(s[:k], "}")
			return s[:i] + s[j:end] + s[i:j] + s[end:]
		}},
		{"set-like lists in another order", func(s string) string {
			s = mustReplace(t, s, `["destructive", "privileged"]`, `["privileged", "destructive"]`)
			s = mustReplace(t, s, `["rm -rf /", "shutdown"]`, `["shutdown", "rm -rf /"]`)
			s = mustReplace(t, s, `["`+testHostKey+`", "`+otherHostKey+`"]`, `["`+otherHostKey+`", "`+testHostKey+`"]`)
			s = mustReplace(t, s, `["airlock-reviewers", "sre"]`, `["sre", "airlock-reviewers"]`)
			s = mustReplace(t, s, `["deploy", "alice2"]`, `["alice2", "deploy"]`)
			return mustReplace(t, s, `["db/postgres", "build-box"]`, `["build-box", "db/postgres"]`)
		}},
		{"another host's listen and state_dir", func(s string) string {
			s = mustReplace(t, s, `http           = "127.0.0.1:7422"`, `http           = "10.1.2.3:7422"`)
			return mustReplace(t, s, filepath.Join(dir, "state"), "/srv/other-state")
		}},
		{"the same files at other paths", func(s string) string { return strings.ReplaceAll(s, dir, other) }},
		{"a key file at another path", func(s string) string {
			return mustReplace(t, s, "/etc/airlock/keys/deploy", "/var/lib/keys/deploy")
		}},
		{"the action policy's verbs in another order", func(s string) string {
			p := filepath.Join(other, "action.hcl")
			b, _ := os.ReadFile(p)
			i := bytes.Index(b, []byte(`verb "restart"`))
			os.WriteFile(p, append(append([]byte("# reordered\n"), b[i:]...), b[:i]...), 0o600)
			return strings.ReplaceAll(s, dir, other)
		}},
		{"known_hosts comments, blank lines and order", func(s string) string {
			os.WriteFile(filepath.Join(other, "known_hosts"), []byte("\n# another comment\n[db.internal]:22   "+testHostKey+"\n\n"), 0o600)
			return strings.ReplaceAll(s, dir, other)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			digestFiles(t, other)
			edited := c.edit(base)
			if got := digestOf(t, dir, edited); got != want {
				t.Errorf("digest changed to %s, want %s; the edited file:\n%s", got, want, edited)
			}
		})
	}
}

// Each security-relevant setting changes the digest.
func TestSecurityDigestCoversEachSetting(t *testing.T) {
	dir := t.TempDir()
	digestFiles(t, dir)
	base := digestConfig(dir)
	want := digestOf(t, dir, base)
	for _, c := range []struct{ name, old, new string }{
		{"a target's address", `"10.0.0.24:22"`, `"10.0.0.25:22"`},
		{"a pinned host key", `", "` + otherHostKey + `"]`, `"]`},
		{"a target's default account", `default_account = "deploy"`, `default_account = "ops"`},
		{"a target's max_parallel", `  default_account = "deploy"`, "  default_account = \"deploy\"\n  max_parallel = 9"},
		{"a target's jump host", `  address          = "db.internal:22"`, "  address          = \"db.internal:22\"\n  via = \"deploy@build-box\""},
		{"a target added", "reviewer \"alice\" {", "target \"new\" {\n  address = \"10.0.0.9:22\"\n  host_keys = [\"" + testHostKey + "\"]\n  account \"a\" { credential = \"deploy\" }\n}\nreviewer \"alice\" {"},
		{"an account's approval mode", `    approval         = "run"`, `    approval         = "call"`},
		{"an account's credential", "  account \"postgres\" {\n    credential = \"deploy\"", "  account \"postgres\" {\n    credential = \"ca\""},
		{"an account's max_timeout", `max_timeout      = "10m"`, `max_timeout      = "20m"`},
		{"an account's escalate", `["destructive", "privileged"]`, `["privileged"]`},
		{"an account's refuse", `refuse           = ["forbidden"]`, `refuse           = []`},
		{"an account's deny_patterns", `"rm -rf /", "shutdown"`, `"rm -rf /"`},
		{"an account's allow_unreviewed", `allow_unreviewed = ["read_only"]`, `allow_unreviewed = []`},
		{"an account's max_grant", `max_grant        = "30m"`, `max_grant        = "1h"`},
		{"an account's quota", `quota            = { per_run = 50 }`, `quota            = { per_run = 60 }`},
		{"an account's output", "    credential = \"deploy\"\n  }\n}\n\nreviewer", "    credential = \"deploy\"\n    output = \"none\"\n  }\n}\n\nreviewer"},
		{"an account's on_secret", `    quota            = { per_run = 50 }`, "    quota            = { per_run = 50 }\n    on_secret = \"refuse\""},
		{"an account's enforce_read_only", "    enforce_read_only = true\n", ""},
		{"a credential's kind", "credential \"deploy\" {\n  private_key_file = \"/etc/airlock/keys/deploy\"", "credential \"deploy\" {\n  ca = true"},
		{"a certificate's force_command", `force_command = "/usr/local/bin/airlock-action"`, `force_command = "/usr/local/bin/other"`},
		{"the approval timeout", `timeout     = "120s"`, `timeout     = "60s"`},
		{"the max run TTL", `max_run_ttl = "8h"`, `max_run_ttl = "2h"`},
		{"a reviewer's links", `agents     = ["ci"]`, `agents     = []`},
		{"an agent's limits", `["build-box", "postgres@db"]`, `["build-box"]`},
		{"an agent's oidc issuer", `"https://token.actions.githubusercontent.com"`, `"https://idp.example.com"`},
		{"an agent's oidc audience", `audience        = "airlock"`, `audience        = "other"`},
		{"an agent's required claims", `{ repository = "acme/app" }`, `{ repository = "acme/other" }`},
		{"an agent's mtls subjects", `"runner-1.ci.example", `, ``},
		{"a secret's grants", `["db/postgres", "build-box"]`, `["db/postgres"]`},
		{"a secret's name", `secret "db-password"`, `secret "db-pass"`},
		{"a redact pattern", `[a-z0-9]{32}`, `[a-z0-9]{40}`},
		{"the OPA URL", `opa_url = "http://127.0.0.1:8181/v1/data/airlock/decision"`, `opa_url = "http://127.0.0.1:8181/v1/data/airlock/other"`},
		{"OPA failing open", `opa_url = "http://127.0.0.1:8181/v1/data/airlock/decision"`, "opa_url = \"http://127.0.0.1:8181/v1/data/airlock/decision\"\n  fail_closed = false"},
		{"the sso issuer", `issuer          = "https://idp.example.com"`, `issuer          = "https://idp2.example.com"`},
		{"the sso groups", `["airlock-reviewers", "sre"]`, `["airlock-reviewers"]`},
		{"the sso groups claim", `client_id       = "airlock"`, "client_id       = \"airlock\"\n  groups_claim = \"roles\""},
		{"the sso device login", `client_id       = "airlock"`, "client_id       = \"airlock\"\n  device_login = true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := digestOf(t, dir, mustReplace(t, base, c.old, c.new)); got == want {
				t.Errorf("the digest did not change")
			}
		})
	}
	// The files a configuration names count by what they say.
	for _, c := range []struct{ name, file, content string }{
		{"a known_hosts entry", "known_hosts", "[db.internal]:22 " + otherHostKey + "\n"},
		{"an action policy's verb", "action.hcl", "verb \"status\" {\n  argv  = [\"/bin/systemctl\", \"status\", \"web\"]\n  class = \"read_only\"\n}\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			digestFiles(t, d)
			os.WriteFile(filepath.Join(d, c.file), []byte(c.content), 0o600)
			if got := digestOf(t, dir, strings.ReplaceAll(base, dir, d)); got == want {
				t.Errorf("the digest did not change")
			}
		})
	}
	t.Run("a known_hosts file gone", func(t *testing.T) {
		d := t.TempDir()
		digestFiles(t, d)
		os.Remove(filepath.Join(d, "known_hosts"))
		if got := digestOf(t, dir, strings.ReplaceAll(base, dir, d)); got == want {
			t.Errorf("the digest did not change")
		}
	})
}

// A secret's value never enters the digest, nor a key's path or a
// secret's file: the document hashed holds its name and grants alone.
func TestSecurityDigestHoldsNoSecret(t *testing.T) {
	dir := t.TempDir()
	digestFiles(t, dir)
	cfg, err := Parse([]byte(digestConfig(dir)), filepath.Join(dir, "airlock.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	want := SecurityDigest(cfg)
	doc := string(securityDocument(cfg))
	for _, s := range []string{"correct-horse-battery-staple", filepath.Join(dir, "db-password"), "/etc/airlock/keys/deploy", "/etc/airlock/tls.key"} {
		if strings.Contains(doc, s) {
			t.Errorf("the digested document holds %q:\n%s", s, doc)
		}
	}
	if !strings.Contains(doc, `"db-password":["build-box","db/postgres"]`) {
		t.Errorf("the secret's name and grants are not in the document:\n%s", doc)
	}
	if err := os.WriteFile(filepath.Join(dir, "db-password"), []byte("another-value-altogether-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := SecurityDigest(cfg); got != want {
		t.Errorf("a secret's new value changed the digest")
	}
}
