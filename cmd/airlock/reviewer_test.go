package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
)

// fakeGateway answers a reviewer's login, an empty approvals list and its
// runs, and counts the requests it got.
type fakeGateway struct {
	*httptest.Server
	hits atomic.Int32
	runs []api.Run
}

func newFakeGateway(t *testing.T, runs ...api.Run) *fakeGateway {
	t.Helper()
	g := &fakeGateway{runs: runs}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.hits.Add(1)
		switch r.URL.Path {
		case "/v1/login":
			json.NewEncoder(w).Encode(api.LoginResponse{Token: "t"})
		case "/v1/approvals":
			w.Write([]byte("[]"))
		case "/v1/runs":
			json.NewEncoder(w).Encode(g.runs)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(g.Close)
	return g
}

// reviewerConfig writes a configuration whose listen block is listen.
func reviewerConfig(t *testing.T, listen string) string {
	t.Helper()
	dir := t.TempDir()
	f := filepath.Join(dir, "airlock.hcl")
	src := fmt.Sprintf("state_dir = %q\nlisten {\n%s\n}\n", filepath.Join(dir, "state"), listen)
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// The reviewer verbs find the gateway from --url, else $AIRLOCK_URL, else
// the configuration's HTTP listener.
func TestReviewerGatewayPrecedence(t *testing.T) {
	fromFlag, fromEnv, fromConfig := newFakeGateway(t), newFakeGateway(t), newFakeGateway(t)
	cfg := reviewerConfig(t, fmt.Sprintf("http = %q", fromConfig.Listener.Addr().String()))
	tests := []struct {
		name  string
		env   map[string]string
		flags []string
		want  *fakeGateway
	}{
		{"--config", nil, []string{"--config", cfg}, fromConfig},
		{"$AIRLOCK_CONFIG", map[string]string{"AIRLOCK_CONFIG": cfg}, nil, fromConfig},
		{"$AIRLOCK_URL over --config", map[string]string{"AIRLOCK_URL": fromEnv.URL}, []string{"--config", cfg}, fromEnv},
		{"--url over $AIRLOCK_URL", map[string]string{"AIRLOCK_URL": fromEnv.URL, "AIRLOCK_CONFIG": cfg}, []string{"--url", fromFlag.URL}, fromFlag},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"AIRLOCK_URL": "", "AIRLOCK_CONFIG": "", "AIRLOCK_REVIEWER": "alice", "AIRLOCK_PASSWORD_FILE": writePW(t)}
			for k, v := range tt.env {
				env[k] = v
			}
			before := map[*fakeGateway]int32{}
			for _, g := range []*fakeGateway{fromFlag, fromEnv, fromConfig} {
				before[g] = g.hits.Load()
			}
			out, errs, code := runCLIEnv(t, env, append([]string{"approvals", "list"}, tt.flags...)...)
			if code != 0 {
				t.Fatalf("approvals list: exit %d: %s", code, errs)
			}
			if !strings.Contains(out, "no pending approvals") {
				t.Errorf("stdout %q", out)
			}
			for _, g := range []*fakeGateway{fromFlag, fromEnv, fromConfig} {
				if got := g.hits.Load() > before[g]; got != (g == tt.want) {
					t.Errorf("gateway %s asked: %v, want %v", g.URL, got, g == tt.want)
				}
			}
		})
	}
}

func TestReviewerConfigWithoutHTTPListener(t *testing.T) {
	cfg := reviewerConfig(t, `http = ""`)
	env := map[string]string{"AIRLOCK_URL": "", "AIRLOCK_CONFIG": cfg, "AIRLOCK_REVIEWER": "alice", "AIRLOCK_PASSWORD_FILE": writePW(t)}
	_, errs, code := runCLIEnv(t, env, "runs", "list")
	if code != 1 || !strings.Contains(errs, "no HTTP listener") || !strings.Contains(errs, "--url") {
		t.Errorf("exit %d, stderr %q; want 1 and what to do about the missing HTTP listener", code, errs)
	}
}

func TestListenerURL(t *testing.T) {
	tests := []struct {
		name   string
		listen config.Listen
		want   string // "" for an error
	}{
		{"loopback", config.Listen{HTTP: "127.0.0.1:7422"}, "http://127.0.0.1:7422"},
		{"TLS", config.Listen{HTTP: "gw.example.com:443", TLSCert: "c", TLSKey: "k"}, "https://gw.example.com:443"},
		{"IPv4 wildcard", config.Listen{HTTP: "0.0.0.0:8443", TLSCert: "c", TLSKey: "k"}, "https://127.0.0.1:8443"},
		{"IPv6 wildcard", config.Listen{HTTP: "[::]:8443", TLSCert: "c", TLSKey: "k"}, "https://[::1]:8443"},
		{"empty host", config.Listen{HTTP: ":8443", TLSCert: "c", TLSKey: "k"}, "https://127.0.0.1:8443"},
		{"IPv6 loopback", config.Listen{HTTP: "[::1]:7422"}, "http://[::1]:7422"},
		{"no HTTP listener", config.Listen{}, ""},
		{"port chosen at start", config.Listen{HTTP: "127.0.0.1:0"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := listenerURL(&config.Config{Path: "airlock.hcl", Listen: tt.listen})
			if (err != nil) != (tt.want == "") || got != tt.want {
				t.Errorf("listenerURL(%+v) = %q, %v; want %q", tt.listen, got, err, tt.want)
			}
		})
	}
}

// runs list keeps each run on one line: a long or hostile anchor command
// line is cut and escaped; --json has all of it.
func TestRunsListAnchor(t *testing.T) {
	argv := []string{"/usr/bin/python3", "-c", "print('x')\n\t\u202e" + strings.Repeat("a", 200)}
	g := newFakeGateway(t, api.Run{ID: "run_1", State: "approved", Kind: "local", Requester: "agent", Anchor: &api.Process{PID: 42, Argv: argv}})
	env := map[string]string{"AIRLOCK_URL": g.URL, "AIRLOCK_REVIEWER": "alice", "AIRLOCK_PASSWORD_FILE": writePW(t)}

	out, errs, code := runCLIEnv(t, env, "runs", "list")
	if code != 0 {
		t.Fatalf("runs list: exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a header and one line, got %d lines:\n%s", len(lines), out)
	}
	anchor := lines[1][strings.Index(lines[1], "pid 42 "):]
	anchor = strings.TrimSpace(strings.TrimSuffix(anchor, "-")) // the ENDED column of a live run
	if n := len([]rune(anchor)); n > len("pid 42 ")+maxArgvWidth || !strings.HasSuffix(anchor, "…") {
		t.Errorf("anchor column is %d characters, want at most %d ending in an ellipsis: %q", n, len("pid 42 ")+maxArgvWidth, anchor)
	}
	if strings.ContainsAny(anchor, "\t\u202e") {
		t.Errorf("anchor column holds a raw control character: %q", anchor)
	}

	out, errs, code = runCLIEnv(t, env, "runs", "list", "--json")
	var runs []api.Run
	if err := json.Unmarshal([]byte(out), &runs); err != nil || code != 0 {
		t.Fatalf("runs list --json: exit %d, %v: %s", code, err, errs)
	}
	if len(runs) != 1 || runs[0].Anchor == nil || !slices.Equal(runs[0].Anchor.Argv, argv) {
		t.Errorf("--json does not have the whole argv: %+v", runs)
	}
}

// runs list says which of a run's limits ran out: a spent action budget
// with its size, not an expiry.
func TestRunsListSaysWhatRanOut(t *testing.T) {
	g := newFakeGateway(t,
		api.Run{ID: "run_budget", State: "expired", Kind: "local", Requester: "agent", Actions: 1, EndReason: "max_actions"},
		api.Run{ID: "run_ttl", State: "expired", Kind: "local", Requester: "agent", Actions: 4, EndReason: "ttl"})
	env := map[string]string{"AIRLOCK_URL": g.URL, "AIRLOCK_REVIEWER": "alice", "AIRLOCK_PASSWORD_FILE": writePW(t)}
	out, errs, code := runCLIEnv(t, env, "runs", "list", "--all")
	if code != 0 {
		t.Fatalf("runs list: exit %d: %s", code, errs)
	}
	for _, want := range []string{"max_actions: its action budget (1) is spent", "ttl: its approval's time ran out"} {
		if !strings.Contains(out, want) {
			t.Errorf("runs list does not say %q:\n%s", want, out)
		}
	}
}
