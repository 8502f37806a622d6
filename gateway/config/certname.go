package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/airlockgw/airlock/approvals"
)

// CertNameType is the one field of a client certificate an mtls subject
// is compared with. A name of one type never stands for a name of
// another: a common name is not a DNS name, a DNS name is not a URI.
type CertNameType uint8

// The certificate name types.
const (
	CertDNS CertNameType = iota + 1 // a DNS name in subjectAltName (RFC 5280 §4.2.1.6 dNSName)
	CertURI                         // a URI in subjectAltName (uniformResourceIdentifier), such as a SPIFFE ID
	CertCN                          // the subject's common name, for PKIs that set nothing else
)

// String is the type's prefix in mtls.subjects.
func (t CertNameType) String() string {
	switch t {
	case CertDNS:
		return "dns"
	case CertURI:
		return "uri"
	case CertCN:
		return "cn"
	}
	return fmt.Sprintf("CertNameType(%d)", uint8(t))
}

// CertName is one entry of mtls.subjects: a name and the type of
// certificate field it matches.
type CertName struct {
	Type CertNameType
	// Name is a DNS name in lower case (DNS names are compared without
	// regard to ASCII case), a URI as url.URL.String writes it, or a
	// common name exactly as written (compared exactly).
	Name string
}

// Subject is the verified subject of a certificate this name matched,
// as the requester agent:NAME/SUBJECT records it. A DNS name or a URI
// reads as itself (a DNS name holds no ':', a URI always does, and no URI
// subject has the scheme cn); a common name reads "cn:NAME", so that it
// never passes for a DNS name the certificate does not carry.
func (n CertName) Subject() string {
	if n.Type == CertCN {
		return "cn:" + n.Name
	}
	return n.Name
}

// String is the entry as mtls.subjects spells it with its prefix.
func (n CertName) String() string { return n.Type.String() + ":" + n.Name }

// certNameForms is what every refused entry is told it may be.
const certNameForms = `write "dns:NAME" or a plain DNS name (a DNS name of the certificate's subjectAltName), "uri:URI" or a plain spiffe:// ID (a URI of its subjectAltName), or "cn:NAME" (its subject's common name)`

// ParseCertName reads one entry of mtls.subjects: "dns:NAME", "uri:URI",
// "cn:NAME", a plain DNS name (a dns: entry) or a plain spiffe:// URI (a
// uri: entry). Its error says what is wrong and which forms are accepted.
func ParseCertName(s string) (CertName, error) {
	if strings.HasPrefix(s, "spiffe://") {
		return certURI(s)
	}
	prefix, rest, ok := strings.Cut(s, ":")
	if !ok {
		n, err := certDNS(s)
		if err != nil {
			return CertName{}, fmt.Errorf("%w; %s", err, certNameForms)
		}
		return n, nil
	}
	switch prefix {
	case "dns":
		return certDNS(rest)
	case "uri":
		return certURI(rest)
	case "cn":
		return certCN(rest)
	}
	switch strings.ToLower(prefix) {
	case "dns", "uri", "cn":
		return CertName{}, fmt.Errorf("the prefix %q is written in lower case: %s", prefix+":", certNameForms)
	}
	return CertName{}, fmt.Errorf("%q is neither a known prefix nor a spiffe:// URI: %s", prefix+":", certNameForms)
}

// certDNS reads a DNS name: RFC 1123 host name syntax (labels of letters,
// digits and inner hyphens, at most 63 characters each), at most 200 in
// all as every verified subject.
func certDNS(s string) (CertName, error) {
	switch {
	case s == "":
		return CertName{}, fmt.Errorf("a DNS name must not be empty")
	case strings.Contains(s, "*"):
		// A wildcard would make every certificate the CA issues under
		// it this agent, and one certificate several agents.
		return CertName{}, fmt.Errorf("%q is a wildcard: subjects name each certificate's DNS name (a certificate's own wildcard name matches no subject)", s)
	case net.ParseIP(s) != nil:
		return CertName{}, fmt.Errorf("%q is an IP address: certificates' IP addresses are not agent names", s)
	case strings.HasSuffix(s, "."):
		return CertName{}, fmt.Errorf("%q ends in a dot: write the DNS name as certificates carry it, without the trailing dot", s)
	case len(s) > 200:
		return CertName{}, fmt.Errorf("%q is longer than a requester's subject may be (200 characters)", clip(s))
	}
	for _, label := range strings.Split(s, ".") {
		if !dnsLabel(label) {
			return CertName{}, fmt.Errorf("%q is not a DNS name (RFC 1123: labels of 1 to 63 letters, digits and hyphens, not starting or ending with a hyphen)", clip(s))
		}
	}
	return CertName{Type: CertDNS, Name: strings.ToLower(s)}, nil
}

// dnsLabel reports whether l is an RFC 1123 label.
func dnsLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// certURI reads an absolute URI; a spiffe:// one must be a SPIFFE ID
// (spiffe://TRUST-DOMAIN/PATH).
func certURI(s string) (CertName, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs():
		return CertName{}, fmt.Errorf("%q is not an absolute URI (SCHEME:…, such as spiffe://TRUST-DOMAIN/PATH)", clip(s))
	case u.Scheme == "dns" || u.Scheme == "uri" || u.Scheme == "cn":
		// Recorded as itself, a URI of scheme cn would read as a common name.
		return CertName{}, fmt.Errorf("%q: a URI subject's scheme must not be %q, which reads as a prefix", clip(s), u.Scheme)
	case u.Scheme == "spiffe" && (u.Host == "" || u.User != nil || u.Port() != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != ""):
		return CertName{}, fmt.Errorf("%q is not a SPIFFE ID: spiffe://TRUST-DOMAIN/PATH, without user, port, query or fragment", clip(s))
	}
	n := CertName{Type: CertURI, Name: u.String()}
	if !approvals.ValidSubject(n.Subject()) {
		return CertName{}, fmt.Errorf("%q holds characters a requester may not (letters, digits and . _ - : @ / + = ~, at most 200)", clip(s))
	}
	return n, nil
}

// certCN reads a common name.
func certCN(s string) (CertName, error) {
	n := CertName{Type: CertCN, Name: s}
	if s == "" || !approvals.ValidSubject(n.Subject()) {
		return CertName{}, fmt.Errorf("%q is not a common name a requester may carry (1 to 197 letters, digits and . _ - : @ / + = ~)", clip(s))
	}
	return n, nil
}
