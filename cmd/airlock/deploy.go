package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/gateway"
)

func init() {
	commands["deploy"] = command{"authorized_keys lines for targets (deploy authorized-keys | install)", runDeploy}
	commands["ca"] = command{"the gateway's SSH CA (ca init | public-key)", runCA}
	commands["hosts"] = command{"scan and pin target host keys (hosts scan | pin)", runHosts}
}

// caFile is where the gateway CA's private key lives.
func caFile(cfg *gateway.Config) string { return filepath.Join(cfg.StateDir, "keys", "ca") }

func runDeploy(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: airlock deploy authorized-keys --target T --account A [--command CMD] [--from CIDR] [--legacy]\n       airlock deploy install --authorized-keys FILE --line LINE [--remove]")
		return 2
	}
	switch args[0] {
	case "authorized-keys":
		fs := newFlagSet("airlock deploy authorized-keys", "airlock deploy authorized-keys --target T --account A [--command CMD] [--from CIDR] [--legacy] [--config FILE]", stderr)
		cfgPath := configFlag(fs)
		target := fs.String("target", "", "target name (required)")
		account := fs.String("account", "", "account name (required)")
		command := fs.String("command", "", "force this command (e.g. /usr/local/bin/airlock-action --policy /etc/airlock/action.hcl)")
		from := fs.String("from", "", "only from these addresses or CIDRs (comma-separated)")
		legacy := fs.Bool("legacy", false, "also spell out no-port-forwarding,no-agent-forwarding,… for servers older than OpenSSH 7.2")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		if *target == "" || *account == "" {
			return failf(stderr, "--target and --account are required")
		}
		cfg, err := gateway.LoadAdminConfig(gateway.ConfigPath(*cfgPath))
		if err != nil {
			return failf(stderr, "%v", err)
		}
		t, ok := cfg.Targets[*target]
		if !ok {
			return failf(stderr, "no target %q in %s", *target, cfg.Path)
		}
		a, ok := t.Accounts[*account]
		if !ok {
			return failf(stderr, "target %q has no account %q", *target, *account)
		}
		cred := cfg.Credentials[a.Credential]
		var key ssh.PublicKey
		if cred.CA {
			ca, err := deploy.LoadCA(caFile(cfg), nil)
			if err != nil {
				return failf(stderr, "the account uses the gateway CA: %v (run airlock ca init first)", err)
			}
			key = ca.PublicKey()
		} else if key, err = deploy.CredentialPublicKey(cred.PrivateKeyFile); err != nil {
			return failf(stderr, "%v", err)
		}
		line, err := deploy.AuthorizedKeysLine(key, deploy.LineOptions{Target: *target, Account: *account,
			Command: *command, From: *from, Legacy: *legacy, CertAuthority: cred.CA})
		if err != nil {
			return failf(stderr, "%v", err)
		}
		fmt.Fprintln(stdout, line)
		return 0
	case "install":
		fs := newFlagSet("airlock deploy install", "airlock deploy install --authorized-keys FILE --line LINE [--remove]", stderr)
		file := fs.String("authorized-keys", "", "the authorized_keys file to change (required)")
		line := fs.String("line", "", "the line from airlock deploy authorized-keys (required; with --remove, the line or its airlock: comment)")
		remove := fs.Bool("remove", false, "remove the line instead of installing it")
		configFlag(fs) // accepted like every verb's; the file to change is --authorized-keys
		if fs.Parse(args[1:]) != nil {
			return 2
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
	return failf(stderr, "unknown verb %q: use authorized-keys or install", args[0])
}

func runCA(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "init" && args[0] != "public-key") {
		fmt.Fprintln(stderr, "usage: airlock ca init | public-key [--config FILE]")
		return 2
	}
	fs := newFlagSet("airlock ca "+args[0], "airlock ca "+args[0]+" [--config FILE]", stderr)
	cfgPath := configFlag(fs)
	if fs.Parse(args[1:]) != nil {
		return 2
	}
	cfg, err := gateway.LoadAdminConfig(gateway.ConfigPath(*cfgPath))
	if err != nil {
		return failf(stderr, "%v", err)
	}
	var pub ssh.PublicKey
	if args[0] == "init" {
		if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
			return failf(stderr, "%v", err)
		}
		var created bool
		if pub, created, err = deploy.InitCA(caFile(cfg)); err != nil {
			return failf(stderr, "%v", err)
		}
		if created {
			fmt.Fprintf(stderr, "created the gateway CA in %s; put this line in each target's TrustedUserCAKeys file:\n", caFile(cfg))
		} else {
			fmt.Fprintf(stderr, "the gateway CA exists already (%s); it is never replaced. Its TrustedUserCAKeys line:\n", caFile(cfg))
		}
	} else {
		ca, err := deploy.LoadCA(caFile(cfg), nil)
		if err != nil {
			return failf(stderr, "%v (run airlock ca init first)", err)
		}
		pub = ca.PublicKey()
	}
	fmt.Fprintln(stdout, deploy.CAPublicKeyLine(pub))
	return 0
}

func runHosts(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: airlock hosts scan ADDRESS | pin TARGET --fingerprint SHA256:… [--known-hosts FILE]")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	switch args[0] {
	case "scan":
		fs := newFlagSet("airlock hosts scan", "airlock hosts scan ADDRESS", stderr)
		timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
		configFlag(fs) // accepted like every verb's; scan trusts nothing and needs no configuration
		addr, rest := leadingArg(args[1:])
		if fs.Parse(rest) != nil {
			return 2
		}
		if addr == "" && fs.NArg() > 0 {
			addr = fs.Arg(0)
		}
		if addr == "" {
			return failf(stderr, "give the address to scan: airlock hosts scan HOST:PORT")
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
	case "pin":
		fs := newFlagSet("airlock hosts pin", "airlock hosts pin TARGET --fingerprint SHA256:… [--known-hosts FILE] [--config FILE]", stderr)
		cfgPath := configFlag(fs)
		fp := fs.String("fingerprint", "", "the SHA256:… fingerprint you confirmed out of band (required)")
		kh := fs.String("known-hosts", "", "write the pin to this known_hosts file instead of the configuration's host_keys")
		target, rest := leadingArg(args[1:])
		if fs.Parse(rest) != nil {
			return 2
		}
		if target == "" && fs.NArg() > 0 {
			target = fs.Arg(0)
		}
		if target == "" || *fp == "" {
			return failf(stderr, "usage: airlock hosts pin TARGET --fingerprint SHA256:…")
		}
		res, err := deploy.Pin(ctx, deploy.PinOptions{ConfigFile: gateway.ConfigPath(*cfgPath), Target: target, Fingerprint: *fp, KnownHostsFile: *kh})
		if err != nil {
			if errors.Is(err, deploy.ErrBadFingerprint) {
				return failf(stderr, "%v: the server at %s does not offer that key; do not pin anything until you know why", err, target)
			}
			return failf(stderr, "%v", err)
		}
		fmt.Fprintf(stdout, "%s: %s (%s in %s)\n", target, res.Change, res.Pinned, res.File)
		return 0
	}
	return failf(stderr, "unknown verb %q: use scan or pin", args[0])
}
