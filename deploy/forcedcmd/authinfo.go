package forcedcmd

import (
	"bufio"
	"io"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
)

// AuthInfo is what sshd says authenticated the session, read from the file
// named by SSH_USER_AUTH (sshd_config ExposeAuthInfo yes).
type AuthInfo struct {
	// Certificate is set when the key was a certificate; KeyID and Serial
	// are then the certificate's ("airlock:<action id>" and the audit
	// sequence number for the gateway's per-action certificates).
	Certificate bool
	KeyID       string
	Serial      uint64
	// Fingerprint is the SHA256 fingerprint of the key (for a certificate,
	// of the certified key).
	Fingerprint string
}

// maxAuthInfoBytes bounds how much of the SSH_USER_AUTH file is read.
const maxAuthInfoBytes = 64 << 10

// readAuthInfo parses sshd's auth info file: one line per successful
// authentication method, "publickey TYPE BASE64" for keys and
// certificates (sshd(8), ExposeAuthInfo). The last publickey line wins. A
// missing or unreadable file gives an empty AuthInfo: the log line then
// simply has no key ID.
func readAuthInfo(file string) AuthInfo {
	var info AuthInfo
	if file == "" {
		return info
	}
	f, err := os.Open(file)
	if err != nil {
		return info
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxAuthInfoBytes))
	sc.Buffer(make([]byte, 0, 4096), maxAuthInfoBytes)
	for sc.Scan() {
		method, key, ok := strings.Cut(sc.Text(), " ")
		if !ok || method != "publickey" {
			continue
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(key))
		if err != nil {
			continue
		}
		info = AuthInfo{Fingerprint: ssh.FingerprintSHA256(pub)}
		if cert, ok := pub.(*ssh.Certificate); ok {
			info.Certificate = true
			info.KeyID = cert.KeyId
			info.Serial = cert.Serial
			info.Fingerprint = ssh.FingerprintSHA256(cert.Key)
		}
	}
	return info
}
