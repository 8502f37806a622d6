package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec"
)

// secretStdin makes the secret the request names the action's standard
// input, when its block grants it to the account; problem says why not.
func (l *lifecycle) secretStdin() (problem string) {
	name := l.req.Secret
	sc, ok := l.conf.cfg.Secrets[name]
	switch {
	case l.req.Stdin != "":
		return "a secret and stdin cannot both be sent: the secret is the command's standard input"
	case !ok:
		return fmt.Sprintf("no secret %q is configured on this gateway", clip(name, 64))
	}
	grant, ok := sc.GrantFor(l.target.Name, l.account.Name)
	if !ok {
		return fmt.Sprintf("secret %q is not granted to account %q of target %q", name, l.account.Name, l.target.Name)
	}
	value := l.conf.secrets[name]
	if int64(len(value)) > l.account.MaxStdin {
		return fmt.Sprintf("secret %q is %d bytes, over the account's max_stdin of %d bytes", name, len(value), l.account.MaxStdin)
	}
	l.secret, l.grant, l.stdin = name, grant, value
	l.mask = newSecretMask(name, value)
	return ""
}

// maskedValue is a secret's value as the output mask and the check of a
// get look for it: without a trailing line end (which a command reading
// it drops as often as not).
func maskedValue(v []byte) []byte { return bytes.TrimRight(v, "\r\n") }

// getScan is the check of a get's bytes for the values of the secrets
// granted to any account of the action's target — those the gateway may
// have delivered there, in this action's account or another, whose
// values the output mask hides — in the order of their names; nil when
// there are none.
func (l *lifecycle) getScan() *secretScan {
	var s secretScan
	for _, name := range slices.Sorted(maps.Keys(l.conf.cfg.Secrets)) {
		for _, g := range l.conf.cfg.Secrets[name].Grants {
			if v := maskedValue(l.conf.secrets[name]); g.Target == l.target.Name && len(v) > 0 {
				s.names, s.values = append(s.names, name), append(s.values, v)
				break
			}
		}
	}
	if len(s.values) == 0 {
		return nil
	}
	return &s
}

// secretEscalation says, for reviewers and the agent, why an action that
// receives the gateway-held secret name asks a call approval of its own.
func secretEscalation(name string) string {
	return "it receives the gateway-held secret " + name + " on its standard input, and an action that uses a secret " +
		"is always asked on its own: no run approval, grant or allow_unreviewed covers it, since a command can pass " +
		"the value on in a form the output mask does not catch (base64, rev, a file)"
}

// stdinFacts describes the standard input for reviewers and the digest:
// nothing for a secret, which the digest binds by name.
func (l *lifecycle) stdinFacts() *approvals.Stdin {
	switch {
	case l.xfer != nil:
		return l.uploaded // a put's bytes; nil for a get
	case l.secret != "":
		return nil
	}
	return stdinFacts(l.stdin)
}

// signerFor returns the credential of an account: its key, or a fresh
// key with a certificate for this one action, described for the audit log;
// a jump host's certificate permits port forwarding (and nothing else).
func (l *loaded) signerFor(a *config.Account, actionID string, serial uint64, timeout time.Duration, jump bool) (ssh.Signer, *certIssued, error) {
	cred := l.cfg.Credentials[a.Credential]
	if cred != nil && cred.CA {
		cert, err := deploy.NewActionCert(l.ca, deploy.CertRequest{
			ActionID: actionID, Account: a.Name, Serial: serial, Timeout: timeout,
			ForceCommand: cred.ForceCommand, SourceAddress: cred.SourceAddress, PortForwarding: jump,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("the certificate for this action could not be made: %v", err)
		}
		return cert.Signer, &certIssued{KeyID: cert.KeyID, Serial: cert.Serial, ValidBefore: cert.ValidBefore}, nil
	}
	signer, ok := l.signers[a.Credential]
	if !ok {
		return nil, nil, fmt.Errorf("credential %q of account %q is not usable", a.Credential, a.Name)
	}
	return signer, nil, nil
}

// hostKeysOf returns the host keys a target is trusted with.
func hostKeysOf(t *config.Target) sshexec.HostKeys {
	hk := sshexec.HostKeys{Pinned: t.HostKeys}
	if t.KnownHostsFile != "" {
		hk.KnownHostsFiles = []string{t.KnownHostsFile}
	}
	return hk
}

// credentials are what the action signs in with: the account's signer and
// each jump host's, described for action.connecting; false: the action has
// ended (rejected). A per-action certificate names the action (key ID) and
// its action.requested entry (serial), so the target's sshd log points
// into the chain.
func (l *lifecycle) credentials(ctx context.Context) (ssh.Signer, []sshexec.Hop, actionConnecting, bool) {
	signer, cert, err := l.conf.signerFor(l.account, l.a.id, uint64(l.requested.Seq), l.timeout, false)
	if err != nil {
		l.end(ctx, sshexec.Rejected, err.Error(), 0)
		return nil, nil, actionConnecting{}, false
	}
	connecting := actionConnecting{Address: l.target.Address, Account: l.account.Name, Credential: l.account.Credential, Cert: cert}
	// Each jump host with its own credential: a certificate per hop for
	// a ca = true one, naming the same action.
	hops, hopAccounts := l.conf.cfg.Route(l.target)
	via := make([]sshexec.Hop, len(hops))
	var route []string
	for i, h := range hops {
		hs, hc, err := l.conf.signerFor(hopAccounts[i], l.a.id, uint64(l.requested.Seq), l.timeout, true)
		if err != nil {
			l.end(ctx, sshexec.Rejected, "jump host "+h.Name+": "+err.Error(), 0)
			return nil, nil, actionConnecting{}, false
		}
		via[i] = sshexec.Hop{Name: h.Name, Addr: h.Address, User: hopAccounts[i].Name, Signers: []ssh.Signer{hs}, HostKeys: hostKeysOf(h)}
		hop := hopAccounts[i].Name + "@" + h.Name + " " + h.Address
		if hc != nil {
			hop += fmt.Sprintf(" (certificate %s serial %d valid before %s)", hc.KeyID, hc.Serial, hc.ValidBefore.UTC().Format(time.RFC3339))
		}
		route = append(route, hop)
	}
	connecting.Via = strings.Join(route, ", ")
	return signer, via, connecting, true
}

// stdinFacts describes standard input for reviewers and the digest.
func stdinFacts(b []byte) *approvals.Stdin {
	if b == nil {
		return nil
	}
	in := &approvals.Stdin{Size: int64(len(b)), SHA256: sha256.Sum256(b)}
	if len(b) <= approvals.MaxStdinText && utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		in.Text = string(b)
	}
	return in
}
