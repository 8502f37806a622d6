package deploy

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/airlockgw/airlock/deploy/securefile"
	"golang.org/x/crypto/ssh"
)

// CAComment is the comment of the CA's public key line.
const CAComment = "airlock-ca"

// maxKeyFileBytes bounds a private key file.
const maxKeyFileBytes = 64 << 10

// InitCA makes the gateway's SSH certificate authority: a new ed25519 key
// written to file in OpenSSH form with mode 0600, and its public key line
// to file+".pub" with mode 0644. The directory is created (mode 0700) if
// missing (its parent must exist) and must pass the checks of
// InstallLine; both files
// belong to the directory's owner (so that root can create the CA for the
// gateway user).
//
// An existing CA is never replaced, since every target trusts it: if file
// exists and is a safe secret (a regular file owned by the directory's
// owner or root, not readable or writable by group or others), InitCA
// returns its public key and created == false; otherwise a *securefile.Error.
func InitCA(file string) (pub ssh.PublicKey, created bool, err error) {
	file, err = filepath.Abs(file)
	if err != nil {
		return nil, false, err
	}
	dir := filepath.Dir(file)
	if err := makeKeyDir(dir); err != nil {
		return nil, false, err
	}
	// Root (sudo airlock ca init) writes the key for the directory's
	// owner, the gateway user; anyone else only into their own directory.
	want := os.Geteuid()
	if want == 0 {
		want = -1
	}
	uid, gid, err := securefile.CheckDirs(dir, want)
	if err != nil {
		return nil, false, forFile(err, file)
	}
	if fi, err := os.Lstat(file); err == nil {
		if err := securefile.CheckSecret(file, fi, uid); err != nil {
			return nil, false, err
		}
		s, err := LoadCA(file, nil)
		if err != nil {
			return nil, false, err
		}
		return s.PublicKey(), false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}

	unlock, err := securefile.LockDir(dir, lockWait)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("generate the CA key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, CAComment)
	if err != nil {
		return nil, false, fmt.Errorf("encode the CA key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, false, fmt.Errorf("CA key: %w", err)
	}
	pub = signer.PublicKey()
	// The public half first: a crash in between leaves no private key
	// without its public line, and a second init then starts over.
	if err := securefile.WriteFile(file+".pub", []byte(CAPublicKeyLine(pub)+"\n"), securefile.WriteOptions{Mode: 0o644, UID: uid, GID: gid}); err != nil {
		return nil, false, err
	}
	if err := securefile.WriteFile(file, pem.EncodeToMemory(block), securefile.WriteOptions{Mode: 0o600, UID: uid, GID: gid, NoReplace: true}); err != nil {
		return nil, false, err
	}
	return pub, true, nil
}

// makeKeyDir creates dir (mode 0700) if it is missing, giving it to the
// owner of its parent when we are root: `sudo airlock ca init` makes
// state_dir/keys for the gateway user who owns state_dir.
func makeKeyDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return nil
	}
	parent, err := os.Stat(filepath.Dir(dir))
	if err != nil {
		return err
	}
	uid, gid := securefile.Owner(parent)
	if err := os.Chown(dir, uid, gid); err != nil {
		return err
	}
	return nil
}

// LoadCA reads the CA's private key, refusing a file that is not a safe
// secret (see InitCA). passphrase is needed only for an encrypted key.
func LoadCA(file string, passphrase []byte) (ssh.Signer, error) {
	fi, err := os.Lstat(file)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	want := os.Geteuid()
	if want == 0 {
		want, _ = securefile.Owner(fi) // root may read the gateway user's key
	}
	if err := securefile.CheckSecret(file, fi, want); err != nil {
		return nil, err
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes))
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	var s ssh.Signer
	if len(passphrase) > 0 {
		s, err = ssh.ParsePrivateKeyWithPassphrase(b, passphrase)
	} else {
		s, err = ssh.ParsePrivateKey(b)
	}
	if err != nil {
		// Never the key bytes; x/crypto's errors do not carry them.
		return nil, fmt.Errorf("CA key %s: %w", file, err)
	}
	return s, nil
}

// CAPublicKeyLine returns the CA's public key as one line, "ssh-ed25519
// AAAA… airlock-ca": the content of a target's TrustedUserCAKeys file.
// For a single account instead, use AuthorizedKeysLine with
// CertAuthority.
func CAPublicKeyLine(pub ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))) + " " + CAComment
}

// Certificate validity: from CertBackdate before now (clock skew between
// gateway and target) until CertLifetime plus the action's timeout after
// now.
const (
	CertBackdate = 30 * time.Second
	CertLifetime = 2 * time.Minute
	// MaxCertTimeout bounds the action timeout a certificate may cover.
	MaxCertTimeout = 24 * time.Hour
)

// ErrInvalidCertRequest is wrapped by every error NewActionCert returns for
// a request it cannot sign.
var ErrInvalidCertRequest = errors.New("invalid certificate request")

// CertRequest describes one action's certificate.
type CertRequest struct {
	// ActionID becomes the key ID "airlock:<ActionID>", which sshd logs
	// ("Accepted publickey for … ID airlock:… (serial N)"). Printable
	// ASCII without spaces, at most 128 bytes.
	ActionID string
	// Account is the only principal: the remote user name.
	Account string
	// Serial is the certificate serial: the audit sequence number of the
	// action's record, so the target's log points into the audit chain.
	Serial uint64
	// Timeout is the action's timeout; it must be above zero and at most
	// MaxCertTimeout.
	Timeout time.Duration
	// ForceCommand, when set, is the force-command critical option: sshd
	// runs it instead of the requested command.
	ForceCommand string
	// SourceAddress, when set, is the source-address critical option: a
	// comma-separated list of addresses or CIDRs the certificate may be
	// used from.
	SourceAddress string
	// PortForwarding adds the permit-port-forwarding extension, and no
	// other: the certificate of a jump host's hop, which only opens
	// direct-tcpip channels (sshd grants forwarding to a certificate only
	// with it, whatever authorized_keys says).
	PortForwarding bool
	// Now is the signing time; zero means time.Now().
	Now time.Time
}

// ActionCert is a fresh key and its certificate for one action.
type ActionCert struct {
	// Signer authenticates with the certificate (ssh.NewCertSigner);
	// put it in sshexec.Config.Signers. Its private key exists only in
	// memory and only for this action.
	Signer ssh.Signer
	// Certificate is the signed certificate.
	Certificate *ssh.Certificate
	// KeyID and Serial are recorded in the action.connecting audit
	// entry.
	KeyID  string
	Serial uint64
	// ValidAfter and ValidBefore bound the certificate's use.
	ValidAfter, ValidBefore time.Time
}

var actionIDRE = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)

// NewActionCert makes a new ed25519 key and a user certificate for it,
// signed by ca: key ID "airlock:<action id>", the given serial, the
// account as the only principal, valid from CertBackdate before now until
// CertLifetime plus the timeout after it, the optional force-command and
// source-address critical options, and no extensions. Without
// extensions sshd grants no PTY, no forwarding of any kind and no
// ~/.ssh/rc (sshd(8) and PROTOCOL.certkeys: permit-* are opt-in); exec
// needs none of them.
func NewActionCert(ca ssh.Signer, r CertRequest) (*ActionCert, error) {
	if ca == nil {
		return nil, fmt.Errorf("%w: no CA", ErrInvalidCertRequest)
	}
	if !actionIDRE.MatchString(r.ActionID) {
		return nil, fmt.Errorf("%w: action id %q: 1 to 128 printable ASCII characters without spaces", ErrInvalidCertRequest, r.ActionID)
	}
	if !nameRE.MatchString(r.Account) {
		return nil, fmt.Errorf("%w: account %q", ErrInvalidCertRequest, r.Account)
	}
	if r.Timeout <= 0 || r.Timeout > MaxCertTimeout {
		return nil, fmt.Errorf("%w: timeout %s must be above zero and at most %s", ErrInvalidCertRequest, r.Timeout, MaxCertTimeout)
	}
	crit := map[string]string{}
	if r.ForceCommand != "" {
		if strings.ContainsAny(r.ForceCommand, "\x00\n\r") {
			return nil, fmt.Errorf("%w: force-command holds a NUL or newline", ErrInvalidCertRequest)
		}
		crit["force-command"] = r.ForceCommand
	}
	if r.SourceAddress != "" {
		for _, a := range strings.Split(r.SourceAddress, ",") {
			if _, err := netip.ParsePrefix(a); err != nil {
				if _, err := netip.ParseAddr(a); err != nil {
					return nil, fmt.Errorf("%w: source-address %q is not an address or CIDR", ErrInvalidCertRequest, a)
				}
			}
		}
		crit["source-address"] = r.SourceAddress
	}
	now := r.Now
	if now.IsZero() {
		now = time.Now()
	}
	after := now.Add(-CertBackdate).Truncate(time.Second)
	before := now.Add(CertLifetime + r.Timeout).Truncate(time.Second)

	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the action's key: %w", err)
	}
	key, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("the action's key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("the action's key: %w", err)
	}
	cert := &ssh.Certificate{
		Key:             sshPub,
		Serial:          r.Serial,
		CertType:        ssh.UserCert,
		KeyId:           CommentPrefix + r.ActionID,
		ValidPrincipals: []string{r.Account},
		ValidAfter:      uint64(after.Unix()),
		ValidBefore:     uint64(before.Unix()),
		Permissions:     ssh.Permissions{CriticalOptions: crit, Extensions: map[string]string{}},
	}
	if r.PortForwarding {
		cert.Permissions.Extensions["permit-port-forwarding"] = ""
	}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		return nil, fmt.Errorf("sign the action's certificate: %w", err)
	}
	signer, err := ssh.NewCertSigner(cert, key)
	if err != nil {
		return nil, fmt.Errorf("the action's certificate signer: %w", err)
	}
	return &ActionCert{
		Signer:      signer,
		Certificate: cert,
		KeyID:       cert.KeyId,
		Serial:      cert.Serial,
		ValidAfter:  after,
		ValidBefore: before,
	}, nil
}
