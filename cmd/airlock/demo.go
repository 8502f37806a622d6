package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/demo"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/sshexec"
)

func init() {
	commands["demo"] = command{summary: "run the whole flow on a built-in demo target (no config, no sshd)", run: runDemo}
}

const demoReviewer = "demo"

// demoEnv is a running demo: gateway, target and the files in dir.
type demoEnv struct {
	dir      string
	cfgFile  string
	pwFile   string
	password string
	link     string
	target   *demo.Target
	srv      *gateway.Server
	cfg      *config.Config
	stop     context.CancelFunc
	served   chan error
}

func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock demo", "airlock demo [--keep DIR] [--script]", stderr)
	keep := fs.String("keep", "", "keep the demo's state in `DIR` (created if missing) instead of a temporary directory removed at exit")
	script := fs.Bool("script", false, "run a scripted tour (approve a run, run commands, deny one, show a host key mismatch, verify the audit log) and exit")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	env, err := startDemo(ctx, *keep, stderr)
	if err != nil {
		return failf(stderr, "demo: %v", err)
	}
	defer env.close(*keep == "", stderr)
	if *script {
		// The tour ends the demo: print nothing that needs it running.
		env.printState(stdout, *keep == "")
		if err := env.tour(ctx, stdout); err != nil {
			fmt.Fprintf(stdout, "\nthe tour failed: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, "\nthe tour is over; everything it did is in the audit log above.")
		if *keep == "" {
			fmt.Fprintln(stdout, "Its state is removed now; with --keep DIR it stays for `airlock audit export --config DIR/airlock.hcl`.")
		} else {
			fmt.Fprintf(stdout, "Its state stays in %s: airlock audit export --config %s\n", env.dir, env.cfgFile)
		}
		return 0
	}
	bin, hint := env.helpers(ctx, stderr)
	env.printIntro(stdout, *keep == "", bin, hint)
	fmt.Fprintln(stdout, "Press Ctrl-C to stop the demo.")
	select {
	case <-ctx.Done():
	case err := <-env.served:
		if err != nil {
			return failf(stderr, "demo: %v", err)
		}
	}
	return 0
}

func startDemo(ctx context.Context, keep string, stderr io.Writer) (*demoEnv, error) {
	var dir string
	var err error
	if keep != "" {
		dir, err = filepath.Abs(keep)
		if err == nil {
			err = os.MkdirAll(dir, 0o700)
		}
	} else {
		dir, err = os.MkdirTemp("", "airlock-demo-")
	}
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	env := &demoEnv{dir: dir, cfgFile: filepath.Join(dir, "airlock.hcl"), pwFile: filepath.Join(dir, "reviewer-password")}
	if err := env.writeConfig(); err != nil {
		return nil, err
	}
	if err := env.addReviewer(ctx); err != nil {
		return nil, err
	}
	if err := env.startGateway(ctx); err != nil {
		return nil, err
	}
	return env, nil
}

// writeConfig makes the gateway's credential, starts the demo target that
// trusts it, and writes and loads the demo's configuration.
func (e *demoEnv) writeConfig() error {
	dir := e.dir
	// The gateway's credential, trusted by the demo target.
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	block, err := ssh.MarshalPrivateKey(priv, "airlock demo")
	if err != nil {
		return err
	}
	keyFile := filepath.Join(dir, "demo_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		return err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return err
	}
	scratch := filepath.Join(dir, "target")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return err
	}
	if e.target, err = demo.Start(scratch, signer.PublicKey()); err != nil {
		return err
	}
	hostKey := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(e.target.HostKey())))
	src := fmt.Sprintf(`# The configuration of this demo: a real airlock configuration.
state_dir = %q

listen {
  http = "127.0.0.1:0"
}

approval {
  timeout = "5m"
}

# A signed checkpoint after every entry, so that the investigator has
# signed checkpoints to verify at once (the default: every 100 entries or
# 30 seconds).
audit {
  checkpoint_every = "1 entries"
}

credential "demo" {
  private_key_file = %q
}

# The built-in demo target: an in-process SSH server on loopback that runs
# commands with /bin/sh -c in %s.
target "demo" {
  address         = %q
  host_keys       = [%q]
  default_account = "agent"

  # One approval covers the whole agent run.
  account "agent" {
    credential = "demo"
    approval   = "run"
  }

  # Every command is approved on its own.
  account "ops" {
    credential = "demo"
    approval   = "call"
  }
}
`, filepath.Join(dir, "state"), keyFile, scratch, e.target.Addr, hostKey)
	if err := os.WriteFile(e.cfgFile, []byte(src), 0o600); err != nil {
		return err
	}
	e.cfg, err = config.Load(e.cfgFile)
	return err
}

// addReviewer makes the demo reviewer with a random password (a kept demo
// directory's reviewer gets a new one).
func (e *demoEnv) addReviewer(ctx context.Context) error {

	// A reviewer with a random password.
	pw := make([]byte, 12)
	rand.Read(pw)
	e.password = hex.EncodeToString(pw)
	if err := os.WriteFile(e.pwFile, []byte(e.password+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.MkdirAll(e.cfg.StateDir, 0o700); err != nil {
		return err
	}
	acc, err := approvals.OpenAccounts(ctx, filepath.Join(e.cfg.StateDir, "state.db"), approvals.DefaultArgon2)
	if err != nil {
		return err
	}
	err = acc.Add(ctx, demoReviewer, approvals.NewSecret(e.password), "demo")
	acc.Close()
	if err != nil && !errors.Is(err, approvals.ErrReviewerExists) {
		return err
	}
	if errors.Is(err, approvals.ErrReviewerExists) {
		// A kept demo directory: reset the reviewer's password.
		acc, err := approvals.OpenAccounts(ctx, filepath.Join(e.cfg.StateDir, "state.db"), approvals.DefaultArgon2)
		if err != nil {
			return err
		}
		err = acc.SetPassword(ctx, demoReviewer, approvals.NewSecret(e.password), "demo")
		acc.Close()
		return err
	}
	return nil
}

// startGateway serves the demo's gateway until e.stop, and makes the
// reviewer's login link.
func (e *demoEnv) startGateway(ctx context.Context) error {
	var err error
	gateway.Version = version()
	e.srv, err = gateway.New(ctx, gateway.Options{Config: e.cfg, Logger: newLogger(e.cfg, io.Discard), ShutdownGrace: 5 * time.Second})
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	e.served = make(chan error, 1)
	go func() { e.served <- e.srv.Serve(sctx) }()
	select {
	case <-e.srv.Ready():
	case err := <-e.served:
		return err
	}
	e.link, err = e.srv.LoginLink(ctx, demoReviewer, "demo")
	return err
}

func (e *demoEnv) close(remove bool, stderr io.Writer) {
	if e.stop != nil {
		e.stop()
		if err := <-e.served; err != nil {
			fmt.Fprintf(stderr, "airlock: demo gateway: %v\n", err)
		}
	}
	if e.target != nil {
		e.target.Close()
	}
	if remove {
		os.RemoveAll(e.dir)
	}
}

// printState says where the demo lives, for the scripted tour.
func (e *demoEnv) printState(w io.Writer, temporary bool) {
	where := e.dir
	if temporary {
		where += " (removed when the tour ends)"
	}
	fmt.Fprintf(w, `airlock demo: a gateway and a built-in SSH target, on loopback only.

  state       %s
  target      demo (%s): account "agent" asks once per run, "ops" for every command
`, where, e.target.Addr)
}

// helpers finds (or makes) the airlock and airlock-ssh the printed
// commands name, so that they work as pasted: the ones next to this
// airlock when it was built or installed with them; else, for `go run
// ./cmd/airlock demo`, built from the module it runs in into the demo's
// directory. When neither works, dir is "" and hint says how to build
// them.
func (e *demoEnv) helpers(ctx context.Context, stderr io.Writer) (dir, hint string) {
	if exe, err := os.Executable(); err == nil {
		d := filepath.Dir(exe)
		if _, err := os.Stat(filepath.Join(d, "airlock-ssh")); err == nil {
			return d, ""
		}
	}
	hint = "go install github.com/airlockgw/airlock/cmd/...@latest"
	root := moduleRoot()
	if root == "" {
		return "", hint
	}
	dir = filepath.Join(e.dir, "bin")
	hint = fmt.Sprintf("go build -C %s -o %s/ ./cmd/airlock ./cmd/airlock-ssh", root, dir)
	fmt.Fprintf(stderr, "building airlock and airlock-ssh into %s for the commands below…\n", dir)
	build := exec.CommandContext(ctx, "go", "build", "-C", root, "-o", dir+"/", "./cmd/airlock", "./cmd/airlock-ssh")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(stderr, "could not build them (%v): %s\n", err, strings.TrimSpace(string(out)))
		return "", hint
	}
	return dir, ""
}

// moduleRoot is the directory of airlock's go.mod at or above the working
// directory, "" when there is none.
func moduleRoot() string {
	d, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			if first, _, _ := strings.Cut(string(b), "\n"); strings.TrimSpace(first) == "module github.com/airlockgw/airlock" {
				return d
			}
			return ""
		}
		if d == filepath.Dir(d) {
			return ""
		}
		d = filepath.Dir(d)
	}
}

func (e *demoEnv) printIntro(w io.Writer, temporary bool, bin, hint string) {
	url := "http://" + e.srv.HTTPAddr()
	airlockBin, sshBin, first := filepath.Join(bin, "airlock"), filepath.Join(bin, "airlock-ssh"), ""
	if bin == "" {
		airlockBin, sshBin, first = "airlock", "airlock-ssh", " (first put airlock and airlock-ssh on your PATH: "+hint+")"
	}
	where := e.dir
	if temporary {
		where += " (removed when the demo stops)"
	}
	fmt.Fprintf(w, `airlock demo: a gateway and a built-in SSH target, on loopback only.

  state       %s
  config      %s
  socket      %s
  reviewer    %s
              (a one-time login link, working once for %s; afterwards log in at %s/ui/
               as %q with the password in %s)
  target      demo (%s): account "agent" asks once per run, "ops" for every command

Try it in another terminal%s:

  # as an agent; the first command waits for a reviewer
  AIRLOCK_SOCKET=%s %s demo -- uname -a

  # as the reviewer
  export AIRLOCK_URL=%s AIRLOCK_REVIEWER=%s AIRLOCK_PASSWORD_FILE=%s
  %s approvals list
  %s approvals approve ID

  # as an investigator
  %s audit verify --config %s

  # an MCP client (Claude Desktop, Cursor, …) runs airlock mcp:
  {"mcpServers": {"airlock": {"command": %q, "args": ["mcp"], "env": {"AIRLOCK_SOCKET": %q}}}}

`, where, e.cfgFile, e.cfg.Listen.Socket, e.link, engine.LoginLinkLifetime, url, demoReviewer, e.pwFile, e.target.Addr, first,
		e.cfg.Listen.Socket, sshBin, url, demoReviewer, e.pwFile, airlockBin, airlockBin, airlockBin, e.cfgFile, airlockBin, e.cfg.Listen.Socket)
}

// tour runs the scripted walk-through.
func (e *demoEnv) tour(ctx context.Context, w io.Writer) error {
	ctl, err := api.ReadControl(e.cfg.Listen.Socket)
	if err != nil {
		return err
	}
	agent := api.NewLocalClient(e.cfg.Listen.Socket, ctl.Token)
	login, err := api.NewHTTPClient("http://"+e.srv.HTTPAddr(), "").Login(ctx, demoReviewer, e.password)
	if err != nil {
		return fmt.Errorf("reviewer login: %w", err)
	}
	reviewer := api.NewHTTPClient("http://"+e.srv.HTTPAddr(), login.Token)

	g := &guide{w: w, agent: agent, reviewer: reviewer}
	step := func(n int, text string) { fmt.Fprintf(w, "\n%d. %s\n", n, text) }
	run := func(req api.ActionRequest, decision, reason string) (*api.Action, error) {
		return g.run(ctx, req, decision, reason)
	}
	step(1, `The agent runs "echo hello" as account agent (run mode): the first action of its run waits for a reviewer.`)
	a, err := run(api.ActionRequest{Target: "demo", Command: "echo hello from the demo target"}, "approve", "")
	if err != nil {
		return err
	}
	if err := expect(a, sshexec.Exited); err != nil {
		return err
	}
	step(2, "The approved run's next actions pass without asking again; each is a fresh SSH connection.")
	for _, c := range []string{"uname -s", "ls -la", "exit 3"} {
		if a, err = run(api.ActionRequest{Target: "demo", Command: c}, "", ""); err != nil {
			return err
		}
		if err := expect(a, sshexec.Exited); err != nil {
			return err
		}
	}
	step(3, `Account ops is in call mode: every command is approved on its own. The reviewer denies this one.`)
	if a, err = run(api.ActionRequest{Target: "demo", Account: "ops", Command: "rm -rf ./important"}, "deny", "not during the demo"); err != nil {
		return err
	}
	if err := expect(a, sshexec.Denied); err != nil {
		return err
	}
	step(4, "The target's host key changes (a reinstall, or someone in the middle): nothing runs.")
	if err := e.target.RotateHostKey(); err != nil {
		return err
	}
	if a, err = run(api.ActionRequest{Target: "demo", Command: "echo should not run"}, "", ""); err != nil {
		return err
	}
	if err := expect(a, sshexec.HostKeyMismatch); err != nil {
		return err
	}
	step(5, "An investigator verifies the audit log: hash chain, Merkle tree, signed checkpoints.")
	key, err := auditchain.ReadVerifierKey(filepath.Join(e.cfg.StateDir, "keys", "checkpoint.vkey"))
	if err != nil {
		return err
	}
	rep, err := auditchain.Verify(ctx, auditchain.VerifyOptions{Path: filepath.Join(e.cfg.StateDir, "audit.db"), Key: key})
	if err != nil {
		return err
	}
	if !rep.Intact() {
		return fmt.Errorf("the audit log is damaged: %+v", rep.First())
	}
	fmt.Fprintf(w, "   → intact: %d entries, %d signed checkpoints (entries not yet covered by one: %d)\n", rep.Entries, rep.Checkpoints, rep.Uncovered)
	return nil
}

// guide runs the tour's actions as the agent and decides them as the
// reviewer, printing what each saw.
type guide struct {
	w               io.Writer
	agent, reviewer *api.Client
}

// show prints an action's outcome, output and next step.
func (g *guide) show(a *api.Action) {
	w := g.w
	fmt.Fprintf(w, "   → %s", a.Outcome)
	if a.ExitCode != nil {
		fmt.Fprintf(w, " (exit %d)", *a.ExitCode)
	}
	fmt.Fprintf(w, " [action %s]\n", a.ID)
	if out := strings.TrimSpace(a.Stdout); out != "" {
		for _, line := range strings.Split(out, "\n") {
			fmt.Fprintf(w, "     | %s\n", printable(line))
		}
	}
	if next := api.NextStep(a); next != "" {
		fmt.Fprintf(w, "     next step: %s\n", next)
	}
}

// decide waits for a pending request and decides it as the reviewer.
func (g *guide) decide(ctx context.Context, decision, reason string) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		list, err := g.reviewer.Approvals(ctx, "pending")
		if err != nil {
			return err
		}
		if len(list) == 0 {
			continue
		}
		a := list[0]
		fmt.Fprintf(g.w, "   reviewer sees a %s approval %s: %s on %s/%s, requested by %s\n", a.Kind, a.ID, printable(a.Command), a.Target, a.Account, printable(a.Requester))
		_, err = g.reviewer.Decide(ctx, a.ID, api.DecisionRequest{Decision: api.Decision(decision), Reason: reason, Digest: a.Digest})
		fmt.Fprintf(g.w, "   reviewer: %s\n", decision)
		return err
	}
	return errors.New("no approval request appeared")
}

// run sends req as the agent and, with a decision, decides the request
// it raises.
func (g *guide) run(ctx context.Context, req api.ActionRequest, decision, reason string) (*api.Action, error) {
	type res struct {
		a   *api.Action
		err error
	}
	ch := make(chan res, 1)
	go func() {
		a, err := g.agent.RunAction(ctx, req, api.Events{})
		ch <- res{a, err}
	}()
	if decision != "" {
		if err := g.decide(ctx, decision, reason); err != nil {
			return nil, err
		}
	}
	r := <-ch
	if r.err == nil {
		g.show(r.a)
	}
	return r.a, r.err
}

// expect says what went wrong when a tour action did not end as planned.
func expect(a *api.Action, outcome sshexec.Outcome) error {
	if a.Outcome != outcome {
		return fmt.Errorf("action %s ended %s (%s), expected %s", a.ID, a.Outcome, a.Detail, outcome)
	}
	return nil
}
