// Package idp runs a real OpenID provider for tests: the OpenID-certified
// op package of zitadel/oidc with its example login pages, on a local
// TLS listener. Tests register workloads (clients that get a signed JWT
// with the client credentials grant, like a CI job's identity token) and
// users with groups (who log in through the provider's pages), and can
// rotate the signing key the provider publishes.
package idp

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// Provider is a running OpenID provider.
type Provider struct {
	// Issuer is its issuer URL (https://127.0.0.1:PORT).
	Issuer string
	// CAFile is a PEM file holding the certificate its TLS listener
	// presents: the trust a relying party needs.
	CAFile string

	srv *httptest.Server
	st  *store
}

// Workload is a client of the client credentials grant whose access
// token is a JWT with these claims.
type Workload struct {
	Secret   string
	Subject  string
	Audience []string
	// Claims are added to the token (repository, ref, …).
	Claims map[string]any
	// Lifetime is how long the token is valid from now; a negative one
	// makes a token that has already expired. Zero: five minutes.
	Lifetime time.Duration
}

// User is someone who logs in on the provider's page.
type User struct {
	Password string
	Email    string
	Groups   []string
}

// DeviceClient is a client of the device authorization grant, known
// from the start.
type DeviceClient struct{ ID, Secret string }

// Start runs a provider until the test ends, with the device clients
// given.
func Start(t testing.TB, devices ...DeviceClient) *Provider {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	issuer := srv.URL
	st := &store{workloads: map[string]Workload{}, users: &users{byName: map[string]*storage.User{}, groups: map[string][]string{}, names: map[string]string{}}}
	// The example storage keeps device logins only for clients in its
	// own map, which it reads without the store's lock: they are all
	// there before the provider serves.
	embedded := map[string]*storage.Client{}
	for _, d := range devices {
		c := storage.DeviceClient(d.ID, d.Secret)
		embedded[d.ID] = c
		st.addClient(c, d.Secret)
	}
	st.Storage = storage.NewStorageWithClients(st.users, embedded)
	st.rotate(false)
	router := exampleop.SetupServer(issuer, st, nil, false)
	srv.Config.Handler = router
	p := &Provider{Issuer: issuer, srv: srv, st: st}
	p.CAFile = filepath.Join(t.TempDir(), "idp-ca.pem")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(p.CAFile, block, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Client is an HTTP client that trusts the provider.
func (p *Provider) Client() *http.Client { return p.srv.Client() }

// AddWorkload registers a workload under the client id id.
func (p *Provider) AddWorkload(id string, w Workload) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.workloads[id] = w
}

// AddUser registers a user who logs in as name (the subject of its
// tokens is name too).
func (p *Provider) AddUser(name string, u User) {
	p.st.users.add(name, u)
}

// Rename makes the provider send the user id (whose subject stays id)
// with the preferred_username name from its next login on: a person
// whose name claim changed.
func (p *Provider) Rename(id, name string) {
	p.st.users.mu.Lock()
	defer p.st.users.mu.Unlock()
	p.st.users.names[id] = name
}

// SetGroups replaces the groups the provider sends for the user id from
// its next login on.
func (p *Provider) SetGroups(id string, groups ...string) {
	p.st.users.mu.Lock()
	defer p.st.users.mu.Unlock()
	p.st.users.groups[id] = append([]string{}, groups...)
}

// AddWebClient registers a confidential client of the authorization code
// flow.
func (p *Provider) AddWebClient(id, secret string, redirectURIs ...string) {
	p.st.addClient(storage.WebClient(id, secret, redirectURIs...), secret)
}

// ApproveDevice does what a reviewer does in a browser for a device
// login: opens the verification page with the user code, logs in as
// user and allows (or denies) it.
func (p *Provider) ApproveDevice(t testing.TB, userCode, user, password string, allow bool) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Transport: p.srv.Client().Transport, Jar: jar}
	resp, err := c.PostForm(p.Issuer+"/device/login", url.Values{"user_code": {userCode}, "username": {user}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Allow") {
		t.Fatalf("idp: device login as %s: %s: %.300s", user, resp.Status, body)
	}
	action := "denied"
	if allow {
		action = "allowed"
	}
	resp, err = c.Get(p.Issuer + "/device/confirm?action=" + action)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "Device authorization "+action) {
		t.Fatalf("idp: confirming the device login: %s: %.300s", resp.Status, body)
	}
}

// SPKI is the base64 SHA-256 of the public key of the provider's TLS
// certificate, for a browser told to trust exactly that key
// (--ignore-certificate-errors-spki-list).
func (p *Provider) SPKI() string {
	sum := sha256.Sum256(p.srv.Certificate().RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Rotate makes a new signing key; keepOld keeps publishing the old one
// (a rotation with overlap), else the old key disappears from the key
// set at once.
func (p *Provider) Rotate(keepOld bool) { p.st.rotate(keepOld) }

// Token gets a workload's JWT with the client credentials grant, as a CI
// job's runner would.
func (p *Provider) Token(t testing.TB, id string) string {
	t.Helper()
	p.st.mu.Lock()
	w, ok := p.st.workloads[id]
	p.st.mu.Unlock()
	if !ok {
		t.Fatalf("idp: no workload %q", id)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"}}
	req, err := http.NewRequest(http.MethodPost, p.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(w.Secret))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := p.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("idp: token for %q: %s: %s", id, resp.Status, body)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
		t.Fatalf("idp: token for %q: %s", id, body)
	}
	return tr.AccessToken
}

// store is the example storage with the parts tests steer: signing keys,
// workloads, users with groups.
type store struct {
	*storage.Storage
	users *users

	mu        sync.Mutex
	keys      []*key // keys[0] signs; all are published
	workloads map[string]Workload
	clients   map[string]op.Client
	secrets   map[string]string
}

func (s *store) addClient(c op.Client, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clients == nil {
		s.clients, s.secrets = map[string]op.Client{}, map[string]string{}
	}
	s.clients[c.GetID()], s.secrets[c.GetID()] = c, secret
}

// AuthorizeClientIDSecret checks a registered client's secret.
func (s *store) AuthorizeClientIDSecret(ctx context.Context, id, secret string) error {
	s.mu.Lock()
	want, ok := s.secrets[id]
	s.mu.Unlock()
	if !ok {
		return s.Storage.AuthorizeClientIDSecret(ctx, id, secret)
	}
	if want != secret {
		return fmt.Errorf("wrong client secret")
	}
	return nil
}

func (s *store) rotate(keepOld bool) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	nk := &key{id: fmt.Sprintf("key-%d-%s", len(s.keys)+1, rand.Text()[:8]), priv: k}
	if keepOld {
		s.keys = append([]*key{nk}, s.keys...)
	} else {
		s.keys = []*key{nk}
	}
}

func (s *store) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[0], nil
}

func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *store) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]op.Key, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, publicKey{k})
	}
	return out, nil
}

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	c, ok := s.clients[id]
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	return s.Storage.GetClientByClientID(ctx, id)
}

func (s *store) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.workloads[id]
	if !ok || w.Secret != secret {
		return nil, fmt.Errorf("wrong client id or secret")
	}
	return serviceClient(id), nil
}

func (s *store) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.workloads[id]
	if !ok {
		return nil, fmt.Errorf("no workload %q", id)
	}
	return &workloadRequest{w: w, scopes: scopes}, nil
}

// workloadRequest is a workload's token request.
type workloadRequest struct {
	w      Workload
	scopes []string
}

func (r *workloadRequest) GetSubject() string    { return r.w.Subject }
func (r *workloadRequest) GetAudience() []string { return r.w.Audience }
func (r *workloadRequest) GetScopes() []string   { return r.scopes }

// workloadOf returns the workload whose token request this is.
func (s *store) workloadOf(r op.TokenRequest) (Workload, bool) {
	if wr, ok := r.(*workloadRequest); ok {
		return wr.w, true
	}
	return Workload{}, false
}

func (s *store) CreateAccessToken(ctx context.Context, r op.TokenRequest) (string, time.Time, error) {
	w, ok := s.workloadOf(r)
	if !ok {
		return s.Storage.CreateAccessToken(ctx, r)
	}
	life := w.Lifetime
	if life == 0 {
		life = 5 * time.Minute
	}
	return rand.Text(), time.Now().Add(life), nil
}

// GetPrivateClaimsFromRequest puts a workload's claims in its token.
func (s *store) GetPrivateClaimsFromRequest(ctx context.Context, r op.TokenRequest, scopes []string) (map[string]any, error) {
	if w, ok := s.workloadOf(r); ok {
		return maps.Clone(w.Claims), nil
	}
	return s.GetPrivateClaimsFromScopes(ctx, r.GetSubject(), "", scopes)
}

// GetPrivateClaimsFromScopes puts a user's groups in its tokens.
func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil {
		return nil, err
	}
	if g, name := s.users.groupsOf(userID); g != nil {
		if claims == nil {
			claims = map[string]any{}
		}
		claims["groups"] = g
		claims["preferred_username"] = name
		claims["email"] = s.users.GetUserByID(userID).Email
	}
	return claims, nil
}

// SetUserinfoFromScopes puts a user's name and groups in its ID token.
func (s *store) SetUserinfoFromScopes(ctx context.Context, ui *oidc.UserInfo, userID, clientID string, scopes []string) error {
	if err := s.Storage.SetUserinfoFromScopes(ctx, ui, userID, clientID, scopes); err != nil {
		return err
	}
	s.users.addClaims(ui, userID)
	return nil
}

// SetUserinfoFromToken puts them in the userinfo answer too.
func (s *store) SetUserinfoFromToken(ctx context.Context, ui *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, ui, tokenID, subject, origin); err != nil {
		return err
	}
	s.users.addClaims(ui, subject)
	return nil
}

type key struct {
	id   string
	priv *rsa.PrivateKey
}

func (k *key) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *key) Key() any                                    { return k.priv }
func (k *key) ID() string                                  { return k.id }

type publicKey struct{ k *key }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return &p.k.priv.PublicKey }

// serviceClient is a workload's client: client credentials only, JWT
// access tokens.
type serviceClient string

func (c serviceClient) GetID() string                     { return string(c) }
func (serviceClient) RedirectURIs() []string              { return nil }
func (serviceClient) PostLogoutRedirectURIs() []string    { return nil }
func (serviceClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (serviceClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (serviceClient) ResponseTypes() []oidc.ResponseType  { return nil }
func (serviceClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (serviceClient) LoginURL(string) string               { return "" }
func (serviceClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (serviceClient) IDTokenLifetime() time.Duration       { return 5 * time.Minute }
func (serviceClient) DevMode() bool                        { return false }
func (serviceClient) IsScopeAllowed(string) bool           { return true }
func (serviceClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (serviceClient) ClockSkew() time.Duration             { return 0 }
func (serviceClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (serviceClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// users is the provider's user store.
type users struct {
	mu     sync.Mutex
	byName map[string]*storage.User
	groups map[string][]string
	// names are the preferred_username claims that are not the id.
	names map[string]string
}

func (u *users) add(name string, in User) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.byName[name] = &storage.User{ID: name, Username: name, Password: in.Password, FirstName: name, LastName: "Tester",
		Email: in.Email, EmailVerified: true, PreferredLanguage: language.English}
	u.groups[name] = append([]string{}, in.Groups...)
}

// addClaims adds a known user's preferred_username and groups.
func (u *users) addClaims(ui *oidc.UserInfo, id string) {
	if g, name := u.groupsOf(id); g != nil {
		ui.AppendClaims("groups", g)
		ui.AppendClaims("preferred_username", name)
	}
}

// groupsOf returns a known user's groups and preferred_username.
func (u *users) groupsOf(id string) ([]string, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	g, ok := u.groups[id]
	if !ok {
		return nil, ""
	}
	if n, ok := u.names[id]; ok {
		return g, n
	}
	return g, id
}

func (u *users) GetUserByID(id string) *storage.User {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.byName[id]
}

func (u *users) GetUserByUsername(name string) *storage.User { return u.GetUserByID(name) }
func (u *users) ExampleClientID() string                     { return "service" }
