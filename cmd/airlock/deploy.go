package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
)

func init() {
	commands["deploy"] = (&group{name: "deploy", usage: deployUsage, verbs: map[string]verbFunc{
		"authorized-keys": deployAuthorizedKeys,
		"install":         deployInstall,
	}}).command("authorized_keys lines for targets (deploy authorized-keys | install)")
	commands["ca"] = (&group{name: "ca", usage: caUsage, verbs: map[string]verbFunc{
		"init":       bind(runCA, "init"),
		"public-key": bind(runCA, "public-key"),
	}}).command("the gateway's SSH CA (ca init | public-key)")
	commands["hosts"] = (&group{name: "hosts", usage: hostsUsage, verbs: map[string]verbFunc{
		"scan": hostsScan,
		"pin":  hostsPin,
	}}).command("scan and pin target host keys (hosts scan | pin)")
}

const deployUsage = `usage: airlock deploy VERB [flags]

verbs:
  authorized-keys --target T --account A [--command CMD] [--from CIDR] [--legacy] [--config FILE]
  authorized-keys --target BASTION --jump-to T,… [--account A] [--from CIDR] [--config FILE]
      print the authorized_keys line for that account's credential
  install --authorized-keys FILE --line LINE [--remove]
      install (or with --remove, remove) the line, idempotently and atomically

run "airlock deploy VERB --help" for a verb's flags
`

const caUsage = `usage: airlock ca VERB [flags]

verbs:
  init [--config FILE]
      create the gateway's SSH CA (never replaced) and print its
      TrustedUserCAKeys line
  public-key [--config FILE]
      print the CA's TrustedUserCAKeys line
`

const hostsUsage = `usage: airlock hosts VERB [flags] [args]

verbs:
  scan [--timeout DUR] HOST[:PORT]
      print the host keys and SHA256 fingerprints a server offers; trusts nothing
  pin --fingerprint SHA256:… [--known-hosts FILE] [--config FILE] TARGET
      pin the target's host key after you confirmed the fingerprint out of band

run "airlock hosts VERB --help" for a verb's flags
`

// caFile is where the gateway CA's private key lives.
func caFile(cfg *config.Config) string { return filepath.Join(cfg.StateDir, "keys", "ca") }

func deployAuthorizedKeys(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock deploy authorized-keys", "airlock deploy authorized-keys --target T --account A [--command CMD] [--from CIDR] [--legacy] [--config FILE]", stderr)
	cfgPath := configFlag(fs)
	target := fs.String("target", "", "target name (required)")
	account := fs.String("account", "", "account name (required)")
	command := fs.String("command", "", "force this command (e.g. /usr/local/bin/airlock-action --policy /etc/airlock/action.hcl)")
	from := fs.String("from", "", "only from these addresses or CIDRs (comma-separated)")
	legacy := fs.Bool("legacy", false, "also spell out no-port-forwarding,no-agent-forwarding,… for servers older than OpenSSH 7.2")
	jumpTo := fs.String("jump-to", "", "the line of a jump host (--target) for these targets (comma-separated; each has via = the jump host): forwarding to their addresses only, never a session")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if *target == "" || *account == "" && *jumpTo == "" {
		return failf(stderr, "--target and --account are required")
	}
	cfg, err := config.LoadAdmin(config.Path(*cfgPath))
	if err != nil {
		return failf(stderr, "%v", explainConfig(err, *cfgPath))
	}
	t, ok := cfg.Targets[*target]
	if !ok {
		return failf(stderr, "no target %q in %s", *target, cfg.Path)
	}
	var jumps []string
	if *jumpTo != "" {
		if *command != "" || *legacy {
			return failf(stderr, "--jump-to makes a jump host's line, which runs no command: drop --command and --legacy")
		}
		for name := range strings.SplitSeq(*jumpTo, ",") {
			name = strings.TrimSpace(name)
			inner, ok := cfg.Targets[name]
			switch {
			case !ok:
				return failf(stderr, "--jump-to: no target %q in %s", name, cfg.Path)
			case inner.Via != *target:
				return failf(stderr, "--jump-to: target %q is not reached through %q (set via = %q in its block)", name, *target, *target)
			case *account == "":
				*account = inner.ViaAccount
			case *account != inner.ViaAccount:
				return failf(stderr, "--jump-to: target %q goes through account %q of %q, not %q: make one line per account", name, inner.ViaAccount, *target, *account)
			}
			if !slices.Contains(jumps, inner.Address) {
				jumps = append(jumps, inner.Address)
			}
		}
	}
	a, ok := t.Accounts[*account]
	if !ok {
		return failf(stderr, "target %q has no account %q", *target, *account)
	}
	cred := cfg.Credentials[a.Credential]
	var key ssh.PublicKey
	if cred.CA {
		ca, err := config.LoadCA(cfg, cred)
		if err != nil {
			return failf(stderr, "the account uses the gateway CA: %v", err)
		}
		key = ca.PublicKey()
	} else if key, err = deploy.CredentialPublicKey(cred.PrivateKeyFile); err != nil {
		return failf(stderr, "%v", err)
	}
	line, err := deploy.AuthorizedKeysLine(key, deploy.LineOptions{Target: *target, Account: *account,
		Command: *command, From: *from, Legacy: *legacy, CertAuthority: cred.CA, JumpTo: jumps})
	if err != nil {
		return failf(stderr, "%v", err)
	}
	fmt.Fprintln(stdout, line)
	if len(jumps) > 0 {
		fmt.Fprintf(stderr, "airlock: port-forwarding also allows remote forwarding (ssh -R), which permitopen does not limit; on %s, give the account local forwarding only:\n  Match User %s\n      AllowTcpForwarding local\n      PermitListen none\n      AllowStreamLocalForwarding no\n", *target, *account)
	}
	return 0
}

func deployInstall(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock deploy install", "airlock deploy install --authorized-keys FILE --line LINE [--remove]", stderr)
	file := fs.String("authorized-keys", "", "the authorized_keys file to change (required)")
	line := fs.String("line", "", "the line from airlock deploy authorized-keys (required; with --remove, the line or its airlock: comment)")
	remove := fs.Bool("remove", false, "remove the line instead of installing it")
	fs.String("config", "", "accepted like every verb's and ignored: the file to change is --authorized-keys")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if *file == "" || *line == "" {
		return failf(stderr, "--authorized-keys and --line are required")
	}
	var change deploy.Change
	var err error
	if *remove {
		change, err = deploy.RemoveLine(*file, *line)
	} else {
		change, err = deploy.InstallLine(*file, *line)
	}
	if err != nil {
		return failf(stderr, "%v", err)
	}
	fmt.Fprintf(stdout, "%s: %s\n", *file, change)
	return 0
}

// checkFingerprint refuses a malformed fingerprint before anything is
// scanned: Select with no offered keys checks only its form.
func checkFingerprint(fp string) error {
	if _, err := deploy.Select(nil, fp); !errors.Is(err, deploy.ErrBadFingerprint) {
		return nil
	}
	const want = "fingerprints look like SHA256:AbC… (43 base64 characters after \"SHA256:\"), as printed by `airlock hosts scan` or `ssh-keygen -lf`"
	if _, err := deploy.Select(nil, "SHA256:"+fp); !errors.Is(err, deploy.ErrBadFingerprint) {
		return fmt.Errorf("--fingerprint %s lacks its \"SHA256:\" prefix: %s", fp, want)
	}
	return fmt.Errorf("--fingerprint %q is not a SHA256 fingerprint: %s", fp, want)
}

// runCA runs "ca init" or "ca public-key".
func runCA(verb string, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock ca "+verb, "airlock ca "+verb+" [--config FILE]", stderr)
	cfgPath := configFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	cfg, err := config.LoadAdmin(config.Path(*cfgPath))
	if err != nil {
		return failf(stderr, "%v", explainConfig(err, *cfgPath))
	}
	var pub ssh.PublicKey
	if verb == "init" {
		if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
			return failf(stderr, "%v", err)
		}
		var created bool
		if pub, created, err = initCA(cfg); err != nil {
			return failf(stderr, "%v", err)
		}
		if created {
			fmt.Fprintf(stderr, "created the gateway CA in %s; put this line in each target's TrustedUserCAKeys file:\n", caFile(cfg))
		} else {
			fmt.Fprintf(stderr, "the gateway CA exists already (%s); it is never replaced. Its TrustedUserCAKeys line:\n", caFile(cfg))
		}
	} else {
		ca, err := deploy.LoadCA(caFile(cfg), nil)
		switch {
		case errors.Is(err, os.ErrNotExist) && cfg.Storage != nil:
			return failf(stderr, "%v (the replicas share one CA: copy keys/ca and keys/ca.pub from a replica that has it; only when none has, run airlock ca init)", err)
		case errors.Is(err, os.ErrNotExist):
			return failf(stderr, "%v (run airlock ca init first)", err)
		case err != nil:
			return failf(stderr, "%v", err)
		}
		pub = ca.PublicKey()
	}
	fmt.Fprintln(stdout, deploy.CAPublicKeyLine(pub))
	// To compare out of band with what a target trusts (ssh-keygen -lf).
	fmt.Fprintf(stderr, "its fingerprint: %s\n", ssh.FingerprintSHA256(pub))
	return 0
}

// initCA makes the gateway CA (deploy.InitCA). With a storage block the
// replicas share one CA: one the database records already is never made
// here (copy it from a replica), and one made here is recorded, or taken
// back if another replica recorded its own meanwhile.
func initCA(cfg *config.Config) (ssh.PublicKey, bool, error) {
	if cfg.Storage == nil {
		return deploy.InitCA(caFile(cfg))
	}
	ctx := context.Background()
	db, err := engine.OpenStorage(ctx, cfg)
	if err != nil {
		return nil, false, err
	}
	defer db.Close()
	shared, err := engine.SharedCA(ctx, db)
	if err != nil {
		return nil, false, err
	}
	_, statErr := os.Lstat(caFile(cfg))
	if shared != "" && errors.Is(statErr, os.ErrNotExist) {
		return nil, false, fmt.Errorf("the replicas share a gateway CA (fingerprint %s): copy %s and %s from a replica that has it (airlock storage status lists the fingerprints); a new one here would not be trusted where the other is",
			shared, caFile(cfg), caFile(cfg)+".pub")
	}
	pub, created, err := deploy.InitCA(caFile(cfg))
	if err != nil {
		return nil, false, err
	}
	if err := engine.ClaimCA(ctx, db, cfg.StateDir); err != nil {
		if created {
			os.Remove(caFile(cfg))
			os.Remove(caFile(cfg) + ".pub")
		}
		return nil, false, err
	}
	return pub, created, nil
}

func hostsScan(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fs := newFlagSet("airlock hosts scan", "airlock hosts scan [--timeout DUR] HOST[:PORT]", stderr)
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	fs.String("config", "", "accepted like every verb's and ignored: scan trusts nothing and needs no configuration")
	addr, code, ok := parseVerb(fs, args, 1, stdout, stderr)
	if !ok {
		return code
	}
	if addr == "" {
		return failf(stderr, "give the address to scan: airlock hosts scan HOST[:PORT]")
	}
	addr, err := deploy.SSHAddress(addr)
	if err != nil {
		return usageErrorf(stderr, "%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	keys, err := deploy.Scan(ctx, addr)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	fmt.Fprintf(stderr, "%s offers these host keys. Nothing is trusted yet: compare a fingerprint with the target's own\n(ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub on its console), then run airlock hosts pin.\n", addr)
	for _, k := range keys {
		fmt.Fprintln(stdout, k)
	}
	return 0
}

func hostsPin(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fs := newFlagSet("airlock hosts pin", "airlock hosts pin TARGET --fingerprint SHA256:… [--replace] [--known-hosts FILE] [--config FILE]", stderr)
	cfgPath := configFlag(fs)
	fp := fs.String("fingerprint", "", "the SHA256:… fingerprint you confirmed out of band (required)")
	kh := fs.String("known-hosts", "", "write the pin to this known_hosts file instead of the configuration's host_keys")
	replace := fs.Bool("replace", false, "make this the target's only pinned key (a rotation: the old ones are trusted no more)")
	target, code, ok := parseVerb(fs, args, 1, stdout, stderr)
	if !ok {
		return code
	}
	if target == "" || *fp == "" {
		return failf(stderr, "usage: airlock hosts pin TARGET --fingerprint SHA256:…")
	}
	if err := checkFingerprint(*fp); err != nil {
		return usageErrorf(stderr, "%v", err)
	}
	res, err := deploy.Pin(ctx, deploy.PinOptions{ConfigFile: config.Path(*cfgPath), Target: target, Fingerprint: *fp, KnownHostsFile: *kh, Replace: *replace})
	if err != nil {
		if errors.Is(err, deploy.ErrFingerprintNotOffered) {
			return failf(stderr, "%v: the server of target %s does not offer that key; do not pin anything until you know why", err, target)
		}
		return failf(stderr, "%v", explainConfig(err, *cfgPath))
	}
	fmt.Fprintf(stdout, "%s: %s (%s in %s)\n", target, res.Change, res.Pinned, res.File)
	if res.Change != deploy.Unchanged {
		fmt.Fprintln(stderr, "a running gateway uses the new pin once it reloads: airlock config reload (or systemctl reload airlock, or SIGHUP)")
	}
	return 0
}
