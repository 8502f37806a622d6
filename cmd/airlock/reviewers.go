package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"syscall"
	"text/tabwriter"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
)

func init() {
	commands["reviewer"] = (&group{name: "reviewer", usage: reviewerUsage, verbs: map[string]verbFunc{
		"add":     bind(reviewerChange, "add"),
		"passwd":  bind(reviewerChange, "passwd"),
		"disable": bind(reviewerChange, "disable"),
		"enable":  bind(reviewerChange, "enable"),
		"remove":  bind(reviewerChange, "remove"),
		"rename":  reviewerRename,
		"list":    reviewerList,
		"link":    reviewerLink,
	}}).command("add, list, disable, enable, rename and remove reviewer accounts, set their passwords, make login links (operator)")
}

const reviewerUsage = `usage: airlock reviewer VERB [flags] [args]

Reviewer accounts with a local password. Run the verbs as the gateway's
user: while the gateway runs they go through its local socket, and each
change is recorded in the audit log before it takes effect; while none
runs they change the state database directly, and the next gateway to
start records them (marked offline).

verbs:
  add NAME
      create an account; the password (12 to 1024 bytes) is read from the
      terminal, or from the file named by $AIRLOCK_PASSWORD_FILE
  passwd NAME
      set a new password, read the same way; the reviewer's sessions and
      tokens end at once
  disable NAME
      the reviewer can no longer log in or decide; its sessions and tokens
      end at once (enable brings none of them back)
  enable NAME
      let a disabled reviewer log in again
  remove NAME
      delete the account and its tokens; what it decided stays in the
      audit log under its name
  rename NAME NEW-NAME
      give the account a new name (for a single sign-on account: the
      name the identity provider now gives that person, which it refuses
      until the account has it); its sessions and tokens end. A
      reviewer "NAME" block of the configuration must first be copied as
      reviewer "NEW-NAME"
  list [--json]
      the accounts: name, enabled, created
  link NAME
      print a one-time link that logs the reviewer into the pages without
      a password; it works once, for ` + engine.LoginLinkLifetime + `, and is recorded
      in the audit log (reviewer.link_issued). It is a credential: give it
      only to that reviewer. Needs the running gateway and its HTTP
      listener; a disabled reviewer gets none

Each verb takes --config FILE (default $AIRLOCK_CONFIG, else ./airlock.hcl).
`

func reviewerChange(verb string, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock reviewer "+verb, "airlock reviewer "+verb+" [--config FILE] NAME", stderr)
	cfgPath := configFlag(fs)
	name, code, ok := parseVerb(fs, args, 1, stdout, stderr)
	if !ok {
		return code
	}
	if name == "" {
		return failf(stderr, "give the reviewer's name: airlock reviewer %s NAME", verb)
	}
	// The configuration first: a missing one is said before a password
	// is asked for.
	cfg, ok := loadConfig(*cfgPath, stderr)
	if !ok {
		return 1
	}
	change := map[string]engine.ReviewerChange{"add": engine.ReviewerAdd, "passwd": engine.ReviewerPassword,
		"disable": engine.ReviewerDisable, "enable": engine.ReviewerEnable, "remove": engine.ReviewerRemove}[verb]
	var password string
	if change == engine.ReviewerAdd || change == engine.ReviewerPassword {
		p, err := readPassword(stderr, fmt.Sprintf("new password for reviewer %s: ", name), true)
		if err != nil {
			return failf(stderr, "%v", err)
		}
		password = p
	}
	online := func(c *api.Client) error {
		path, method := "/v1/reviewers/"+url.PathEscape(name)+"/"+verb, http.MethodPost
		var body any = struct{}{}
		switch change {
		case engine.ReviewerAdd:
			path, body = "/v1/reviewers", api.ReviewerRequest{Name: name, Password: password}
		case engine.ReviewerPassword:
			path, body = "/v1/reviewers/"+url.PathEscape(name)+"/password", api.ReviewerRequest{Password: password}
		case engine.ReviewerRemove:
			path, method, body = "/v1/reviewers/"+url.PathEscape(name), http.MethodDelete, nil
		}
		return c.Do(context.Background(), method, path, body, nil)
	}
	offline := func(acc *approvals.Accounts, by string) error {
		ctx, secret := context.Background(), approvals.NewSecret(password)
		var err error
		switch change {
		case engine.ReviewerAdd:
			err = acc.Add(ctx, name, secret, by)
		case engine.ReviewerPassword:
			err = acc.SetPassword(ctx, name, secret, by)
		case engine.ReviewerDisable, engine.ReviewerEnable:
			err = acc.SetEnabled(ctx, name, change == engine.ReviewerEnable, by)
		case engine.ReviewerRemove:
			err = acc.Remove(ctx, name, by)
		}
		return engine.ReviewerError(name, err)
	}
	how, ok := reviewerAdmin(cfg, stderr, online, offline)
	if !ok {
		return 1
	}
	done := map[string]string{"add": "added", "passwd": "has a new password; its sessions and tokens ended",
		"disable": "disabled; its sessions and tokens ended", "enable": "enabled", "remove": "removed"}[verb]
	fmt.Fprintf(stdout, "reviewer %s %s (%s)\n", name, done, how)
	return 0
}

func reviewerRename(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock reviewer rename", "airlock reviewer rename [--config FILE] NAME NEW-NAME", stderr)
	cfgPath := configFlag(fs)
	pos, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if len(pos) != 2 {
		return usageErrorf(stderr, "give the reviewer's name and its new name: airlock reviewer rename NAME NEW-NAME")
	}
	name, newName := pos[0], pos[1]
	cfg, ok := loadConfig(*cfgPath, stderr)
	if !ok {
		return 1
	}
	online := func(c *api.Client) error {
		return c.Do(context.Background(), http.MethodPost, "/v1/reviewers/"+url.PathEscape(name)+"/rename", api.RenameRequest{NewName: newName}, nil)
	}
	offline := func(acc *approvals.Accounts, by string) error {
		if err := engine.RenameAllowed(cfg, name, newName); err != nil {
			return err
		}
		err := acc.Rename(context.Background(), name, newName, by)
		if errors.Is(err, approvals.ErrUnknownReviewer) {
			return engine.ReviewerError(name, err)
		}
		return engine.ReviewerError(newName, err)
	}
	how, ok := reviewerAdmin(cfg, stderr, online, offline)
	if !ok {
		return 1
	}
	fmt.Fprintf(stdout, "reviewer %s is now %s; its sessions and tokens ended (%s)\n", name, newName, how)
	return 0
}

func reviewerList(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock reviewer list", "airlock reviewer list [--config FILE] [--json]", stderr)
	cfgPath := configFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, code, ok := parseVerb(fs, args, 0, stdout, stderr); !ok {
		return code
	}
	var list []api.Reviewer
	online := func(c *api.Client) error {
		return c.Do(context.Background(), http.MethodGet, "/v1/reviewers", nil, &list)
	}
	offline := func(acc *approvals.Accounts, _ string) error {
		infos, err := acc.List(context.Background())
		for _, r := range infos {
			list = append(list, api.Reviewer{Name: r.Name, Enabled: r.Enabled, Source: r.Source, CreatedAt: r.CreatedAt})
		}
		return err
	}
	cfg, ok := loadConfig(*cfgPath, stderr)
	if !ok {
		return 1
	}
	if _, ok := reviewerAdmin(cfg, stderr, online, offline); !ok {
		return 1
	}
	if *asJSON {
		return printJSON(stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no reviewer accounts; add one with airlock reviewer add NAME")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLOGIN\tSTATE\tCREATED")
	for _, r := range list {
		state := "enabled"
		if !r.Enabled {
			state = "disabled"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", visible(r.Name), r.Source, state, r.CreatedAt.Local().Format(timeWithZone))
	}
	tw.Flush()
	return 0
}

// reviewerLink asks the running gateway for a one-time login link: the
// link lives in the gateway's memory, so there is no offline way.
func reviewerLink(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock reviewer link", "airlock reviewer link [--config FILE] NAME", stderr)
	cfgPath := configFlag(fs)
	name, code, ok := parseVerb(fs, args, 1, stdout, stderr)
	if !ok {
		return code
	}
	if name == "" {
		return usageErrorf(stderr, "give the reviewer's name: airlock reviewer link NAME")
	}
	c, err := operatorClient(*cfgPath)
	if err != nil {
		return failf(stderr, "%v; a login link is made by the running gateway, as its user", err)
	}
	var l api.LoginLink
	err = c.Do(context.Background(), http.MethodPost, "/v1/reviewers/"+url.PathEscape(name)+"/link", struct{}{}, &l)
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		return failf(stderr, "%s", ae.Err.Message)
	case err != nil:
		return failf(stderr, "%v", err)
	}
	fmt.Fprintln(stdout, l.URL)
	fmt.Fprintf(stderr, "a one-time login link for reviewer %s: it works once, for %s (until %s); recorded in the audit log. Give it only to %s.\n",
		name, l.Lifetime, l.ExpiresAt.Local().Format(timeWithZone), name)
	return 0
}

// reviewerAdmin runs an account verb through the running gateway (online),
// or, when no gateway runs, on the state database itself (offline). It
// says which it was; a failure it prints.
func reviewerAdmin(cfg *config.Config, stderr io.Writer, online func(*api.Client) error, offline func(acc *approvals.Accounts, by string) error) (string, bool) {
	fail := func(format string, a ...any) bool {
		failf(stderr, format, a...)
		return false
	}
	c, cerr := api.LocalClient(cfg.Listen.Socket)
	switch {
	case cerr == nil:
		err := online(c)
		var ae *api.Error
		switch {
		case err == nil:
			return "recorded in the audit log", true
		case errors.As(err, &ae):
			return "", fail("%s", ae.Err.Message)
		case !gatewayDown(err):
			return "", fail("the gateway at %s: %v", cfg.Listen.Socket, err)
		}
	case !errors.Is(cerr, os.ErrNotExist):
		// A gateway may run: never change its database behind its back.
		return "", fail("cannot tell whether a gateway runs (%v): run this as the gateway's user", cerr)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return "", fail("%v", err)
	}
	ctx := context.Background()
	db := filepath.Join(cfg.StateDir, "state.db")
	where := "changed in " + db + "; the next gateway to start records it in the audit log"
	var acc *approvals.Accounts
	pg, err := engine.OpenStorage(ctx, cfg)
	switch {
	case err != nil:
		return "", fail("%v", err)
	case pg != nil:
		// Replicas elsewhere may run: the shared database is theirs too,
		// and the first of them to sweep records the change.
		defer pg.Close()
		where = "changed in the shared database (" + sqldb.Describe(cfg.Storage.Postgres) + "); a running replica records it in the audit log within its lease, or the next to start"
		acc, err = approvals.OpenAccountsDB(ctx, pg, approvals.DefaultArgon2)
	default:
		acc, err = approvals.OpenAccounts(ctx, db, approvals.DefaultArgon2)
	}
	if err != nil {
		return "", fail("%v", err)
	}
	defer acc.Close()
	by := "unix"
	if u, err := user.Current(); err == nil {
		by = "unix:" + u.Username
	}
	if err := offline(acc, by); err != nil {
		return "", fail("%v", err)
	}
	return "no gateway runs here: " + where, true
}

// gatewayDown reports whether a request failed because no gateway
// listens on the socket (a stale control file, or none).
func gatewayDown(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}
