package deploy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// OfferedKey is one host key a server offered during Scan.
type OfferedKey struct {
	// Key is the host key; for a host certificate, the certified key.
	Key ssh.PublicKey
	// Cert is the host certificate the server presented, or nil. Its CA
	// signature is not checked by Scan (nothing is trusted there);
	// PinHostCA checks it.
	Cert *ssh.Certificate
}

// Fingerprint is the key's SHA256 fingerprint, "SHA256:…" as ssh-keygen -l
// prints it.
func (k OfferedKey) Fingerprint() string { return ssh.FingerprintSHA256(k.Key) }

// String describes the key on one line: type and fingerprint, and for a
// certificate its CA's type and fingerprint, principals and validity.
func (k OfferedKey) String() string {
	if k.Cert == nil {
		return k.Key.Type() + " " + k.Fingerprint()
	}
	c := k.Cert
	valid := "forever"
	if c.ValidBefore != ssh.CertTimeInfinity {
		valid = "until " + time.Unix(int64(c.ValidBefore), 0).UTC().Format(time.RFC3339)
	}
	principals := strings.Join(c.ValidPrincipals, ",")
	if principals == "" {
		principals = "(any host)"
	}
	return fmt.Sprintf("%s %s host certificate signed by CA %s %s, principals %s, valid %s",
		k.Key.Type(), k.Fingerprint(), c.SignatureKey.Type(), ssh.FingerprintSHA256(c.SignatureKey), principals, valid)
}

// Line is the key as it is written in host_keys or after the host names in
// known_hosts: "ssh-ed25519 AAAA…".
func (k OfferedKey) Line() string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k.Key)))
}

// scanFamilies are the host key algorithms Scan asks for, one connection
// each: a server shows one host key per connection, the one the algorithm
// negotiation picks.
var scanFamilies = [][]string{
	{ssh.KeyAlgoED25519},
	{ssh.KeyAlgoECDSA256},
	{ssh.KeyAlgoECDSA384},
	{ssh.KeyAlgoECDSA521},
	{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256},
	{ssh.CertAlgoED25519v01},
	{ssh.CertAlgoECDSA256v01},
	{ssh.CertAlgoECDSA384v01},
	{ssh.CertAlgoECDSA521v01},
	{ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01},
}

// scanTimeout bounds each connection of a scan when ctx has no earlier
// deadline.
const scanTimeout = 10 * time.Second

// ErrNoHostKeys is returned when a server answered but offered no host key
// of any algorithm Scan knows.
var ErrNoHostKeys = errors.New("the server offered no host key")

// errScanned aborts each scan handshake once the host key is seen.
var errScanned = errors.New("host key recorded")

// Scan connects to addr ("host:port") once per host key algorithm family
// and returns every distinct host key (and host certificate) the server
// offers, in a fixed order: ed25519, ECDSA, RSA, then certificates. It
// trusts nothing and authenticates nothing: each handshake is aborted in
// the host key callback, before any credential is sent. Families the
// server does not offer are skipped; a dial error ends the scan.
func Scan(ctx context.Context, addr string) ([]OfferedKey, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("scan: address %q is not host:port (for example 10.0.0.5:22)", addr)
	}
	var (
		out     []OfferedKey
		seen    = map[string]bool{}
		lastErr error
	)
	for _, algos := range scanFamilies {
		key, err := scanOnce(ctx, addr, algos)
		var ne net.Error
		switch {
		case errors.As(err, &ne) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("scan %s: %w", addr, err)
		case err != nil:
			lastErr = err // not offered
			continue
		}
		id := string(key.Marshal())
		if seen[id] {
			continue
		}
		seen[id] = true
		if cert, ok := key.(*ssh.Certificate); ok {
			out = append(out, OfferedKey{Key: cert.Key, Cert: cert})
		} else {
			out = append(out, OfferedKey{Key: key})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoHostKeys, addr, lastErr)
	}
	return out, nil
}

// scanOnce makes one connection offering only algos and returns the host
// key the server proved it holds.
func scanOnce(ctx context.Context, addr string, algos []string) (ssh.PublicKey, error) {
	ctx, cancel := context.WithTimeout(ctx, scanTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	var got ssh.PublicKey
	_, _, _, err = ssh.NewClientConn(conn, addr, &ssh.ClientConfig{
		User:              "airlock-scan",
		HostKeyAlgorithms: algos,
		// x/crypto calls this only after the server signed the exchange
		// hash with the key, so a recorded key is one the server holds.
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			got = key
			return errScanned
		},
		ClientVersion: "SSH-2.0-airlock-scan",
		Timeout:       scanTimeout,
	})
	if got != nil {
		return got, nil
	}
	if err == nil {
		err = errors.New("scan: the handshake ended without a host key")
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, err
}

// ErrNotAddress: an address is neither host:port nor a host alone.
var ErrNotAddress = errors.New("not an address: write host, host:port, [IPv6] or [IPv6]:port")

// SSHAddress returns addr as host:port: as it is when it has a port, with
// port 22 when it names only a host (a name, an IPv4 address, or an IPv6
// address in brackets). A target's address in the configuration and the
// address given to hosts scan are read the same way.
func SSHAddress(addr string) (string, error) {
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip, err := netip.ParseAddr(host); host == "" || port == "" || strings.HasPrefix(addr, "[") && (err != nil || !ip.Is6()) {
			return "", fmt.Errorf("%q is %w", addr, ErrNotAddress) // brackets are for IPv6 only
		}
		return addr, nil
	}
	host := addr
	if h, ok := strings.CutPrefix(addr, "["); ok {
		host, ok = strings.CutSuffix(h, "]")
		if ip, err := netip.ParseAddr(host); !ok || err != nil || !ip.Is6() {
			return "", fmt.Errorf("%q is %w", addr, ErrNotAddress)
		}
	} else if host == "" || strings.ContainsAny(host, ":[] \t") {
		return "", fmt.Errorf("%q is %w", addr, ErrNotAddress)
	}
	return net.JoinHostPort(host, "22"), nil
}
