package deploy

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// The reasons pinning refuses.
var (
	// ErrBadFingerprint: not "SHA256:" followed by an unpadded base64
	// SHA-256 digest, as ssh-keygen -l prints it.
	ErrBadFingerprint = errors.New(`the fingerprint must be "SHA256:" and 43 base64 characters, as ssh-keygen -lf prints it`)
	// ErrFingerprintNotOffered: the server offered no key (and no host
	// certificate signed by a CA) with that fingerprint.
	ErrFingerprintNotOffered = errors.New("the server offered no key with that fingerprint")
	// ErrCANeedsKnownHosts: the fingerprint is a host CA's, which can only
	// be trusted through a known_hosts file (@cert-authority).
	ErrCANeedsKnownHosts = errors.New("a host CA can only be pinned in a known_hosts file")
	// ErrHostCertInvalid: the host certificate signed by the confirmed CA
	// is expired, badly signed, or not valid for the target's host name.
	ErrHostCertInvalid = errors.New("the host certificate is not valid for this host")
	// ErrTargetNotFound: the config has no target block of that name (or
	// more than one).
	ErrTargetNotFound = errors.New("target not found in the configuration")
	// ErrConfigNotLiteral: the target's address or host_keys is not a
	// literal that can be read and edited without evaluating anything.
	ErrConfigNotLiteral = errors.New("the configuration value is not a literal (write it out, without variables or functions)")
)

// Selection is the offered key an operator's fingerprint picked.
type Selection struct {
	OfferedKey
	// CA is set when the fingerprint is that of the CA which signed the
	// offered host certificate: pin the CA (@cert-authority), not a key.
	CA bool
}

// Select returns the offered key whose SHA256 fingerprint is exactly fp,
// or the CA of an offered host certificate with that fingerprint. Anything
// else is refused: a malformed fingerprint with ErrBadFingerprint, one
// the server did not offer with ErrFingerprintNotOffered.
func Select(offered []OfferedKey, fp string) (Selection, error) {
	digest, ok := strings.CutPrefix(fp, "SHA256:")
	if b, err := base64.RawStdEncoding.DecodeString(digest); !ok || err != nil || len(b) != 32 {
		return Selection{}, ErrBadFingerprint
	}
	for _, k := range offered {
		if k.Fingerprint() == fp {
			return Selection{OfferedKey: k}, nil
		}
	}
	for _, k := range offered {
		if k.Cert != nil && ssh.FingerprintSHA256(k.Cert.SignatureKey) == fp {
			return Selection{OfferedKey: k, CA: true}, nil
		}
	}
	var have []string
	for _, k := range offered {
		have = append(have, k.Fingerprint())
	}
	return Selection{}, fmt.Errorf("%w: %s (offered: %s)", ErrFingerprintNotOffered, fp, strings.Join(have, ", "))
}

// PinOptions say what to pin where.
type PinOptions struct {
	// ConfigFile is the gateway config holding target "Target"; the
	// target's address is read from it. Both must be supplied.
	ConfigFile string
	Target     string
	// Fingerprint is the "SHA256:…" the operator confirmed out of band
	// (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub on the target's
	// console).
	Fingerprint string
	// KnownHostsFile, when set, receives the pin as a known_hosts line
	// (or @cert-authority line, for a host CA) instead of the config's
	// host_keys; the config is then left alone (point the target's
	// known_hosts_file at it).
	KnownHostsFile string
	// Replace makes the pin the target's only one (a key rotation): the
	// old keys in host_keys, or the file's other lines of the same kind
	// for this host, are trusted no more.
	Replace bool
}

// PinResult says what Pin did.
type PinResult struct {
	// Addr is the scanned address.
	Addr string
	// Pinned is the selected key.
	Pinned Selection
	// File is the file written (or found already pinning the key).
	File   string
	Change Change
}

// Pin scans the target's address, selects the offered key matching the
// operator's fingerprint (Select), and pins it: in the config's host_keys
// (AddHostKey), or in a managed known_hosts file, as a host CA when the
// fingerprint is a certificate's CA (addHostCA). Nothing is pinned unless
// the fingerprint matches exactly.
func Pin(ctx context.Context, o PinOptions) (*PinResult, error) {
	addr, err := TargetAddress(o.ConfigFile, o.Target)
	if err != nil {
		return nil, err
	}
	offered, err := Scan(ctx, addr)
	if err != nil {
		return nil, err
	}
	sel, err := Select(offered, o.Fingerprint)
	if err != nil {
		return nil, err
	}
	res := &PinResult{Addr: addr, Pinned: sel, File: o.KnownHostsFile}
	switch {
	case sel.CA && o.KnownHostsFile == "":
		return nil, ErrCANeedsKnownHosts
	case sel.CA:
		res.Change, err = addHostCA(o.KnownHostsFile, addr, sel.Cert, o.Replace)
	case o.KnownHostsFile != "":
		res.Change, err = appendKnownHosts(o.KnownHostsFile, "", addr, sel.Key, o.Replace)
	case o.Replace:
		res.File = o.ConfigFile
		res.Change, err = ReplaceHostKeys(o.ConfigFile, o.Target, sel.Key)
	default:
		res.File = o.ConfigFile
		res.Change, err = AddHostKey(o.ConfigFile, o.Target, sel.Key)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// targetBlock finds the one `target "name"` block of a parsed config.
func targetBlock(body *hclsyntax.Body, file, name string) (*hclsyntax.Block, error) {
	var found *hclsyntax.Block
	for _, b := range body.Blocks {
		if b.Type == "target" && len(b.Labels) == 1 && b.Labels[0] == name {
			if found != nil {
				return nil, fmt.Errorf("%w: %s declares target %q twice", ErrTargetNotFound, file, name)
			}
			found = b
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%w: %s has no target %q", ErrTargetNotFound, file, name)
	}
	return found, nil
}

func parseConfig(src []byte, file string) (*hclsyntax.Body, error) {
	f, diags := hclsyntax.ParseConfig(src, file, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	return f.Body.(*hclsyntax.Body), nil
}

// TargetAddress reads the literal address of target "name" from the
// gateway config file, adding port 22 when it has none, as the gateway
// does. It reads only that one attribute, so it works on a config the
// gateway would still refuse (a new target with no host_keys yet).
func TargetAddress(configFile, name string) (string, error) {
	src, err := os.ReadFile(configFile)
	if err != nil {
		return "", err
	}
	body, err := parseConfig(src, configFile)
	if err != nil {
		return "", err
	}
	b, err := targetBlock(body, configFile, name)
	if err != nil {
		return "", err
	}
	a := b.Body.Attributes["address"]
	if a == nil {
		return "", fmt.Errorf("%w: target %q has no address", ErrConfigNotLiteral, name)
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || v.Type() != cty.String || !v.IsKnown() || v.IsNull() {
		return "", fmt.Errorf("%w: %s:%d: address of target %q", ErrConfigNotLiteral, configFile, a.SrcRange.Start.Line, name)
	}
	return SSHAddress(v.AsString())
}

// AddHostKey adds key to the host_keys list of target "name" in the gateway
// config file, unless it is already there. Only the bytes of that one
// attribute change (or one line is added to the block when it has no
// host_keys); everything else — comments, spacing, other blocks — stays
// byte for byte. The file is rewritten as InstallLine rewrites
// authorized_keys (checked, locked, atomic, mode and owner kept).
func AddHostKey(configFile, name string, key ssh.PublicKey) (Change, error) {
	return editHostKeys(configFile, name, key, addHostKey)
}

// ReplaceHostKeys makes key the only key in target name's host_keys (a
// rotation: the old keys are trusted no more), editing the file as
// AddHostKey does.
func ReplaceHostKeys(configFile, name string, key ssh.PublicKey) (Change, error) {
	return editHostKeys(configFile, name, key, replaceHostKeys)
}

// editHostKeys rewrites target name's host_keys with edit, and checks
// that the result parses and holds key.
func editHostKeys(configFile, name string, key ssh.PublicKey, edit func(src []byte, file, name string, key ssh.PublicKey, line string) ([]byte, Change, error)) (Change, error) {
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
	return updateFile(configFile, 0o640, func(src []byte, exists bool) ([]byte, Change, error) {
		if !exists {
			return nil, 0, fmt.Errorf("%s does not exist: give the gateway's configuration file with --config", configFile)
		}
		out, change, err := edit(src, configFile, name, key, line)
		if err != nil || change == Unchanged {
			return nil, change, err
		}
		// Whatever we produced must parse and now hold the key.
		if body, err := parseConfig(out, configFile); err != nil {
			return nil, 0, fmt.Errorf("could not add the key to %s without breaking it; add %q to target %q's host_keys by hand: %w", configFile, line, name, err)
		} else if b, err := targetBlock(body, configFile, name); err != nil {
			return nil, 0, err
		} else if keys, err := hostKeys(b, configFile); err != nil || !containsKey(keys, key) {
			return nil, 0, fmt.Errorf("could not add the key to %s; add %q to target %q's host_keys by hand", configFile, line, name)
		}
		return out, change, nil
	})
}

// replaceHostKeys is addHostKey for ReplaceHostKeys: the list becomes
// [key].
func replaceHostKeys(src []byte, file, name string, key ssh.PublicKey, line string) ([]byte, Change, error) {
	b, keys, err := pinnedKeys(src, file, name)
	if err != nil {
		return nil, 0, err
	}
	a := b.Body.Attributes["host_keys"]
	switch {
	case a == nil:
		return addHostKey(src, file, name, key, line)
	case len(keys) == 1 && containsKey(keys, key):
		return nil, Unchanged, nil
	}
	r := a.Expr.(*hclsyntax.TupleConsExpr).SrcRange
	lit := string(hclwrite.TokensForValue(cty.StringVal(line)).Bytes())
	out := append(append(append([]byte(nil), src[:r.Start.Byte]...), "["+lit+"]"...), src[r.End.Byte:]...)
	return out, Replaced, nil
}

// pinnedKeys parses a config and returns target name's block and the
// keys of its host_keys.
func pinnedKeys(src []byte, file, name string) (*hclsyntax.Block, []ssh.PublicKey, error) {
	body, err := parseConfig(src, file)
	if err != nil {
		return nil, nil, err
	}
	b, err := targetBlock(body, file, name)
	if err != nil {
		return nil, nil, err
	}
	keys, err := hostKeys(b, file)
	return b, keys, err
}

// hostKeys returns the keys of a target block's literal host_keys list.
func hostKeys(b *hclsyntax.Block, file string) ([]ssh.PublicKey, error) {
	a := b.Body.Attributes["host_keys"]
	if a == nil {
		return nil, nil
	}
	tuple, ok := a.Expr.(*hclsyntax.TupleConsExpr)
	if !ok {
		return nil, fmt.Errorf("%w: %s:%d: host_keys must be a list of strings", ErrConfigNotLiteral, file, a.SrcRange.Start.Line)
	}
	var keys []ssh.PublicKey
	for _, e := range tuple.Exprs {
		v, diags := e.Value(nil)
		if diags.HasErrors() || v.Type() != cty.String || v.IsNull() {
			return nil, fmt.Errorf("%w: %s:%d: host_keys must be a list of strings", ErrConfigNotLiteral, file, e.Range().Start.Line)
		}
		if k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(v.AsString())); err == nil {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

func containsKey(keys []ssh.PublicKey, key ssh.PublicKey) bool {
	for _, k := range keys {
		if bytes.Equal(k.Marshal(), key.Marshal()) {
			return true
		}
	}
	return false
}

// addHostKey splices the key line into src at byte offsets found by the
// HCL parser. (hclwrite would reformat the whole file on output.)
func addHostKey(src []byte, file, name string, key ssh.PublicKey, line string) ([]byte, Change, error) {
	b, keys, err := pinnedKeys(src, file, name)
	if err != nil {
		return nil, 0, err
	}
	if containsKey(keys, key) {
		return nil, Unchanged, nil
	}
	lit := string(hclwrite.TokensForValue(cty.StringVal(line)).Bytes())

	a := b.Body.Attributes["host_keys"]
	if a == nil {
		// A new attribute on its own line before the block's closing
		// brace, indented like the block's first attribute.
		closeAt := b.CloseBraceRange.Start.Byte
		lineStart := bytes.LastIndexByte(src[:closeAt], '\n') + 1
		if strings.TrimSpace(string(src[lineStart:closeAt])) != "" {
			return nil, 0, fmt.Errorf("%w: %s:%d: put target %q's closing brace on its own line", ErrConfigNotLiteral, file, b.CloseBraceRange.Start.Line, name)
		}
		indent := indentOf(src, b.OpenBraceRange.Start.Byte) + "  "
		first := -1
		for _, attr := range b.Body.Attributes {
			if at := attr.SrcRange.Start.Byte; first < 0 || at < first {
				first = at
			}
		}
		if first >= 0 {
			indent = indentOf(src, first)
		}
		ins := indent + "host_keys = [" + lit + "]\n"
		return splice(src, lineStart, ins), Added, nil
	}

	tuple := a.Expr.(*hclsyntax.TupleConsExpr)
	closeAt := tuple.SrcRange.End.Byte - 1 // the ']'
	if len(tuple.Exprs) == 0 {
		return splice(src, tuple.OpenRange.End.Byte, lit), Added, nil
	}
	last := tuple.Exprs[len(tuple.Exprs)-1]
	lastEnd := last.Range().End.Byte
	comma := lastEnd
	for comma < closeAt && (src[comma] == ' ' || src[comma] == '\t') {
		comma++
	}
	if src[comma] != ',' {
		// ["a", "b"] → ["a", "b", "new"]
		return splice(src, lastEnd, ", "+lit), Added, nil
	}
	// A trailing comma: the list is laid out one element per line
	// (or ["a",]). Put the new element on its own line after the last,
	// indented like it.
	afterComma := comma + 1
	nl := bytes.IndexByte(src[afterComma:closeAt], '\n')
	if nl < 0 {
		return splice(src, afterComma, " "+lit+","), Added, nil
	}
	at := afterComma + nl + 1
	return splice(src, at, indentOf(src, last.Range().Start.Byte)+lit+",\n"), Added, nil
}

// indentOf returns the whitespace that starts the line holding offset.
func indentOf(src []byte, offset int) string {
	start := bytes.LastIndexByte(src[:offset], '\n') + 1
	end := start
	for end < len(src) && (src[end] == ' ' || src[end] == '\t') {
		end++
	}
	return string(src[start:end])
}

func splice(src []byte, at int, ins string) []byte {
	out := make([]byte, 0, len(src)+len(ins))
	out = append(out, src[:at]...)
	out = append(out, ins...)
	return append(out, src[at:]...)
}

// addHostCA checks that cert — a host certificate the server at addr
// presented — is signed by its CA, valid now and names addr's host among
// its principals, and then adds "@cert-authority HOST CAKEY" for addr to
// a managed known_hosts file, so that this host's certificates signed by
// that CA are trusted (and, as OpenSSH does, checked for the host name at
// every connection).
func addHostCA(file, addr string, cert *ssh.Certificate, replace bool) (Change, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("address %q is not host:port (for example 10.0.0.5:22)", addr)
	}
	checker := &ssh.CertChecker{IsHostAuthority: func(ssh.PublicKey, string) bool { return true }}
	if cert.CertType != ssh.HostCert {
		return 0, fmt.Errorf("%w: not a host certificate", ErrHostCertInvalid)
	}
	if err := checker.CheckCert(host, cert); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrHostCertInvalid, err)
	}
	return appendKnownHosts(file, "cert-authority", addr, cert.SignatureKey, replace)
}

// appendKnownHosts adds the line for addr and key; replace first removes
// every line of the same kind (marker) that names only addr's host (a
// line that also names other hosts is left: it is not this pin's alone).
func appendKnownHosts(file, marker, addr string, key ssh.PublicKey, replace bool) (Change, error) {
	pattern := knownhosts.Normalize(addr)
	line := knownhosts.Line([]string{pattern}, key)
	if marker != "" {
		line = "@" + marker + " " + line
	}
	return updateFile(file, 0o644, func(old []byte, _ bool) ([]byte, Change, error) {
		if replace {
			var kept [][]byte
			removed := false
			for _, l := range bytes.SplitAfter(old, []byte("\n")) {
				m, hosts, _, _, _, err := ssh.ParseKnownHosts(l)
				if err == nil && m == marker && len(hosts) == 1 && hosts[0] == pattern && !bytes.Equal(bytes.TrimSpace(l), []byte(line)) {
					removed = true
					continue
				}
				kept = append(kept, l)
			}
			if removed {
				out := bytes.Join(kept, nil)
				if !bytes.Contains(out, []byte(line)) {
					if len(out) > 0 && out[len(out)-1] != '\n' {
						out = append(out, '\n')
					}
					out = append(append(out, line...), '\n')
				}
				return out, Replaced, nil
			}
		}
		for _, l := range bytes.Split(old, []byte("\n")) {
			m, hosts, k, _, _, err := ssh.ParseKnownHosts(l)
			if err != nil || m != marker || !bytes.Equal(k.Marshal(), key.Marshal()) {
				continue
			}
			for _, h := range hosts {
				if h == pattern {
					return nil, Unchanged, nil
				}
			}
		}
		out := append([]byte(nil), old...)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		return append(append(out, line...), '\n'), Added, nil
	})
}
