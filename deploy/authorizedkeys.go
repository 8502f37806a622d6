package deploy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"
)

// CommentPrefix starts the comment of every line airlock writes; the rest
// is TARGET/ACCOUNT. The installer recognises its own lines by it and never
// touches any other line.
const CommentPrefix = "airlock:"

// LegacyOptions are the restrictions "restrict" implies, listed one by one
// for servers whose idea of "restrict" might be narrower. (A server older
// than OpenSSH 7.2 does not know "restrict" at all and ignores the whole
// line, which fails closed.)
const LegacyOptions = "no-port-forwarding,no-agent-forwarding,no-X11-forwarding,no-pty,no-user-rc"

// The reasons AuthorizedKeysLine refuses its input.
var (
	ErrInvalidName    = errors.New("invalid target or account name")
	ErrInvalidCommand = errors.New("the command cannot be written in an authorized_keys line")
	ErrInvalidFrom    = errors.New("invalid from pattern")
	ErrInvalidKey     = errors.New("invalid key")
	ErrInvalidJumpTo  = errors.New("invalid jump-to address")
)

// LineOptions describe the authorized_keys line of one target account.
type LineOptions struct {
	// Target and Account name the line: its comment is
	// "airlock:TARGET/ACCOUNT". Both must be supplied.
	Target, Account string
	// Command, when set, is forced (command="…"): sshd runs it instead of
	// what the client asks for, which it passes in SSH_ORIGINAL_COMMAND.
	Command string
	// From, when set, is a comma-separated list of CIDRs, addresses or
	// host name patterns (with * and ?, each optionally negated with !)
	// the client must connect from (from="…").
	From string
	// Legacy adds LegacyOptions after "restrict".
	Legacy bool
	// CertAuthority makes the line trust certificates signed by the key
	// (the gateway CA) instead of the key itself: cert-authority, with
	// principals="ACCOUNT" so that only certificates for this account
	// are accepted.
	CertAuthority bool
	// JumpTo, when set, makes the line a jump host's: the key may open
	// forwarding channels to these "host:port" addresses and to nothing
	// else (port-forwarding with one permitopen each), and any session it
	// asks for runs /bin/false. Command and Legacy cannot be combined
	// with it.
	JumpTo []string
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$`)

// AuthorizedKeysLine returns the authorized_keys line (without a newline)
// that lets key log in under o's restrictions:
//
//	[cert-authority,principals="A",]restrict[,LegacyOptions][,from="…"][,command="…"] TYPE BASE64 airlock:T/A
//
// "restrict" turns off port, agent and X11 forwarding, PTY allocation and
// ~/.ssh/rc, and whatever a later OpenSSH adds to it. The command is quoted
// for sshd's option parser, in which a backslash escapes only a double
// quote: every " becomes \" and every other byte stays as it is. A
// command holding a newline, carriage return, NUL or other control
// character, invalid UTF-8, or ending in a backslash (which would escape
// the closing quote) cannot be written and is refused with
// ErrInvalidCommand.
func AuthorizedKeysLine(key ssh.PublicKey, o LineOptions) (string, error) {
	if key == nil {
		return "", fmt.Errorf("%w: no key", ErrInvalidKey)
	}
	if _, isCert := key.(*ssh.Certificate); isCert {
		return "", fmt.Errorf("%w: a certificate cannot be listed in authorized_keys; give its CA key with CertAuthority", ErrInvalidKey)
	}
	comment, err := Comment(o.Target, o.Account)
	if err != nil {
		return "", err
	}
	var opts []string
	if o.CertAuthority {
		opts = append(opts, "cert-authority", `principals="`+o.Account+`"`)
	}
	opts = append(opts, "restrict")
	if len(o.JumpTo) > 0 {
		if o.Command != "" || o.Legacy {
			return "", fmt.Errorf("%w: a jump host's line forces /bin/false and needs OpenSSH 7.2 or later: no command or legacy options with it", ErrInvalidJumpTo)
		}
		opts = append(opts, "port-forwarding")
		for _, addr := range o.JumpTo {
			host, port, err := net.SplitHostPort(addr)
			if err != nil || host == "" || port == "" || strings.ContainsAny(addr, "\",\\ \t") || !printableASCII(addr) {
				return "", fmt.Errorf("%w: %q is not a host:port a permitopen option can name", ErrInvalidJumpTo, addr)
			}
			opts = append(opts, `permitopen="`+addr+`"`)
		}
		o.Command = "/bin/false"
	}
	if o.Legacy {
		opts = append(opts, LegacyOptions)
	}
	if o.From != "" {
		if err := checkFrom(o.From); err != nil {
			return "", err
		}
		opts = append(opts, `from="`+o.From+`"`)
	}
	if o.Command != "" {
		q, err := quoteOption(o.Command)
		if err != nil {
			return "", err
		}
		opts = append(opts, "command="+q)
	}
	return strings.Join(opts, ",") + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) + " " + comment, nil
}

// Comment returns "airlock:TARGET/ACCOUNT", the comment of a line airlock
// writes, after checking both names.
func Comment(target, account string) (string, error) {
	if !nameRE.MatchString(target) || !nameRE.MatchString(account) {
		return "", fmt.Errorf("%w: target %q, account %q: use letters, digits, '.', '_' and '-'", ErrInvalidName, target, account)
	}
	return CommentPrefix + target + "/" + account, nil
}

// quoteOption writes s as a double-quoted authorized_keys option value.
// sshd's opt_dequote (misc.c) copies bytes until the closing quote and
// treats a backslash as an escape only before a double quote, so \" is
// the only escape there is and a backslash elsewhere stands for itself.
func quoteOption(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%w: invalid UTF-8", ErrInvalidCommand)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "", fmt.Errorf("%w: control character %U (an authorized_keys line is one line of text)", ErrInvalidCommand, r)
		}
	}
	if strings.HasSuffix(s, `\`) {
		return "", fmt.Errorf("%w: a trailing backslash would escape the closing quote", ErrInvalidCommand)
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`, nil
}

var hostPatternRE = regexp.MustCompile(`^[A-Za-z0-9.:*?_-]+$`)

// checkFrom validates a from= list: each entry, optionally negated with !,
// is a CIDR with no host bits set (sshd refuses those), an address, or a
// host name pattern.
func checkFrom(list string) error {
	if len(list) > 1024 {
		return fmt.Errorf("%w: longer than 1024 bytes", ErrInvalidFrom)
	}
	for _, e := range strings.Split(list, ",") {
		p := strings.TrimPrefix(e, "!")
		switch {
		case p == "":
			return fmt.Errorf("%w: empty entry in %q", ErrInvalidFrom, list)
		case strings.Contains(p, "/"):
			pfx, err := netip.ParsePrefix(p)
			if err != nil {
				return fmt.Errorf("%w: %q is not a CIDR", ErrInvalidFrom, p)
			}
			if pfx.Masked() != pfx {
				return fmt.Errorf("%w: %q has host bits set; did you mean %s?", ErrInvalidFrom, p, pfx.Masked())
			}
		case !hostPatternRE.MatchString(p):
			return fmt.Errorf("%w: %q is not an address, CIDR or host name pattern", ErrInvalidFrom, p)
		}
	}
	return nil
}

// ParseAirlockLine parses an authorized_keys line and returns its airlock
// comment ("airlock:T/A"). A line with a different comment, or that does
// not parse, is refused with ErrNotAirlockLine or ErrInvalidLine.
func ParseAirlockLine(line string) (comment string, err error) {
	if strings.ContainsAny(line, "\r\n") {
		return "", fmt.Errorf("%w: more than one line", ErrInvalidLine)
	}
	_, comment, _, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidLine, err)
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return "", fmt.Errorf("%w: more than one key", ErrInvalidLine)
	}
	return airlockComment(comment)
}

func airlockComment(comment string) (string, error) {
	comment = strings.TrimSpace(comment)
	t, a, ok := strings.Cut(strings.TrimPrefix(comment, CommentPrefix), "/")
	if !strings.HasPrefix(comment, CommentPrefix) || !ok || !nameRE.MatchString(t) || !nameRE.MatchString(a) {
		return "", fmt.Errorf("%w: comment %q", ErrNotAirlockLine, comment)
	}
	return comment, nil
}

// CredentialPublicKey returns the public key of the private key in file
// (OpenSSH, PKCS#1, PKCS#8 or SEC 1 PEM), for printing its authorized_keys
// line. An encrypted OpenSSH key needs no passphrase: its public half is
// stored in the clear. For other encrypted forms it falls back to
// file+".pub".
func CredentialPublicKey(file string) (ssh.PublicKey, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("credential: %w", err)
	}
	s, err := ssh.ParsePrivateKey(b)
	if err == nil {
		return s.PublicKey(), nil
	}
	var pm *ssh.PassphraseMissingError
	if errors.As(err, &pm) && pm.PublicKey != nil {
		return pm.PublicKey, nil
	}
	pub, perr := os.ReadFile(file + ".pub")
	if perr != nil {
		return nil, fmt.Errorf("credential %s: %w", file, err)
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	if err != nil {
		return nil, fmt.Errorf("credential %s.pub: %w", file, err)
	}
	return k, nil
}

// printableASCII reports whether s is printable ASCII only.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
