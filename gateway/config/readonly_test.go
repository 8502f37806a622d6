package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readOnlyAccount is a configuration whose account a has the lines in
// body (enforce_read_only on line 7).
func readOnlyAccount(body string) string {
	return `credential "k" { private_key_file = "/k" }
target "t" {
  address   = "10.0.0.1:22"
  host_keys = ["` + testHostKey + `"]
  account "a" {
    credential = "k"
` + body + `
  }
}
`
}

// TestParseConfigEnforceReadOnly: enforce_read_only is taken on an
// account behind airlock-action (it names action_policy), and is a
// problem at its line, naming what it needs, on any other; a verb that
// runs through sudo cannot be declared read_only with it.
func TestParseConfigEnforceReadOnly(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "action.hcl")
	os.WriteFile(pol, []byte(`verb "status" {
  argv  = ["/bin/systemctl", "status", "web"]
  class = "read_only"
}
`), 0o644)
	sudoPol := filepath.Join(dir, "sudo.hcl")
	os.WriteFile(sudoPol, []byte(`verb "status" {
  argv   = ["/bin/systemctl", "status", "web"]
  run_as = "app"
  class  = "read_only"
}
`), 0o644)

	cfg, err := Parse([]byte(readOnlyAccount("    enforce_read_only = true\n    action_policy = \""+pol+"\"")), "airlock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Targets["t"].Accounts["a"]; !a.EnforceReadOnly || a.ActionPolicy == nil {
		t.Errorf("account: %+v", a)
	}
	cfg, err = Parse([]byte(readOnlyAccount("    enforce_read_only = false")), "airlock.hcl")
	if err != nil || cfg.Targets["t"].Accounts["a"].EnforceReadOnly {
		t.Errorf("enforce_read_only = false: %v", err)
	}
	cfg, err = Parse([]byte(readOnlyAccount("")), "airlock.hcl")
	if err != nil || cfg.Targets["t"].Accounts["a"].EnforceReadOnly {
		t.Errorf("the default enforces: %v", err)
	}

	for _, tt := range []struct {
		name, body, want string
	}{
		{"without action_policy", "    enforce_read_only = true", "needs action_policy"},
		{"not a bool", "    enforce_read_only = \"yes\"\n    action_policy = \"" + pol + "\"", "bool"},
		{"a read_only verb through sudo", "    enforce_read_only = true\n    action_policy = \"" + sudoPol + "\"", "verb status"},
	} {
		_, err := Parse([]byte(readOnlyAccount(tt.body)), "airlock.hcl")
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) != 1 {
			t.Errorf("%s: err = %v, want one problem", tt.name, err)
			continue
		}
		if p := ce.Problems[0]; p.Line != 7 || !strings.Contains(p.Message, tt.want) {
			t.Errorf("%s: problem %v, want line 7 naming %q", tt.name, p, tt.want)
		}
	}
}
