package engine

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Remembered login devices. After a password login the gateway gives the
// browser (a cookie) or the CLI (its session file) a proof that this
// device logged in as this reviewer. It is no credential: alone it logs
// nobody in. It only decides which budget a later password attempt is
// charged to: one with a valid proof for the name it names is charged to
// that device alone (10 failures a minute), never to its address or to
// the name's budget across addresses (namebudget.go), so guesses from
// elsewhere never slow or lock out a reviewer's own browser or CLI.
//
// A proof reads v1.NAME.ISSUED.ID.MAC: the reviewer's name, when it was
// issued (Unix seconds), a random id (the device's budget) and an
// HMAC-SHA256 over those and the account's credential epoch, keyed by a
// key derived from the command-MAC key, which replicas share. A new
// password, a disable or a removal moves the epoch on and so ends every
// proof of the account.

// DeviceTTL is how long a remembered login device's proof is honoured.
const DeviceTTL = 90 * 24 * time.Hour

// deviceProofVersion starts every proof.
const deviceProofVersion = "v1"

// deviceKey is the proofs' MAC key.
func (e *core) deviceKey() []byte {
	m := hmac.New(sha256.New, e.commandKey)
	m.Write([]byte("airlock reviewer login device v1"))
	return m.Sum(nil)
}

// deviceMAC is the MAC of a proof's fields for the account's epoch. Names
// hold no newline, so the fields cannot run into each other.
func (e *core) deviceMAC(name string, issued int64, id string, epoch int64) []byte {
	m := hmac.New(sha256.New, e.deviceKey())
	m.Write([]byte(deviceProofVersion + "\n" + name + "\n" + strconv.FormatInt(issued, 10) + "\n" + id + "\n" + strconv.FormatInt(epoch, 10)))
	return m.Sum(nil)
}

// RememberDevice issues the proof a client keeps after rv's password
// login, valid for DeviceTTL, and says until when. It is shown once, in
// the answer to that login.
func (e *Review) RememberDevice(rv Reviewer) (Secret, time.Time) {
	id := make([]byte, 16)
	rand.Read(id) // never fails (crypto/rand)
	idHex := hex.EncodeToString(id)
	now := e.clock.Now()
	mac := e.deviceMAC(rv.Name(), now.Unix(), idHex, rv.rv.Epoch())
	proof := strings.Join([]string{deviceProofVersion, rv.Name(), strconv.FormatInt(now.Unix(), 10), idHex, base64.RawURLEncoding.EncodeToString(mac)}, ".")
	return NewSecret(proof), now.Add(DeviceTTL).UTC()
}

// knownDevice returns the id of the device a proof stands for, if it is
// a valid proof for name now: issued for it, within DeviceTTL, under the
// account's present epoch. Anything else (no proof, a forged or stale
// one, another name's) is an unknown device; it is not a failure.
func (e *core) knownDevice(ctx context.Context, name string, proof Secret) (string, bool) {
	p := proof.Reveal()
	if p == "" || len(p) > 512 {
		return "", false
	}
	parts := strings.Split(p, ".")
	if len(parts) < 5 || parts[0] != deviceProofVersion {
		return "", false
	}
	k := len(parts)
	if strings.Join(parts[1:k-3], ".") != name {
		return "", false
	}
	issued, err := strconv.ParseInt(parts[k-3], 10, 64)
	if err != nil {
		return "", false
	}
	id := parts[k-2]
	if b, err := hex.DecodeString(id); err != nil || len(b) != 16 {
		return "", false
	}
	mac, err := base64.RawURLEncoding.DecodeString(parts[k-1])
	if err != nil {
		return "", false
	}
	// A proof from a few minutes ahead is a replica's clock, not a forgery.
	if age := e.clock.Now().Sub(time.Unix(issued, 0)); age >= DeviceTTL || age < -5*time.Minute {
		return "", false
	}
	epoch, _, err := e.store.Accounts().Epoch(ctx, name)
	if err != nil {
		return "", false
	}
	if !hmac.Equal(mac, e.deviceMAC(name, issued, id, epoch)) {
		return "", false
	}
	return id, true
}

// loginDevice is the limiter key of password attempts from a remembered
// device of name.
func loginDevice(name, id string) string { return "login-device:" + name + "/" + id }
