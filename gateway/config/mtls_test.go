package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockgw/airlock/approvals"
)

// Each entry of mtls.subjects says which field of a certificate it
// matches; without a prefix it is a DNS name or a spiffe:// URI, never
// "whatever name the certificate has".
func TestParseCertName(t *testing.T) {
	for _, c := range []struct {
		entry   string
		want    CertName
		subject string
	}{
		{"runner-1.ci.example", CertName{CertDNS, "runner-1.ci.example"}, "runner-1.ci.example"},
		{"Runner-1.CI.Example", CertName{CertDNS, "runner-1.ci.example"}, "runner-1.ci.example"},
		{"dns:runner-1.ci.example", CertName{CertDNS, "runner-1.ci.example"}, "runner-1.ci.example"},
		{"runner", CertName{CertDNS, "runner"}, "runner"},
		{"xn--bcher-kva.example", CertName{CertDNS, "xn--bcher-kva.example"}, "xn--bcher-kva.example"},
		{"spiffe://ci.example/runner-2", CertName{CertURI, "spiffe://ci.example/runner-2"}, "spiffe://ci.example/runner-2"},
		{"uri:spiffe://ci.example/runner-2", CertName{CertURI, "spiffe://ci.example/runner-2"}, "spiffe://ci.example/runner-2"},
		{"uri:https://build.ci.example/builder", CertName{CertURI, "https://build.ci.example/builder"}, "https://build.ci.example/builder"},
		{"uri:urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66", CertName{CertURI, "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66"}, "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66"},
		// A common name is recorded with its type, so that it never
		// reads as a DNS name the certificate does not carry.
		{"cn:runner-1.ci.example", CertName{CertCN, "runner-1.ci.example"}, "cn:runner-1.ci.example"},
		{"cn:Legacy-Runner", CertName{CertCN, "Legacy-Runner"}, "cn:Legacy-Runner"},
		{"cn:spiffe://ci.example/runner-2", CertName{CertCN, "spiffe://ci.example/runner-2"}, "cn:spiffe://ci.example/runner-2"},
	} {
		got, err := ParseCertName(c.entry)
		if err != nil {
			t.Errorf("ParseCertName(%q): %v", c.entry, err)
			continue
		}
		if got != c.want || got.Subject() != c.subject {
			t.Errorf("ParseCertName(%q) = %+v (subject %q), want %+v (subject %q)", c.entry, got, got.Subject(), c.want, c.subject)
		}
	}
}

// Every malformed entry is refused with a message that says what is wrong
// and, where the form itself is unknown, which forms are accepted.
func TestParseCertNameRefuses(t *testing.T) {
	const forms = `"dns:NAME" or a plain DNS name`
	for _, c := range []struct {
		name, entry string
		says        []string
	}{
		{"empty", "", []string{"must not be empty", forms}},
		{"underscore", "runner_1.ci.example", []string{"RFC 1123", forms}},
		{"space", "runner 1", []string{"RFC 1123", forms}},
		{"leading hyphen", "-runner.ci.example", []string{"RFC 1123"}},
		{"empty label", "runner..ci.example", []string{"RFC 1123"}},
		{"label over 63", strings.Repeat("a", 64) + ".example", []string{"RFC 1123"}},
		{"name over 200", strings.Repeat("a.", 101) + "x", []string{"200 characters"}},
		{"trailing dot", "runner-1.ci.example.", []string{"without the trailing dot"}},
		{"wildcard", "*.ci.example", []string{"wildcard", "each certificate's DNS name"}},
		{"typed wildcard", "dns:*.ci.example", []string{"wildcard"}},
		{"IP address", "10.0.0.5", []string{"IP address"}},
		{"IPv6 address", "dns:2001:db8::1", []string{"IP address"}},
		{"plain URI that is not SPIFFE", "https://build.ci.example/builder", []string{"neither a known prefix nor a spiffe:// URI", forms, `"cn:NAME"`}},
		{"unknown prefix", "ip:10.0.0.5", []string{`"ip:"`, forms}},
		{"e-mail prefix", "email:runner@ci.example", []string{`"email:"`, forms}},
		{"upper-case prefix", "DNS:runner-1.ci.example", []string{"lower case", forms}},
		{"uri that is a DNS name", "uri:runner-1.ci.example", []string{"not an absolute URI"}},
		{"relative uri", "uri:/runner", []string{"not an absolute URI"}},
		{"uri of scheme cn", "uri:cn:runner-1", []string{"reads as a prefix"}},
		{"SPIFFE ID with a port", "spiffe://ci.example:8443/runner", []string{"not a SPIFFE ID"}},
		{"SPIFFE ID without trust domain", "spiffe:///runner", []string{"not a SPIFFE ID"}},
		{"SPIFFE ID with a query", "uri:spiffe://ci.example/runner?x=1", []string{"not a SPIFFE ID"}},
		{"uri a requester may not carry", "uri:https://ci.example/a%20b", []string{"characters a requester may not"}},
		{"empty cn", "cn:", []string{"not a common name"}},
		{"cn with a space", "cn:Legacy Runner", []string{"not a common name"}},
	} {
		_, err := ParseCertName(c.entry)
		if err == nil {
			t.Errorf("%s: ParseCertName(%q) accepted it", c.name, c.entry)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: ParseCertName(%q): %v\nwant it to say %q", c.name, c.entry, err, s)
			}
		}
	}
}

// In a configuration, a bad entry is a problem on its line naming the
// agent; the same name twice, in one agent block or in two, is refused:
// a certificate is one agent.
func TestConfigMTLSSubjects(t *testing.T) {
	const listen = "listen {\n  http = \"127.0.0.1:7422\"\n  tls_cert = \"/c\"\n  tls_key = \"/k\"\n  client_ca_file = \"/ca.pem\"\n}\n"
	good := validConfig(listen + `agent "runner" {
  mtls {
    subjects = ["Runner-1.ci.example", "spiffe://ci.example/runner-2", "cn:runner-1.ci.example", "uri:https://build.ci.example/r"]
  }
}
`)
	cfg, err := Parse([]byte(good), "airlock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := []CertName{{CertDNS, "runner-1.ci.example"}, {CertURI, "spiffe://ci.example/runner-2"}, {CertCN, "runner-1.ci.example"}, {CertURI, "https://build.ci.example/r"}}
	if diff := cmp.Diff(want, cfg.Agents["runner"].MTLS.Subjects); diff != "" {
		t.Errorf("subjects (-want +got):\n%s", diff)
	}

	for _, c := range []struct {
		name, agents string
		line         int
		says         []string
	}{
		{"bad entry", "agent \"runner\" {\n  mtls {\n    subjects = [\"runner-1.ci.example\", \"*.ci.example\"]\n  }\n}\n", 15,
			[]string{`agent "runner"`, `"*.ci.example"`, "wildcard"}},
		{"unknown form", "agent \"runner\" {\n  mtls {\n    subjects = [\"san:runner\"]\n  }\n}\n", 15,
			[]string{`agent "runner"`, forms}},
		{"twice in one block", "agent \"runner\" {\n  mtls {\n    subjects = [\"runner-1.ci.example\", \"dns:RUNNER-1.ci.example\"]\n  }\n}\n", 15,
			[]string{`"dns:runner-1.ci.example" is listed twice`}},
		{"in two blocks", "agent \"a\" {\n  mtls {\n    subjects = [\"spiffe://ci.example/r\"]\n  }\n}\nagent \"b\" {\n  mtls {\n    subjects = [\"uri:spiffe://ci.example/r\"]\n  }\n}\n", 20,
			[]string{`agent "b"`, `is also agent "a"'s`}},
	} {
		_, err := Parse([]byte(validConfig(listen+c.agents)), "airlock.hcl")
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) != 1 {
			t.Errorf("%s: %v, want one problem", c.name, err)
			continue
		}
		p := ce.Problems[0]
		if p.Line != c.line {
			t.Errorf("%s: problem on line %d, want %d: %s", c.name, p.Line, c.line, p.Message)
		}
		for _, s := range c.says {
			if !strings.Contains(p.Message, s) {
				t.Errorf("%s: %q\nwant it to say %q", c.name, p.Message, s)
			}
		}
	}
}

// forms is the part of the accepted forms every message about an
// unknown form carries.
const forms = `"cn:NAME" (its subject's common name)`

// Whatever an entry, an accepted one records a subject a requester may
// carry, reads back as itself, and its recorded subject says its type: a
// DNS name has no ':', a URI has one and never reads as a cn: name.
func FuzzParseCertName(f *testing.F) {
	for _, s := range []string{"runner-1.ci.example", "spiffe://ci.example/r", "uri:https://b.example/x", "cn:legacy", "dns:A.b", "uri:cn:x", "*.x", "uri:urn:x:y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		n, err := ParseCertName(entry)
		if err != nil {
			return
		}
		if !approvals.ValidSubject(n.Subject()) {
			t.Errorf("%q: subject %q is no requester's", entry, n.Subject())
		}
		if again, err := ParseCertName(n.String()); err != nil || again != n {
			t.Errorf("%q reads back from %q as %+v %v, want %+v", entry, n.String(), again, err, n)
		}
		switch sub := n.Subject(); n.Type {
		case CertDNS:
			if strings.Contains(sub, ":") {
				t.Errorf("%q: DNS subject %q holds ':'", entry, sub)
			}
		case CertURI:
			if !strings.Contains(sub, ":") || strings.HasPrefix(sub, "cn:") {
				t.Errorf("%q: URI subject %q could read as another type", entry, sub)
			}
		case CertCN:
			if !strings.HasPrefix(sub, "cn:") {
				t.Errorf("%q: common name subject %q", entry, sub)
			}
		default:
			t.Errorf("%q: type %v", entry, n.Type)
		}
	})
}
