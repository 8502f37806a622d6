package config

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/deploy/policy"
	"github.com/airlockgw/airlock/gateway/classify"
	"github.com/airlockgw/airlock/sshexec"
)

// target reads one target block and its account blocks.
func (c *checker) target(cfg *Config, r *rawTarget, base string) {
	if !nameRE.MatchString(r.Name) {
		c.Errorf(r.DefRange, "target name %q: use letters, digits, '.', '_' and '-' (at most 63)", r.Name)
		return
	}
	if _, dup := cfg.Targets[r.Name]; dup {
		c.Errorf(r.DefRange, "target %q is defined twice", r.Name)
		return
	}
	if !c.require(set(r.AddressRange), r.DefRange, fmt.Sprintf("target %q: address", r.Name)) {
		return
	}
	t := &Target{
		Name:           r.Name,
		Address:        or(r.Address, c.Value(r.AddressRange), ""),
		KnownHostsFile: c.path("known_hosts_file", r.KnownHostsFile, r.KnownHostsFileRange, base),
		DefaultAccount: or(r.DefaultAccount, c.Value(r.DefaultAccountRange), ""),
		MaxParallel:    c.within("max_parallel", r.MaxParallel, r.MaxParallelRange, DefaultMaxParallel, 1, 1024),
		Accounts:       map[string]*Account{},
	}
	if addr, err := deploy.SSHAddress(t.Address); err == nil {
		t.Address = addr // port 22 for a host alone
	} else {
		c.Errorf(r.AddressRange, `target %q: address %q is not host:port or a host alone, e.g. "10.0.0.24:22", "build-box" or "[2001:db8::5]"`, r.Name, t.Address)
	}
	before := len(c.Problems)
	if r.HostKeys != nil {
		for i, line := range c.strList(r.HostKeys) {
			k, err := sshexec.ParseHostKey(line)
			if err != nil {
				c.Errorf(r.HostKeys.Range, "target %q: host_keys[%d] is not a public key line such as \"ssh-ed25519 AAAA…\": %v", r.Name, i, err)
				continue
			}
			t.HostKeys = append(t.HostKeys, k)
		}
	}
	if len(t.HostKeys) == 0 && t.KnownHostsFile == "" && len(c.Problems) == before && !c.allowUnpinned {
		c.Errorf(r.DefRange, "target %q has no host_keys and no known_hosts_file: airlock never trusts a host key on first use; run `airlock hosts scan %s`, confirm the fingerprint out of band, then `airlock hosts pin %s --fingerprint SHA256:… --config %s`", r.Name, t.Address, r.Name, cfg.Path)
	}
	for _, ra := range r.Accounts {
		c.account(cfg, t, ra, base)
	}
	switch {
	case len(t.Accounts) == 0:
		c.Errorf(r.DefRange, "target %q has no account block", r.Name)
	case t.DefaultAccount == "" && len(t.Accounts) == 1:
		t.DefaultAccount = t.AccountNames[0]
	case t.DefaultAccount != "":
		if _, ok := t.Accounts[t.DefaultAccount]; !ok {
			c.Errorf(r.DefaultAccountRange, "target %q: default_account %q is not one of its accounts (%s)", r.Name, t.DefaultAccount, names(t.Accounts))
		}
	}
	cfg.Targets[t.Name] = t
	cfg.TargetNames = append(cfg.TargetNames, t.Name)
}

// account reads one account block of the target t.
func (c *checker) account(cfg *Config, t *Target, ra *rawAccount, base string) {
	if !nameRE.MatchString(ra.Name) {
		c.Errorf(ra.DefRange, "account name %q: use letters, digits, '.', '_' and '-' (at most 63)", ra.Name)
		return
	}
	if _, dup := t.Accounts[ra.Name]; dup {
		c.Errorf(ra.DefRange, "target %q: account %q is defined twice", t.Name, ra.Name)
		return
	}
	c.require(set(ra.CredentialRange), ra.DefRange, fmt.Sprintf("target %q account %q: credential", t.Name, ra.Name))
	a := &Account{
		Name:        ra.Name,
		Credential:  or(ra.Credential, c.Value(ra.CredentialRange), ""),
		Approval:    approvals.ModeCall,
		MaxTimeout:  c.duration("max_timeout", ra.MaxTimeout, ra.MaxTimeoutRange, DefaultMaxTimeout, 24*time.Hour),
		Output:      OutputPolicy(or(ra.Output, c.Value(ra.OutputRange), string(OutputFull))),
		MaxStdin:    c.size(ra.MaxStdin, DefaultMaxStdin, 0, MaxStdinLimit),
		MaxTransfer: c.size(ra.MaxXfer, DefaultMaxTransfer, 0, MaxTransferLimit),
		MaxOutput:   c.size(ra.MaxOutput, DefaultMaxOutput, MinMaxOutput, MaxOutputLimit),
		OnSecret:    or(ra.OnSecret, c.Value(ra.OnSecretRange), OnSecretRedact),
	}
	if per := cfg.Transfer.SpoolMaxPerRequester; a.MaxTransfer > per {
		r := ra.DefRange
		if ra.MaxXfer != nil {
			r = ra.MaxXfer.Range
		}
		c.Errorf(r, "target %q account %q: max_transfer (%d bytes) is more than transfer.spool_max_per_requester (%d bytes), so no such file could be kept on the gateway: lower max_transfer or raise the transfer block's spool_max and spool_max_per_requester",
			t.Name, ra.Name, a.MaxTransfer, per)
	}
	if a.OnSecret != OnSecretRedact && a.OnSecret != OnSecretRefuse {
		c.Errorf(ra.OnSecretRange, `target %q account %q: on_secret must be "redact" or "refuse"`, t.Name, ra.Name)
	}
	a.Escalate = c.classes(ra.Escalate, t.Name, ra.Name)
	a.Refuse = c.classes(ra.Refuse, t.Name, ra.Name)
	for _, p := range c.strList(ra.Deny) {
		re, err := regexp.Compile(p)
		if err != nil {
			c.Errorf(ra.Deny.Range, "target %q account %q: deny_patterns: %v", t.Name, ra.Name, err)
			continue
		}
		a.DenyPatterns = append(a.DenyPatterns, re)
	}
	c.policy(a, ra, t.Name)
	if set(ra.ActionPolRange) {
		a.ActionPolicyFile = c.path("action_policy", ra.ActionPol, ra.ActionPolRange, base)
		if a.ActionPolicyFile != "" {
			p, err := policy.Load(a.ActionPolicyFile)
			if err != nil {
				c.Errorf(ra.ActionPolRange, "target %q account %q: action_policy: %v", t.Name, ra.Name, err)
			}
			a.ActionPolicy = p
		}
	}
	c.enforceReadOnly(a, ra, t.Name)
	if _, ok := cfg.Credentials[a.Credential]; !ok && set(ra.CredentialRange) {
		c.Errorf(ra.CredentialRange, "target %q account %q: no credential %q is defined (defined: %s)", t.Name, ra.Name, a.Credential, names(cfg.Credentials))
	}
	if c.Value(ra.ApprovalRange) {
		if m, err := approvals.ParseMode(ra.Approval); err == nil {
			a.Approval = m
		} else {
			c.Errorf(ra.ApprovalRange, `target %q account %q: approval must be "run" or "call"`, t.Name, ra.Name)
		}
	}
	switch a.Output {
	case OutputFull, OutputTail, OutputNone:
	default:
		c.Errorf(ra.OutputRange, `target %q account %q: output must be "full", "tail" or "none"`, t.Name, ra.Name)
	}
	t.Accounts[a.Name] = a
	t.AccountNames = append(t.AccountNames, a.Name)
}

// via checks a target's via: another target, and the account on it
// ("account@bastion", or the bastion's default account), with no loop and
// at most sshexec.MaxHops jump hosts on the way.
func (c *checker) via(cfg *Config, r *rawTarget) {
	t := cfg.Targets[r.Name]
	if !c.Value(r.ViaRange) || t == nil || t.Name != r.Name {
		return
	}
	v := r.Via
	acct, name, hasAcct := strings.Cut(v, "@")
	if !hasAcct {
		acct, name = "", v
	}
	j, ok := cfg.Targets[name]
	switch {
	case !ok:
		c.Errorf(r.ViaRange, "target %q: via %q: no target %q is defined (a jump host is another target block, with its own host keys and account; targets: %s)", r.Name, clip(v), clip(name), names(cfg.Targets))
		return
	case name == t.Name:
		c.Errorf(r.ViaRange, "target %q: via names the target itself", r.Name)
		return
	case acct == "":
		acct = j.DefaultAccount
		if acct == "" {
			c.Errorf(r.ViaRange, "target %q: via %q: target %q has several accounts and no default_account; write via = \"ACCOUNT@%s\"", r.Name, v, name, name)
			return
		}
	}
	if _, ok := j.Accounts[acct]; !ok {
		c.Errorf(r.ViaRange, "target %q: via %q: target %q has no account %q (accounts: %s)", r.Name, clip(v), name, clip(acct), names(j.Accounts))
		return
	}
	t.Via, t.ViaAccount = name, acct
}

// chain checks a target's way through its jump hosts, once every via is
// known: a loop, or more hops than allowed, is an error of each target on
// it.
func (c *checker) chain(cfg *Config, r *rawTarget) {
	t := cfg.Targets[r.Name]
	if !set(r.ViaRange) || t == nil || t.Via == "" {
		return
	}
	seen := map[string]bool{t.Name: true}
	hops := 0
	for at := cfg.Targets[t.Via]; at != nil; at = cfg.Targets[at.Via] {
		if seen[at.Name] {
			c.Errorf(r.ViaRange, "target %q: via makes a loop through %q", r.Name, at.Name)
			return
		}
		seen[at.Name] = true
		if hops++; hops > sshexec.MaxHops {
			c.Errorf(r.ViaRange, "target %q: more than %d jump hosts on the way", r.Name, sshexec.MaxHops)
			return
		}
		if at.Via == "" {
			return
		}
	}
}

// policy reads an account's allow_unreviewed, max_grant and quota.
func (c *checker) policy(a *Account, ra *rawAccount, target string) {
	a.AllowUnreviewed = c.classes(ra.Unreviewed, target, ra.Name)
	for _, cl := range a.AllowUnreviewed {
		if cl > classify.ReadOnly {
			// A mutating command can already make later ones run
			// programs (a configuration file, a start-up file, a
			// symbolic link); only reading passes with no one.
			c.Errorf(ra.Unreviewed.Range, "target %q account %q: allow_unreviewed may list read_only only: %s commands always need a reviewer", target, ra.Name, cl)
		}
		for _, esc := range a.Escalate {
			if cl >= esc {
				c.Errorf(ra.Unreviewed.Range, "target %q account %q: %s is both allowed unreviewed and escalated", target, ra.Name, cl)
			}
		}
	}
	if c.Value(ra.MaxGrantRange) && ra.MaxGrant != "0" {
		a.MaxGrant = c.duration("max_grant", ra.MaxGrant, ra.MaxGrantRange, 0, MaxGrantLimit)
	}
	if ra.Quota != nil {
		q, err := parseQuota(ra.Quota)
		if err != nil {
			c.Errorf(ra.Quota.Range, "target %q account %q: quota: %v", target, ra.Name, err)
		}
		a.Quota = q
	}
}

// classes reads a list of command classes (escalate, refuse).
func (c *checker) classes(a *hcl.Attribute, target, account string) []classify.Class {
	var out []classify.Class
	for _, s := range c.strList(a) {
		cl, err := classify.ParseClass(s)
		if err != nil {
			c.Errorf(a.Range, "target %q account %q: %s: %v", target, account, a.Name, err)
			continue
		}
		out = append(out, cl)
	}
	return out
}

// enforceReadOnly reads an account's enforce_read_only: only a target
// that runs airlock-action can enforce it, and the gateway knows one does
// by the copy of its policy (action_policy).
func (c *checker) enforceReadOnly(a *Account, ra *rawAccount, target string) {
	if !c.Value(ra.EnforceRORange) || !ra.EnforceRO {
		return
	}
	a.EnforceReadOnly = true
	if a.ActionPolicyFile == "" {
		c.Errorf(ra.EnforceRORange, "target %q account %q: enforce_read_only needs action_policy: only a target whose forced command is airlock-action can run a command read-only, and the account names the copy of its policy to say it is one", target, ra.Name)
		return
	}
	if a.ActionPolicy == nil {
		return // action_policy's own problem is reported
	}
	for _, v := range a.ActionPolicy.Verbs {
		if v.RunAs != "" && v.Class == "read_only" {
			c.Errorf(ra.EnforceRORange, "target %q account %q: enforce_read_only: verb %s (%s:%d) runs as %s and is declared read_only, but sudo cannot run read-only-enforced (no_new_privs defeats its setuid), so the target would refuse every request of it; declare it another class", target, ra.Name, v.Name, a.ActionPolicy.File, v.Line, v.RunAs)
		}
	}
}

// SharedLogFiles warns of accounts of one target whose action_policy
// copies name the same log_file: airlock-action runs as each account, and
// the account that did not create the file is refused every request
// unless both may write it (a group file). Each warning names the target,
// the accounts, the file and the fix.
func SharedLogFiles(cfg *Config) []string {
	var warnings []string
	for _, tn := range cfg.TargetNames {
		t := cfg.Targets[tn]
		byFile := map[string][]string{}
		var files []string
		for _, an := range t.AccountNames {
			a := t.Accounts[an]
			if a.ActionPolicy == nil || a.ActionPolicy.LogFile == "" {
				continue
			}
			f := a.ActionPolicy.LogFile
			if byFile[f] == nil {
				files = append(files, f)
			}
			byFile[f] = append(byFile[f], an)
		}
		for _, f := range files {
			if accts := byFile[f]; len(accts) > 1 {
				warnings = append(warnings, fmt.Sprintf("target %q: accounts %s share log_file %s (their action_policy names it): airlock-action writes it as each account, and refuses every request of an account that cannot write the file another created; "+
					"fix: give each account a policy with its own log_file, or on the target make the file writable by a group of all of them (chgrp GROUP %s && chmod 0660 %s)",
					tn, strings.Join(accts, ", "), f, f, f))
			}
		}
	}
	return warnings
}
