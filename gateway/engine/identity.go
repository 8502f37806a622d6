package engine

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/config"
)

// workload verifies the workload identity tokens of one agent block with
// an oidc block.
type workload struct {
	agent *config.Agent
	*discovery
}

// discovery is an OpenID provider found on first use (discovery), so
// that a gateway starts while an issuer is down; the key set it holds
// fetches the issuer's keys again when a token names a key it does not
// know (key rotation).
type discovery struct {
	issuer string
	client *http.Client

	mu       sync.Mutex
	provider *oidc.Provider
	// failedAt and failure keep a failed discovery for a few seconds, so
	// that a burst of requests does not become a burst of fetches.
	failedAt time.Time
	failure  error
}

// newDiscovery is the provider at issuer, trusting caFile alone for its
// TLS certificate when set (else the system's roots).
func newDiscovery(issuer, caFile string) (*discovery, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pool, err := config.LoadCertPool(caFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &discovery{issuer: issuer, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}, nil
}

// get returns the provider, discovering it the first time.
func (d *discovery) get(ctx context.Context, now time.Time) (*oidc.Provider, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.provider != nil {
		return d.provider, nil
	}
	if d.failure != nil && now.Sub(d.failedAt) < discoveryRetry {
		return nil, d.failure
	}
	// The provider keeps the context for the key set's later fetches:
	// without cancel, with the client that trusts the issuer.
	p, err := oidc.NewProvider(d.context(context.WithoutCancel(ctx)), d.issuer)
	if err != nil {
		d.failedAt, d.failure = now, err
		return nil, err
	}
	d.provider, d.failure = p, nil
	return p, nil
}

// context carries the client that trusts the issuer, for go-oidc and
// oauth2 to use.
func (d *discovery) context(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, d.client)
}

// discoveryRetry is how long a failed discovery is remembered.
const discoveryRetry = 5 * time.Second

// newWorkloads makes the verifiers of the configuration's oidc blocks.
func newWorkloads(cfg *config.Config) (map[string]*workload, error) {
	out := map[string]*workload{}
	for name, a := range cfg.Agents {
		if a.OIDC == nil {
			continue
		}
		d, err := newDiscovery(a.OIDC.Issuer, a.OIDC.CAFile)
		if err != nil {
			return nil, fmt.Errorf("agent %q: oidc.%w", name, err)
		}
		out[name] = &workload{agent: a, discovery: d}
	}
	return out, nil
}

// verifierFor returns the block's verifier, discovering the issuer the
// first time.
func (w *workload) verifierFor(ctx context.Context, now time.Time) (*oidc.IDTokenVerifier, error) {
	p, err := w.get(ctx, now)
	if err != nil {
		return nil, err
	}
	return p.Verifier(&oidc.Config{ClientID: w.agent.OIDC.Audience}), nil
}

// CheckIdentityFiles reads the files the identity blocks name — issuers'
// CA files, the sso client secrets, listen.client_ca_file — as a gateway
// does at its start, and returns what would stop it (config check). The
// secret files are checked as files of account uid, the user the gateway
// runs as (-1: whoever runs this).
func CheckIdentityFiles(cfg *config.Config, uid int) []error {
	var errs []error
	if _, err := newWorkloads(cfg); err != nil {
		errs = append(errs, err)
	}
	if _, err := newSSOAs(&core{}, cfg, uid); err != nil {
		errs = append(errs, err)
	}
	if f := cfg.Listen.ClientCAFile; f != "" {
		if _, err := config.LoadCertPool(f); err != nil {
			errs = append(errs, fmt.Errorf("listen.client_ca_file: %w", err))
		}
	}
	return errs
}

// LooksLikeJWT reports whether a bearer credential has the shape of a
// JSON Web Token (three base64url segments), as a workload identity token
// does; airlock's own tokens never do.
func LooksLikeJWT(s string) bool {
	parts := strings.Split(s, ".")
	return len(parts) == 3 && strings.HasPrefix(s, "eyJ") && parts[1] != "" && parts[2] != ""
}

// unverifiedIssuer reads a JWT's iss claim without verifying anything:
// only to pick the agent blocks that may verify it.
func unverifiedIssuer(raw string) string {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Iss string `json:"iss"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return ""
	}
	return c.Iss
}

// VerifyWorkload returns the agent a workload identity token proves: the
// agent block whose oidc block's issuer signed it for its audience, not
// expired, with every required claim. The agent's subject is the token's
// subject claim. A token no agent block accepts is ErrUnauthorized,
// saying why; an issuer that cannot be reached is ErrUnavailable.
func (e *Identity) VerifyWorkload(ctx context.Context, raw string) (Agent, error) {
	iss := unverifiedIssuer(raw) // compared exactly, as OpenID Connect does
	workloads := e.conf().workloads
	var names []string
	for name, w := range workloads {
		if w.agent.OIDC.Issuer == iss {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return Agent{}, refuse(ErrUnauthorized, fmt.Sprintf("the bearer token's issuer %q is no agent's: an operator names it in an agent block's oidc.issuer", clip(iss, 200)))
	}
	slices.Sort(names)
	var why []string
	for _, name := range names {
		w := workloads[name]
		v, err := w.verifierFor(ctx, e.clock.Now())
		if err != nil {
			e.log.Warn("oidc discovery failed", "agent", name, "issuer", iss, "error", err)
			return Agent{}, refuse(ErrUnavailable, fmt.Sprintf("the issuer %s cannot be reached to verify the token; try again", iss))
		}
		a, err := w.check(ctx, v, raw)
		if err != nil {
			why = append(why, fmt.Sprintf("agent %q: %v", name, err))
			continue
		}
		a.CreatedAt = e.clock.Now()
		return Agent{a}, nil
	}
	e.log.Warn("workload identity token refused", "issuer", iss, "why", strings.Join(why, "; "))
	return Agent{}, refuse(ErrUnauthorized, "the workload identity token is not valid: "+strings.Join(why, "; "))
}

// check verifies one token against one agent block.
func (w *workload) check(ctx context.Context, v *oidc.IDTokenVerifier, raw string) (approvals.Agent, error) {
	tok, err := v.Verify(w.context(ctx), raw)
	if err != nil {
		return approvals.Agent{}, errors.New(strings.TrimPrefix(err.Error(), "oidc: "))
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return approvals.Agent{}, fmt.Errorf("its claims: %w", err)
	}
	o := w.agent.OIDC
	for _, k := range slices.Sorted(maps.Keys(o.RequiredClaims)) {
		if !claimHas(claims[k], o.RequiredClaims[k]) {
			return approvals.Agent{}, fmt.Errorf("claim %q is not %q", k, o.RequiredClaims[k])
		}
	}
	sub, _ := claims[o.SubjectClaim].(string)
	switch {
	case sub == "":
		return approvals.Agent{}, fmt.Errorf("the subject claim %q is missing or not a string", o.SubjectClaim)
	case !approvals.ValidSubject(sub):
		return approvals.Agent{}, fmt.Errorf("the subject claim %q holds characters a requester may not (letters, digits and . _ - : @ / + = ~, at most 200)", o.SubjectClaim)
	}
	return approvals.Agent{Name: w.agent.Name, Limits: w.agent.Limits, Via: "oidc", Verified: sub}, nil
}

// claimHas reports whether a claim's value is want, or a list holding it.
func claimHas(v any, want string) bool {
	switch v := v.(type) {
	case string:
		return v == want
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok && s == want {
				return true
			}
		}
	case bool, float64:
		return fmt.Sprint(v) == want
	}
	return false
}

// CertificateAgent returns the agent a verified client certificate is:
// the one agent block whose mtls.subjects lists one of the certificate's
// names, each subject compared with the certificate's names of its own
// type alone — a DNS name with its DNS names (ASCII case aside), a URI
// with its URIs, a cn: name with its common name — never across types.
// The verified subject is the subject matched (config.CertName.Subject);
// when one agent's subjects match several names, the first of its URIs,
// then DNS names, then common name, in the order they are listed.
// Refused (ErrUnauthorized): a certificate no block names, saying which
// names of which types it has; one that the subjects of two agents match.
func (e *Identity) CertificateAgent(cert *x509.Certificate) (Agent, error) {
	agents := e.conf().cfg.Agents
	var matched []string // "agent NAME as SUBJECT", for the refusal
	var found Agent
	for _, name := range slices.Sorted(maps.Keys(agents)) {
		a := agents[name]
		if a.MTLS == nil {
			continue
		}
		s, ok := certSubject(cert, a.MTLS.Subjects)
		if !ok {
			continue
		}
		matched = append(matched, fmt.Sprintf("agent %q as %q", name, s.Subject()))
		found = Agent{approvals.Agent{Name: name, Limits: a.Limits, Via: "mtls", Verified: s.Subject(), CreatedAt: e.clock.Now()}}
	}
	switch len(matched) {
	case 1:
		return found, nil
	case 0:
		return Agent{}, e.unnamedCertificate(cert, agents)
	}
	// Which agent it is would be an arbitrary pick: none.
	e.log.Warn("client certificate refused: the subjects of several agents name it; list each certificate's name in one agent block", "matches", strings.Join(matched, ", "), "serial", cert.SerialNumber.String())
	return Agent{}, refuse(ErrUnauthorized, fmt.Sprintf("the client certificate is more than one agent (%s): an operator lists each certificate's names in one agent block only", strings.Join(matched, ", ")))
}

// certSubject is the first of subjects the certificate has: URI names
// before DNS names before a common name, each type in the listed order.
func certSubject(cert *x509.Certificate, subjects []config.CertName) (config.CertName, bool) {
	for _, t := range []config.CertNameType{config.CertURI, config.CertDNS, config.CertCN} {
		for _, s := range subjects {
			if s.Type == t && certHas(cert, s) {
				return s, true
			}
		}
	}
	return config.CertName{}, false
}

// certHas reports whether the certificate carries n in the field of n's
// type.
func certHas(cert *x509.Certificate, n config.CertName) bool {
	switch n.Type {
	case config.CertDNS:
		return slices.ContainsFunc(cert.DNSNames, func(d string) bool { return lowerASCII(d) == n.Name })
	case config.CertURI:
		return slices.ContainsFunc(cert.URIs, func(u *url.URL) bool { return u.String() == n.Name })
	case config.CertCN:
		cns := commonNames(cert)
		return len(cns) == 1 && cns[0] == n.Name
	}
	return false
}

// commonNames are every common name attribute of the certificate's
// subject: a subject with two is matched by no cn: entry, rather than by
// whichever one the parser kept in Subject.CommonName.
func commonNames(cert *x509.Certificate) []string {
	var out []string
	for _, atv := range cert.Subject.Names {
		if s, ok := atv.Value.(string); ok && atv.Type.Equal(oidCommonName) {
			out = append(out, s)
		}
	}
	return out
}

// oidCommonName is the X.520 commonName attribute (2.5.4.3).
var oidCommonName = asn1.ObjectIdentifier{2, 5, 4, 3}

// lowerASCII lower-cases ASCII letters alone: no Unicode folding (the
// Kelvin sign is not a k), as DNS names compare (RFC 4343).
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// unnamedCertificate is the refusal of a certificate no agent block
// names, listing its names with their types. When its common name is
// what a dns: or uri: subject lists (a configuration written when common
// names matched any subject), the refusal and a log line say which cn:
// entry would name it.
func (e *Identity) unnamedCertificate(cert *x509.Certificate, agents map[string]*config.Agent) error {
	var names []string
	for _, cn := range commonNames(cert) {
		names = append(names, fmt.Sprintf("cn:%q", clip(cn, 100)))
	}
	for _, d := range cert.DNSNames {
		names = append(names, fmt.Sprintf("dns:%q", clip(d, 100)))
	}
	for _, u := range cert.URIs {
		names = append(names, fmt.Sprintf("uri:%q", clip(u.String(), 100)))
	}
	msg := fmt.Sprintf("the client certificate (%s) is no agent's: an operator names it in an agent block's mtls.subjects", strings.Join(names, ", "))
	if cns := commonNames(cert); len(cns) == 1 {
		for _, name := range slices.Sorted(maps.Keys(agents)) {
			a := agents[name]
			if a.MTLS == nil || !slices.ContainsFunc(a.MTLS.Subjects, func(s config.CertName) bool { return s.Type != config.CertCN && s.Name == cns[0] }) {
				continue
			}
			want := config.CertName{Type: config.CertCN, Name: cns[0]}
			e.log.Warn("client certificate refused: its common name matches a subject only of another type; a common name is matched by a cn: entry alone",
				"agent", name, "common_name", clip(cns[0], 200), "write", want.String())
			return refuse(ErrUnauthorized, fmt.Sprintf("%s; its common name is matched by a %q entry alone, not by a DNS name or URI", msg, want.String()))
		}
	}
	return refuse(ErrUnauthorized, msg)
}
