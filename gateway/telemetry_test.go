package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/hashicorp/go-hclog"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export as
// the protocol defines it (protobuf ExportTraceServiceRequest on
// /v1/traces) and keeps the spans and the headers they came with.
type otlpReceiver struct {
	srv *httptest.Server

	mu        sync.Mutex
	spans     []*tracepb.Span
	resources []*commonpb.KeyValue
	auth      []string
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
			return
		}
		b, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var ex collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		for _, rs := range ex.ResourceSpans {
			r.resources = append(r.resources, rs.GetResource().GetAttributes()...)
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func attr(s *tracepb.Span, key string) (string, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			switch v := kv.Value.Value.(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue, true
			case *commonpb.AnyValue_IntValue:
				return fmt.Sprint(v.IntValue), true
			}
			return kv.Value.String(), true
		}
	}
	return "", false
}

// TestTracesOverOTLP runs actions with tracing configured and reads what
// a collector receives: one span per action, the action id on it, a child
// per phase in order inside it, the bearer token from its file, and
// nothing of the command.
func TestTracesOverOTLP(t *testing.T) {
	t.Parallel()
	recv := startOTLPReceiver(t)
	tokenFile := filepath.Join(t.TempDir(), "otlp-token")
	if err := os.WriteFile(tokenFile, []byte("otlp-bearer-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{extraConfig: fmt.Sprintf(`
telemetry {
  otlp_endpoint   = %q
  otlp_token_file = %q
  service_name    = "airlock-test"
}
`, recv.srv.URL, tokenFile)})
	ctx := context.Background()
	// A credential in the command: redacted for the record, and never in
	// a span.
	const key = "AKIAIOSFODNN7EXAMPLE"
	command := "printf %s " + key + " | wc -c"
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
	g.decideNext("run", "approve", "")
	first := <-res
	if first.err != nil || !first.a.Success() {
		t.Fatalf("first action: %+v %v", first.a, first.err)
	}
	// A redacted command asks for a call approval inside the run.
	res = g.runAsync(api.ActionRequest{Target: "box-run", Command: command})
	g.decideNext("call", "approve", "")
	r2 := <-res
	second := r2.a
	if r2.err != nil || !second.Success() {
		t.Fatalf("second action: %+v %v", second, r2.err)
	}
	refused, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "no-such-box", Command: "true"}, api.Events{})
	if err != nil || refused.Outcome != sshexec.Rejected {
		t.Fatalf("refused action: %+v %v", refused, err)
	}
	// Stopping sends what is still batched.
	g.stop()

	recv.mu.Lock()
	defer recv.mu.Unlock()
	for _, a := range recv.auth {
		if a != "Bearer otlp-bearer-0123456789" {
			t.Errorf("an export came with Authorization %q", a)
		}
	}
	if !slices.ContainsFunc(recv.resources, func(kv *commonpb.KeyValue) bool {
		return kv.Key == "service.name" && kv.Value.GetStringValue() == "airlock-test"
	}) {
		t.Errorf("no service.name resource attribute: %v", recv.resources)
	}
	roots := map[string]*tracepb.Span{} // by action id
	children := map[string][]*tracepb.Span{}
	for _, sp := range recv.spans {
		// Nothing of the command, redacted or not, in any span.
		text := sp.String()
		for _, bad := range []string{key, "printf", "wc -c", "[redacted"} {
			if strings.Contains(text, bad) {
				t.Errorf("span %q carries %q: %s", sp.Name, bad, text)
			}
		}
		id, _ := attr(sp, "airlock.action.id")
		if sp.Name == "airlock.action" {
			roots[id] = sp
		} else {
			children[string(sp.ParentSpanId)] = append(children[string(sp.ParentSpanId)], sp)
		}
	}
	wantPhases := map[string][]string{
		first.a.ID: {"check", "run", "policy", "requested", "approval", "slot", "intent", "dial", "handshake", "auth", "session", "command", "output", "result"},
		second.ID:  {"check", "run", "policy", "requested", "approval", "slot", "intent", "dial", "handshake", "auth", "session", "command", "output", "result"},
		refused.ID: {"check", "run", "policy", "requested", "result"},
	}
	for id, want := range wantPhases {
		root := roots[id]
		if root == nil {
			t.Errorf("no airlock.action span for %s (spans: %d)", id, len(recv.spans))
			continue
		}
		if out, _ := attr(root, "airlock.outcome"); id == refused.ID && out != "rejected" || id != refused.ID && out != "exited" {
			t.Errorf("%s: airlock.outcome %q", id, out)
		}
		if tg, _ := attr(root, "airlock.target"); id != refused.ID && tg != "box-run" {
			t.Errorf("%s: airlock.target %q", id, tg)
		}
		kids := children[string(root.SpanId)]
		slices.SortStableFunc(kids, func(a, b *tracepb.Span) int { return int(int64(a.StartTimeUnixNano) - int64(b.StartTimeUnixNano)) })
		var got []string
		for _, k := range kids {
			got = append(got, k.Name)
			if string(k.TraceId) != string(root.TraceId) {
				t.Errorf("%s: phase %s in another trace", id, k.Name)
			}
			if kid, _ := attr(k, "airlock.action.id"); kid != id {
				t.Errorf("%s: phase %s names action %q", id, k.Name, kid)
			}
			if k.StartTimeUnixNano < root.StartTimeUnixNano || k.EndTimeUnixNano > root.EndTimeUnixNano || k.EndTimeUnixNano < k.StartTimeUnixNano {
				t.Errorf("%s: phase %s [%d, %d] outside its action [%d, %d]", id, k.Name,
					k.StartTimeUnixNano, k.EndTimeUnixNano, root.StartTimeUnixNano, root.EndTimeUnixNano)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: phases %v, want %v", id, got, want)
		}
	}
}

// TestPprofOnlyWhereConfigured: the profiler answers on its own loopback
// listener when telemetry.pprof_listen says so, and never on the API's
// listeners (the package's import registers it on the default mux).
func TestPprofOnlyWhereConfigured(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{extraConfig: "telemetry {\n  pprof_listen = \"127.0.0.1:0\"\n}\n"})
	// The gateway binds the port and says which it got before it is ready.
	m := regexp.MustCompile(`serving Go profiles to this host: pprof=(\S+)`).FindStringSubmatch(g.logs.String())
	if m == nil {
		t.Fatal("the gateway did not log the profiler's address")
	}
	addr := m[1]
	get := func(c *http.Client, url string) int {
		resp, err := c.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(http.DefaultClient, "http://"+addr+"/debug/pprof/goroutine?debug=1"); code != http.StatusOK {
		t.Errorf("pprof listener: status %d", code)
	}
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1"} {
		if code := get(g.httpc, g.base+p); code == http.StatusOK {
			t.Errorf("the API listener serves %s", p)
		}
	}
	sock := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", g.cfg.Listen.Socket)
	}}}
	if code := get(sock, "http://airlock/debug/pprof/"); code == http.StatusOK {
		t.Error("the agents' socket serves /debug/pprof/")
	}
}

// TestTracingChecksItsTokenFile: an OTLP token file others may read, or
// one that is not one token on one line, stops the gateway from starting
// instead of being sent.
func TestTracingChecksItsTokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose")
	os.WriteFile(loose, []byte("otlp-bearer\n"), 0o600)
	os.Chmod(loose, 0o644)
	two := filepath.Join(dir, "two")
	os.WriteFile(two, []byte("a\nb\n"), 0o600)
	for name, file := range map[string]string{"world-readable": loose, "two lines": two} {
		if _, err := newTracing(&config.Telemetry{OTLPEndpoint: "http://127.0.0.1:4318", OTLPTokenFile: file, ServiceName: "airlock", SampleRatio: 1},
			hclog.NewNullLogger()); err == nil {
			t.Errorf("%s token file: accepted", name)
		}
	}
}
