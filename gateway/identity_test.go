package gateway

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/gatewaytest/idp"
	"github.com/airlockgw/airlock/sshexec"
)

// A remote agent proves a workload identity with a JWT of an issuer an
// agent block names — here a real OpenID provider over TLS, with
// discovery and a published key set. The token must be for the
// gateway's audience, unexpired, carry the required claims; the run's
// requester is the agent and the token's subject; the block's limits
// bind the run; and a key rotation at the issuer does not stop agents.
func TestWorkloadIdentityAgents(t *testing.T) {
	t.Parallel()
	p, other := idp.Start(t), idp.Start(t)
	good := idp.Workload{Secret: "s3cret", Subject: "repo:acme/app:ref:refs/heads/main", Audience: []string{"airlock"},
		Claims: map[string]any{"repository": "acme/app", "ref": "refs/heads/main"}}
	p.AddWorkload("main", good)
	other.AddWorkload("main", good)
	w := good
	w.Audience = []string{"another-service"}
	p.AddWorkload("wrong-audience", w)
	w = good
	w.Lifetime = -time.Minute
	p.AddWorkload("expired", w)
	w = good
	w.Claims = map[string]any{"repository": "evil/app", "ref": "refs/heads/main"}
	p.AddWorkload("fork", w)
	w = good
	w.Subject = "repo:acme/app\u202e:ref:main"
	p.AddWorkload("hostile-subject", w)

	extra := fmt.Sprintf(`
agent "ci" {
  limits = ["box-run"]
  oidc {
    issuer          = %q
    audience        = "airlock"
    required_claims = { repository = "acme/app" }
    ca_file         = %q
  }
}
`, p.Issuer, p.CAFile)
	g := startGateway(t, sharedSSHD(t), gwOptions{extraConfig: extra})
	ctx := context.Background()
	anon := api.NewHTTPClient(g.base, "")

	run, err := anon.WithBearer(p.Token(t, "main")).CreateRun(ctx)
	if err != nil {
		t.Fatalf("a valid workload token: %v", err)
	}
	if want := "agent:ci/" + good.Subject; run.Requester != want {
		t.Errorf("requester %q, want %q", run.Requester, want)
	}
	agent := api.NewHTTPClient(g.base, run.Token)
	out, err := agent.RunAction(ctx, api.ActionRequest{Target: "box-call", Command: "id"}, api.Events{})
	if err != nil || out.Outcome != sshexec.Rejected || !strings.Contains(out.Detail, "do not cover this target or account") {
		t.Errorf("outside the agent block's limits: %v %+v", err, out)
	}
	done := make(chan *api.Action, 1)
	go func() {
		a, _ := agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "echo from-ci"}, api.Events{})
		done <- a
	}()
	req := g.decideNext("run", "approve", "")
	if req.Requester != "agent:ci/"+good.Subject {
		t.Errorf("the reviewer sees requester %q", req.Requester)
	}
	if a := <-done; a == nil || !a.Success() || a.Stdout != "from-ci\n" {
		t.Errorf("an action of the workload's run: %+v", a)
	}

	for _, c := range []struct{ name, token, want string }{
		{"wrong audience", p.Token(t, "wrong-audience"), "audience"},
		{"expired", p.Token(t, "expired"), "expired"},
		{"missing claim", p.Token(t, "fork"), `claim "repository" is not "acme/app"`},
		{"wrong issuer", other.Token(t, "main"), "is no agent's"},
		{"hostile subject", p.Token(t, "hostile-subject"), "characters a requester may not"},
		{"tampered", tamper(p.Token(t, "main")), "signature"},
	} {
		_, err := anon.WithBearer(c.token).CreateRun(ctx)
		var apiErr *api.Error
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized || !strings.Contains(apiErr.Err.Message, c.want) {
			t.Errorf("%s: %v, want 401 saying %q", c.name, err, c.want)
		}
	}

	// The issuer rotates its key and drops the old one: new tokens name
	// a key the gateway has not seen; it fetches the key set again.
	p.Rotate(false)
	if _, err := anon.WithBearer(p.Token(t, "main")).CreateRun(ctx); err != nil {
		t.Errorf("after a key rotation at the issuer: %v", err)
	}

	// An agent token of the same name is held to the block's limits
	// too: one whose own limits leave none of them creates no run.
	tok, err := g.srv.eng.Admin().AddAgent(ctx, "ci", []string{"box-call"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = anon.WithBearer(tok.Token).CreateRun(ctx)
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden || !strings.Contains(apiErr.Err.Message, "no target in common") {
		t.Errorf("a token outside its agent block's limits: %v", err)
	}
	tok, err = g.srv.eng.Admin().AddAgent(ctx, "ci", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if run, err := anon.WithBearer(tok.Token).CreateRun(ctx); err != nil || len(run.Limits) != 1 || run.Limits[0] != "box-run" {
		t.Errorf("a token without limits of an agent with a block: %+v %v, want the block's limits", run, err)
	}
}

// tamper changes one claim of a JWT without re-signing it.
func tamper(jwt string) string {
	parts := strings.Split(jwt, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	payload = []byte(strings.Replace(string(payload), "acme/app", "acme/apq", 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}

// A remote agent with a client certificate of the operator's CA, on the
// TLS listener: the agent block whose mtls.subjects names it, its runs
// named after the certificate. Each subject matches the certificate's
// names of its own type alone: a common name never stands for a DNS name
// or a SPIFFE ID, a DNS name never for a URI. A certificate no block
// names, one two blocks name, or one of another CA creates no run; an
// operator told by the refusal to write a cn: entry gets the run, named
// cn:NAME so that it never reads as a DNS name.
func TestClientCertificateAgents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t, "airlock agents CA")
	rogue := newTestCA(t, "someone else's CA")
	serverCert, serverKey := ca.issue(t, dir, certNames{cn: "gateway"}, true)
	runnerCert, runnerKey := ca.issue(t, dir, certNames{cn: "runner-1.ci.example", dns: []string{"RUNNER-1.ci.example"}}, false)
	rogueCert, rogueKey := rogue.issue(t, dir, certNames{cn: "runner-1.ci.example", dns: []string{"runner-1.ci.example"}}, false)

	extra := `
agent "runner" {
  limits = ["box-run"]
  mtls {
    subjects = ["runner-1.ci.example", "spiffe://ci.example/runner-2"]
  }
}
agent "builder" {
  mtls {
    subjects = ["uri:https://build.ci.example/builder"]
  }
}
`
	g := startGateway(t, sharedSSHD(t), gwOptions{extraConfig: extra, tls: &tlsFiles{serverCert, serverKey, ca.file}})
	ctx := context.Background()
	as := func(cert, key string) *api.Client {
		return api.NewHTTPClient(g.base, "").WithHTTP(tlsClient(t, ca.file, &[2]string{cert, key}))
	}
	runAs := func(cert, key, requester string) {
		t.Helper()
		run, err := as(cert, key).CreateRun(ctx)
		if err != nil {
			t.Fatalf("%s: %v", requester, err)
		}
		if run.Requester != requester {
			t.Errorf("requester %q, want %q", run.Requester, requester)
		}
		agent := api.NewHTTPClient(g.base, run.Token).WithHTTP(g.httpc)
		done := make(chan *api.Action, 1)
		go func() {
			a, _ := agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "echo over-mtls"}, api.Events{})
			done <- a
		}()
		if req := g.decideNext("run", "approve", ""); req.Requester != requester {
			t.Errorf("the reviewer sees requester %q, want %q", req.Requester, requester)
		}
		if a := <-done; a == nil || !a.Success() || a.Stdout != "over-mtls\n" {
			t.Errorf("an action of %s's run: %+v", requester, a)
		}
	}
	created := func(n certNames) (*api.Run, error) {
		cert, key := ca.issue(t, dir, n, false)
		return as(cert, key).CreateRun(ctx)
	}

	runAs(runnerCert, runnerKey, "agent:runner/runner-1.ci.example") // its DNS name, whatever its case
	for n, want := range map[*certNames]string{
		{cn: "runner-2", uris: []string{"spiffe://ci.example/runner-2"}}:           "agent:runner/spiffe://ci.example/runner-2",
		{uris: []string{"https://build.ci.example/builder"}}:                       "agent:builder/https://build.ci.example/builder",
		{cn: "spiffe://ci.example/runner-2", dns: []string{"runner-1.ci.example"}}: "agent:runner/runner-1.ci.example",
	} {
		if run, err := created(*n); err != nil || run.Requester != want {
			t.Errorf("a certificate with %+v: %+v %v, want requester %q", *n, run, err, want)
		}
	}

	for _, c := range refusedCertificates {
		run, err := created(c.names)
		var apiErr *api.Error
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized || !strings.Contains(apiErr.Err.Message, c.says) {
			t.Errorf("%s: %+v %v, want 401 saying %q", c.name, run, err, c.says)
		}
	}
	// The operator learns what to write from the log.
	if logs := g.logs.String(); !strings.Contains(logs, "agent=runner") || !strings.Contains(logs, "write=cn:runner-1.ci.example") {
		t.Errorf("no log line names the cn: entry to write:\n%s", logs)
	}
	_, err := api.NewHTTPClient(g.base, "").WithHTTP(g.httpc).CreateRun(ctx)
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
		t.Errorf("no certificate at all: %v", err)
	}
	// A certificate of another CA: the handshake fails (the listener
	// asked for its CA's), or the request is anonymous — never a run.
	if run, err := as(rogueCert, rogueKey).CreateRun(ctx); err == nil {
		t.Errorf("another CA's certificate created run %+v", run)
	}

	// The operator writes the cn: entry and reloads: the certificate with
	// a common name alone is the agent, recorded as cn:NAME; the one with
	// the DNS name stays its DNS name.
	src, err := os.ReadFile(g.cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	upgraded := strings.Replace(string(src), `"runner-1.ci.example",`, `"runner-1.ci.example", "cn:runner-1.ci.example",`, 1)
	if err := os.WriteFile(g.cfg.Path, []byte(upgraded), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.srv.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	cnCert, cnKey := ca.issue(t, dir, certNames{cn: "runner-1.ci.example"}, false)
	runAs(cnCert, cnKey, "agent:runner/cn:runner-1.ci.example")
	if run, err := as(runnerCert, runnerKey).CreateRun(ctx); err != nil || run.Requester != "agent:runner/runner-1.ci.example" {
		t.Errorf("a certificate with both the DNS and the common name: %+v %v", run, err)
	}
	// A subject with two common names matches no cn: entry, whichever
	// one a parser keeps.
	if run, err := created(certNames{cn: "stranger", moreCN: []string{"runner-1.ci.example"}}); err == nil {
		t.Errorf("a certificate with two common names created run %+v", run)
	}
}

// refusedCertificates are client certificates of the CA that
// TestClientCertificateAgents's agents must refuse, and what the refusal
// must say.
var refusedCertificates = []struct {
	name  string
	names certNames
	says  string
}{
	{"no agent's names", certNames{cn: "stranger", dns: []string{"stranger.ci.example"}}, `cn:"stranger", dns:"stranger.ci.example"`},
	{"a common name that reads as a SPIFFE ID", certNames{cn: "spiffe://ci.example/runner-2"}, "is no agent's"},
	{"a common name that reads as a DNS name", certNames{cn: "runner-1.ci.example"}, `a "cn:runner-1.ci.example" entry alone`},
	{"a DNS name that reads as a SPIFFE ID", certNames{dns: []string{"spiffe://ci.example/runner-2"}}, "is no agent's"},
	{"a DNS name that reads as a uri: subject", certNames{dns: []string{"https://build.ci.example/builder"}}, "is no agent's"},
	{"a SPIFFE ID that reads as a DNS name", certNames{uris: []string{"spiffe://runner-1.ci.example"}}, "is no agent's"},
	{"two agents' names", certNames{uris: []string{"spiffe://ci.example/runner-2", "https://build.ci.example/builder"}}, "more than one agent"},
}

// tlsClient trusts the CA in caFile and presents the certificate pair, if
// any.
func tlsClient(t testing.TB, caFile string, pair *[2]string) *http.Client {
	t.Helper()
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("no certificate in %s", caFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if pair != nil {
		c, err := tls.LoadX509KeyPair(pair[0], pair[1])
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: time.Minute}
}

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, file: file}
}

// certNames are the names a test certificate carries.
type certNames struct {
	cn     string
	moreCN []string // further common name attributes, after cn
	dns    []string
	uris   []string
}

// issue writes a certificate with names n (a server one, also for
// 127.0.0.1, or a client one) and its key, and returns their files.
func (ca *testCA) issue(t testing.TB, dir string, n certNames, server bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: n.cn}, DNSNames: n.dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	if len(n.moreCN) > 0 { // ExtraNames replace the CommonName field
		n.moreCN = append([]string{n.cn}, n.moreCN...)
	}
	for _, cn := range n.moreCN {
		tmpl.Subject.ExtraNames = append(tmpl.Subject.ExtraNames, pkix.AttributeTypeAndValue{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: cn})
	}
	for _, s := range n.uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, serial.String())
	certFile, keyFile = base+".crt", base+".key"
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// A reviewer who follows an action's events loses the stream the moment
// an operator disables the account — not at the next heartbeat, not when
// the action ends — and every later request with its token is refused.
func TestDisabledReviewerLosesItsStreamAtOnce(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	ctx := context.Background()
	const pw = "rita's long enough password"
	if err := g.srv.eng.Admin().ChangeReviewer(ctx, engine.ReviewerAdd, "rita", engine.NewSecret(pw), "test"); err != nil {
		t.Fatal(err)
	}
	l, err := api.NewHTTPClient(g.base, "").Login(ctx, "rita", pw)
	if err != nil {
		t.Fatal(err)
	}
	rita := api.NewHTTPClient(g.base, l.Token)

	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	ids := make(chan string, 1)
	go g.agent.RunAction(actx, api.ActionRequest{Target: "box-run", Command: "sleep 300"}, api.Events{State: func(s api.StateEvent) {
		select {
		case ids <- s.ActionID:
		default:
		}
	}})
	id := <-ids
	g.decideNext("run", "approve", "")

	following := make(chan struct{}, 1)
	ended := make(chan error, 1)
	go func() {
		_, err := rita.WaitAction(ctx, id, api.Events{State: func(api.StateEvent) {
			select {
			case following <- struct{}{}:
			default:
			}
		}})
		ended <- err
	}()
	<-following
	if err := g.srv.eng.Admin().ChangeReviewer(ctx, engine.ReviewerDisable, "rita", engine.Secret{}, "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Err.Code != api.CodeUnauthorized || !strings.Contains(ae.Err.Message, "session ended") {
			t.Errorf("the stream ended with %v, want the session's end", err)
		}
	case <-time.After(testkit.Patience):
		t.Fatal("a disabled reviewer still follows the action")
	}
	if _, err := rita.Approvals(ctx, "pending"); err == nil {
		t.Error("a disabled reviewer's token still works")
	}
}
