package sshexec

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeys says which host keys are trusted for a target. A key is accepted
// when it equals a pinned key or when the known_hosts files accept it for
// the dialed address; a key marked @revoked in a known_hosts file is
// refused whatever else trusts it. Nothing is ever learned or written: a
// key that is not already trusted is refused.
type HostKeys struct {
	// Pinned keys are trusted for this target whatever its address. Use
	// ParseHostKey to read them from authorized_keys-style lines.
	Pinned []ssh.PublicKey

	// KnownHostsFiles are OpenSSH known_hosts files, read at every Run so
	// that an operator's edit takes effect for the next action. Hashed
	// host names, "[host]:port" entries, patterns, @cert-authority and
	// @revoked lines are understood (see sshd(8), SSH_KNOWN_HOSTS FILE
	// FORMAT).
	KnownHostsFiles []string
}

// ParseHostKey parses one pinned host key written as in authorized_keys or
// a .pub file: "ssh-ed25519 AAAA… optional comment". Options before the key
// type are refused.
func ParseHostKey(line string) (ssh.PublicKey, error) {
	k, _, options, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return nil, fmt.Errorf("parse host key: %w", err)
	}
	if len(options) > 0 {
		return nil, fmt.Errorf("parse host key: unexpected options %q before the key", options)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, fmt.Errorf("parse host key: more than one key on the line")
	}
	return k, nil
}

// HostKeyError says why a server's host key was refused. Outcome is
// HostKeyUnknown, HostKeyMismatch or HostKeyRevoked.
type HostKeyError struct {
	Outcome Outcome
	// Addr is the dialed address.
	Addr string
	// Type and Fingerprint (SHA256:…) describe the key the server offered.
	Type        string
	Fingerprint string
	// Known lists the fingerprints trusted for this address; empty for
	// HostKeyUnknown.
	Known []string
	// Reason is set when a known_hosts file gave a reason beyond the key
	// not matching, such as a certificate that failed its checks.
	Reason string
}

func (e *HostKeyError) Error() string {
	var b strings.Builder
	switch e.Outcome {
	case HostKeyRevoked:
		fmt.Fprintf(&b, "host key %s %s of %s is revoked", e.Type, e.Fingerprint, e.Addr)
	case HostKeyMismatch:
		fmt.Fprintf(&b, "host key %s %s of %s does not match the trusted keys %s", e.Type, e.Fingerprint, e.Addr, strings.Join(e.Known, ", "))
	default:
		fmt.Fprintf(&b, "host key %s %s of %s is not trusted (no pinned key or known_hosts entry)", e.Type, e.Fingerprint, e.Addr)
	}
	if e.Reason != "" {
		fmt.Fprintf(&b, ": %s", e.Reason)
	}
	return b.String()
}

// hostKeyChecker is the HostKeyCallback of one Run. It records what the
// server offered and why it was refused, so that Run can tell a refused
// host key from any other handshake failure without reading error text.
type hostKeyChecker struct {
	addr   string
	pinned []ssh.PublicKey
	known  ssh.HostKeyCallback // nil without known_hosts files
	// caLines are the "file:line" positions of @cert-authority lines.
	// knownhosts lists their CA keys among a host's known keys, and would
	// even accept a server presenting a CA key as its plain host key; we
	// use them for certificates only, as OpenSSH does.
	caLines map[string]bool

	mu       sync.Mutex
	called   bool
	at       time.Time
	keyType  string
	keyFP    string
	rejected *HostKeyError
}

func newHostKeyChecker(addr string, hk HostKeys) (*hostKeyChecker, error) {
	c := &hostKeyChecker{addr: addr, pinned: hk.Pinned}
	if len(hk.KnownHostsFiles) > 0 {
		cb, err := knownhosts.New(hk.KnownHostsFiles...)
		if err != nil {
			return nil, fmt.Errorf("known_hosts file: %w", err)
		}
		c.known = cb
		if c.caLines, err = caLinesOf(hk.KnownHostsFiles); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// caLinesOf returns the positions of the @cert-authority lines in files,
// numbered as knownhosts numbers them.
func caLinesOf(files []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("known_hosts file: %w", err)
		}
		sc := bufio.NewScanner(f)
		n := 0
		for sc.Scan() {
			n++
			marker, _, _, _, _, err := ssh.ParseKnownHosts(sc.Bytes())
			if err == nil && marker == "cert-authority" {
				out[fileLine(name, n)] = true
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("known_hosts file %s: %w", name, err)
		}
	}
	return out, nil
}

func fileLine(name string, line int) string { return name + ":" + strconv.Itoa(line) }

// probeKey is a key no server can hold. Offering it to the known_hosts
// callback makes knownhosts list every key it trusts for an address
// (KeyError.Want) without trusting anything.
var probeKey = sync.OnceValue(func() ssh.PublicKey {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic("sshexec: generate probe key: " + err.Error())
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		panic("sshexec: probe key: " + err.Error())
	}
	return k
})

// knownFor returns the plain keys the known_hosts files trust for addr.
func (c *hostKeyChecker) knownFor(addr string, remote net.Addr) []ssh.PublicKey {
	var out []ssh.PublicKey
	if c.known == nil {
		return out
	}
	var ke *knownhosts.KeyError
	if errors.As(c.known(addr, remote, probeKey()), &ke) {
		for _, w := range ke.Want {
			if !c.caLines[fileLine(w.Filename, w.Line)] {
				out = append(out, w.Key)
			}
		}
	}
	return out
}

// algorithms returns the host key algorithms to offer: those of the keys
// trusted for this address, then (if a known_hosts file names a host CA)
// the certificate algorithms. Offering only these keeps negotiation from
// choosing a key type for which we hold no key, which would make a trusted
// server look unknown. When no plain key is trusted for the address, every
// supported algorithm follows, so that a server without a certificate still
// shows its key and is reported as unknown rather than as a failed
// negotiation.
func (c *hostKeyChecker) algorithms() []string {
	keys := append([]ssh.PublicKey(nil), c.pinned...)
	keys = append(keys, c.knownFor(c.addr, tcpAddr(c.addr))...)
	var algos []string
	seen := map[string]bool{}
	add := func(a ...string) {
		for _, s := range a {
			if !seen[s] {
				seen[s] = true
				algos = append(algos, s)
			}
		}
	}
	for _, k := range keys {
		add(algorithmsForKey(k.Type())...)
	}
	if len(c.caLines) > 0 {
		add(ssh.CertAlgoED25519v01, ssh.CertAlgoECDSA256v01, ssh.CertAlgoECDSA384v01,
			ssh.CertAlgoECDSA521v01, ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01,
			ssh.CertAlgoSKED25519v01, ssh.CertAlgoSKECDSA256v01)
	}
	if len(keys) == 0 {
		add(ssh.SupportedAlgorithms().HostKeys...)
	}
	return algos
}

// algorithmsForKey maps a key type to the host key algorithms that use it.
func algorithmsForKey(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return rsaSHA2
	}
	return []string{keyType}
}

// tcpAddr gives knownhosts a net.Addr for addr; knownhosts prefers the
// host name argument, so this is used only for its form.
func tcpAddr(addr string) net.Addr {
	if a, err := net.ResolveTCPAddr("tcp", addr); err == nil && a.IP != nil {
		return a
	}
	return &net.TCPAddr{IP: net.IPv4zero}
}

// check is the ssh.HostKeyCallback.
func (c *hostKeyChecker) check(hostname string, remote net.Addr, key ssh.PublicKey) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.called = true
	c.at = time.Now()
	c.keyType = key.Type()
	c.keyFP = ssh.FingerprintSHA256(key)
	if err := c.verdict(hostname, remote, key); err != nil {
		c.rejected = err
		return err
	}
	return nil
}

func (c *hostKeyChecker) verdict(hostname string, remote net.Addr, key ssh.PublicKey) *HostKeyError {
	refuse := func(o Outcome, known []ssh.PublicKey, reason string) *HostKeyError {
		e := &HostKeyError{Outcome: o, Addr: c.addr, Type: key.Type(), Fingerprint: ssh.FingerprintSHA256(key), Reason: reason}
		for _, k := range known {
			e.Known = append(e.Known, ssh.FingerprintSHA256(k))
		}
		return e
	}

	// Revocation first: a revoked key (or a certificate whose key or
	// signing CA is revoked) is refused even if pinned.
	if c.known != nil {
		probes := []ssh.PublicKey{key}
		if cert, ok := key.(*ssh.Certificate); ok {
			probes = []ssh.PublicKey{cert.Key, cert.SignatureKey}
		}
		for _, p := range probes {
			var re *knownhosts.RevokedError
			if errors.As(c.known(hostname, remote, p), &re) {
				return refuse(HostKeyRevoked, nil, "")
			}
		}
	}

	for _, p := range c.pinned {
		if bytes.Equal(p.Marshal(), key.Marshal()) {
			return nil
		}
	}

	var reason string
	if cert, isCert := key.(*ssh.Certificate); isCert && c.known != nil {
		err := c.known(hostname, remote, cert)
		if err == nil {
			return nil
		}
		// knownhosts reports certificate failures (unknown CA, wrong
		// principal, expired) as plain errors; keep the text as a reason
		// for people, never as something to branch on.
		reason = err.Error()
	}
	knownPlain := c.knownFor(hostname, remote)
	if _, isCert := key.(*ssh.Certificate); !isCert {
		for _, k := range knownPlain {
			if bytes.Equal(k.Marshal(), key.Marshal()) {
				return nil
			}
		}
	}

	trusted := append(append([]ssh.PublicKey(nil), c.pinned...), knownPlain...)
	if len(trusted) > 0 {
		return refuse(HostKeyMismatch, trusted, reason)
	}
	return refuse(HostKeyUnknown, nil, reason)
}

// seen returns what the callback saw: whether and when it ran, the key's
// type and fingerprint, and the refusal if any.
func (c *hostKeyChecker) seen() (called bool, at time.Time, keyType, fingerprint string, rejected *HostKeyError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.called, c.at, c.keyType, c.keyFP, c.rejected
}
