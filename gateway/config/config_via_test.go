package config

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(contractExample))
	f.Add([]byte("target \"x\" { address = \"a:1\" }"))
	f.Add([]byte("listen { http = \"[::1]:1\" }"))
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, err := Parse(src, "fuzz.hcl")
		if err == nil && cfg == nil {
			t.Fatal("nil config without error")
		}
		var ce *Error
		if err != nil && errors.As(err, &ce) && len(ce.Problems) == 0 {
			t.Fatal("Error without problems")
		}
	})
}

// config check's reach test: socket_group's members must be able to pass
// every directory above the ones the gateway manages itself.
// jumpTarget is a target block (6 lines) reached through via.
func jumpTarget(name, via string) string {
	return `target "` + name + `" {
  address = "10.0.0.9:22"
  via = "` + via + `"
  host_keys = ["` + testHostKey + `"]
  account "a" { credential = "k" }
}
`
}

func TestParseConfigVia(t *testing.T) {
	src := `credential "k" { private_key_file = "/k" }
target "bastion" {
  address   = "bastion.example.com"
  host_keys = ["` + testHostKey + `"]
  account "jump" { credential = "k" }
}
target "inner" {
  address   = "10.0.0.5:22"
  via       = "bastion"
  host_keys = ["` + testHostKey + `"]
  account "a" { credential = "k" }
}
target "deep" {
  address   = "10.1.0.5"
  via       = "a@inner"
  host_keys = ["` + testHostKey + `"]
  account "a" { credential = "k" }
}
`
	cfg, err := Parse([]byte(src), "airlock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	hops, accts := cfg.Route(cfg.Targets["deep"])
	var got []string
	for i, h := range hops {
		got = append(got, accts[i].Name+"@"+h.Name)
	}
	if diff := cmp.Diff([]string{"jump@bastion", "a@inner"}, got); diff != "" {
		t.Errorf("route (-want +got):\n%s", diff)
	}
	if hops, _ := cfg.Route(cfg.Targets["bastion"]); len(hops) != 0 {
		t.Errorf("a direct target has hops: %v", hops)
	}
}
