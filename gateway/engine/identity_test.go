package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLinksFromClaim(t *testing.T) {
	for _, tc := range []struct {
		name  string
		claim any
		want  []string
	}{
		{"none", nil, nil},
		{"one string", "unix:sofia", []string{"sofia"}},
		{"a list", []any{"unix:sofia", "agent:ci-bot", "agent:ci/repo:acme/app:ref:refs/heads/main"},
			[]string{"sofia", "agent:ci-bot/", "agent:ci/repo:acme/app:ref:refs/heads/main"}},
		{"hostile and unknown entries are left out", []any{"unix:so fia", "agent:ci\u202ebot", "agent:ci/sub\nject", "root", "group:admins", 42},
			nil},
	} {
		if diff := cmp.Diff(tc.want, LinksFromClaim(tc.claim)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestLooksLikeJWT(t *testing.T) {
	for s, want := range map[string]bool{
		"eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.c2ln": true,
		"airlock_agent_0123_abcd":                   false,
		"eyJhbGciOiJSUzI1NiJ9..c2ln":                false,
		"eyJ.a.b.c":                                 false,
	} {
		if LooksLikeJWT(s) != want {
			t.Errorf("LooksLikeJWT(%q) = %v", s, !want)
		}
	}
}
