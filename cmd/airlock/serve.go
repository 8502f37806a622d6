package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/gateway"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/opa"
)

func init() {
	commands["serve"] = command{summary: "run the gateway", run: runServe}
	commands["config"] = (&group{name: "config", usage: configUsage, verbs: map[string]verbFunc{
		"check":  configCheck,
		"reload": configReload,
	}}).command("check the configuration, or have the running gateway reload it (config check, config reload)")
}

const configUsage = `usage: airlock config VERB [flags]

verbs:
  check [--config FILE]
      load the configuration as the gateway would and check the files it
      names; every problem is printed with its file:line
  reload [--config FILE]
      have the running gateway read its configuration file again and put
      it in force (as the gateway's user, over its socket; what SIGHUP and
      systemctl reload do). Actions in flight finish under the old one; a
      file with problems, or changes that need a restart (listen,
      state_dir, approval, audit, mcp, notify, logging), change nothing
      and are reported. Each configuration put in force is recorded in
      the audit log (config.loaded, with its SHA-256).
`

// configFlag adds the --config flag every verb but demo accepts.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "configuration `FILE` (default: $AIRLOCK_CONFIG, else ./airlock.hcl)")
}

func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n", usage)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprint(fs.Output(), "\nflags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args. When they ask for help it prints the usage to
// stdout and returns 0 and false; on a bad flag it prints the problem and
// the usage to the flag set's output and returns 2 and false.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (code int, ok bool) {
	stderr := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		stdout.Write(buf.Bytes())
		return 0, false
	}
	stderr.Write(buf.Bytes())
	return 2, false
}

// parseArgs parses args with flags before, between and after the
// positional arguments, which it returns; code and ok are parseFlags'.
func parseArgs(fs *flag.FlagSet, args []string, stdout io.Writer) (pos []string, code int, ok bool) {
	for {
		if code, ok := parseFlags(fs, args, stdout); !ok {
			return nil, code, false
		}
		rest := fs.Args()
		if len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), 0, true // no flags after "--"
		}
		if len(rest) == 0 {
			return pos, 0, true
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// parseVerb parses the arguments of a verb that takes up to max (0 or 1)
// positional arguments, and returns that argument or "".
func parseVerb(fs *flag.FlagSet, args []string, max int, stdout, stderr io.Writer) (arg string, code int, ok bool) {
	pos, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return "", code, false
	}
	if len(pos) > max {
		return "", usageErrorf(stderr, "%s: unexpected argument %q; run \"%s --help\"", fs.Name(), pos[max], fs.Name()), false
	}
	if len(pos) == 1 {
		arg = pos[0]
	}
	return arg, 0, true
}

// isSet reports whether the flag name was given.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// usageErrorf reports a usage error: exit code 2.
func usageErrorf(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "airlock: "+format+"\n", args...)
	return 2
}

// loadConfig loads the configuration and prints every problem found.
func loadConfig(path string, stderr io.Writer) (*config.Config, bool) {
	cfg, err := config.Load(config.Path(path))
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				fmt.Fprintln(stderr, p)
			}
			fmt.Fprintf(stderr, "airlock: %s in the configuration\n", count(len(ce.Problems), "problem"))
		} else {
			fmt.Fprintf(stderr, "airlock: %v\n", explainConfig(err, path))
		}
		return nil, false
	}
	return cfg, true
}

// explainConfig adds to err, when it is that the configuration file does
// not exist, which file was looked for and how to name another. flag is
// the --config flag's value.
func explainConfig(err error, flag string) error {
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(pe.Err, fs.ErrNotExist) || !samePath(pe.Path, config.Path(flag)) {
		return err
	}
	switch {
	case flag != "":
		return fmt.Errorf("%w: --config names no file; pass the gateway's configuration file", err)
	case os.Getenv("AIRLOCK_CONFIG") != "":
		return fmt.Errorf("%w: $AIRLOCK_CONFIG names no file; set it to the gateway's configuration file, or pass --config FILE", err)
	}
	return fmt.Errorf("%w: without --config or $AIRLOCK_CONFIG the configuration is ./airlock.hcl; pass --config FILE or set $AIRLOCK_CONFIG", err)
}

func samePath(a, b string) bool {
	a, errA := filepath.Abs(a)
	b, errB := filepath.Abs(b)
	return errA == nil && errB == nil && a == b
}

func newLogger(cfg *config.Config, stderr io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "airlock",
		Level:      hclog.LevelFromString(cfg.LogLevel),
		JSONFormat: cfg.LogFormat == "json",
		Output:     stderr,
	})
}

// defaultMemoryLimit is airlock serve's soft memory limit when GOMEMLIMIT
// is not set: well above what it lives on (tens of MiB with a hundred
// actions in flight), so that it only bounds bursts.
const defaultMemoryLimit = 64 << 20

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock serve", "airlock serve [--config FILE]", stderr)
	cfgPath := configFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageErrorf(stderr, "airlock serve takes no arguments; name the configuration with --config FILE")
	}
	cfg, ok := loadConfig(*cfgPath, stderr)
	if !ok {
		return 1
	}
	gateway.Version = version()
	log := newLogger(cfg, stderr)
	if os.Getenv("GOMEMLIMIT") == "" {
		// A soft limit on the Go runtime's memory: the collector works
		// harder near it instead of letting a burst of actions double the
		// heap. It refuses nothing; GOMEMLIMIT overrides it.
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := gateway.New(ctx, gateway.Options{Config: cfg, Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 1
	}
	// SIGHUP reloads the configuration; a failed reload keeps the one in
	// force and says why.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-hup:
				if err := srv.Reload(ctx); err != nil {
					logReloadError(log, err)
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return 1
	}
	return 0
}

// logReloadError logs why a reload changed nothing: every problem of the
// file with its file:line.
func logReloadError(log hclog.Logger, err error) {
	var ce *config.Error
	if errors.As(err, &ce) {
		for _, p := range ce.Problems {
			log.Error("configuration not reloaded", "problem", p.String())
		}
		return
	}
	log.Error("configuration not reloaded; the one in force stays", "error", err)
}

func configCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock config check", "airlock config check [--config FILE]", stderr)
	cfgPath := configFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	cfg, ok := loadConfig(*cfgPath, stderr)
	if !ok {
		return 1
	}
	// The files are checked for the user the gateway runs as (the owner
	// of state_dir), not for whoever runs the check: root checking a
	// service user's install must not be told to give its files to root.
	gw := config.GatewayUser(cfg)
	problems := 0
	for _, name := range sortedKeys(cfg.Credentials) {
		c := cfg.Credentials[name]
		if c.CA {
			if _, err := config.LoadCA(cfg, c); err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", cfg.Path, err)
				problems++
			}
			if c.ForceCommand == "" {
				fmt.Fprintf(stderr, "%s: warning: credential %q: certificates carry no force_command: a target runs whatever command the gateway sends unless its sshd forces one (ForceCommand, or a cert-authority line with command=); set force_command to airlock-action\n", cfg.Path, name)
			}
			continue
		}
		if _, err := config.LoadSignerFor(c, gw); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cfg.Path, err)
			problems++
		}
	}
	for _, name := range sortedKeys(cfg.Secrets) {
		if _, err := config.LoadSecretValueFor(cfg.Secrets[name], gw); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cfg.Path, err)
			problems++
		}
	}
	if o := cfg.OPA; o != nil {
		// Its files, as the gateway reads them; OPA itself is not asked.
		// The token file is checked for the gateway's user.
		if _, err := opa.New(opa.Options{URL: o.URL, Timeout: o.Timeout, CAFile: o.CAFile}); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cfg.Path, err)
			problems++
		}
		if o.TokenFile != "" {
			if _, err := opa.ReadToken(o.TokenFile, gw); err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", cfg.Path, err)
				problems++
			}
		}
	}
	if err := engine.CheckSocketReachable(cfg); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cfg.Path, err)
		problems++
	}
	for _, err := range engine.CheckIdentityFiles(cfg, gw) {
		fmt.Fprintf(stderr, "%s: %v\n", cfg.Path, err)
		problems++
	}
	if n := cfg.Notify; n != nil {
		// The gateway would start, without notifications: a warning, so
		// that the exit status still says whether it would start (the
		// systemd unit runs this check before every start).
		if err := securefile.CheckSecret(n.SecretFile, nil, gw); err != nil {
			fmt.Fprintf(stderr, "%s: warning: notify.secret_file: %v; notifications would be off\n", cfg.Path, err)
		} else if b, err := os.ReadFile(n.SecretFile); err != nil || len(strings.TrimSpace(string(b))) == 0 {
			fmt.Fprintf(stderr, "%s: warning: notify.secret_file %s is empty or unreadable: notifications would be off\n", cfg.Path, n.SecretFile)
		}
	}
	for _, w := range config.SharedLogFiles(cfg) {
		fmt.Fprintf(stderr, "%s: warning: %s\n", cfg.Path, w)
	}
	if problems > 0 {
		if gw != os.Geteuid() {
			fmt.Fprintf(stderr, "%s: files checked for %s, the owner of %s, as whom the gateway runs\n", cfg.Path, securefile.UserName(gw), cfg.StateDir)
		}
		fmt.Fprintf(stderr, "airlock: %s with the files the configuration names\n", count(problems, "problem"))
		return 1
	}
	fmt.Fprintf(stdout, "%s: OK (%s, %s, state in %s)\n", cfg.Path, count(len(cfg.Targets), "target"), count(len(cfg.Credentials), "credential"), cfg.StateDir)
	if gw != os.Geteuid() {
		fmt.Fprintf(stdout, "%s: files checked for %s, the owner of %s, as whom the gateway runs\n", cfg.Path, securefile.UserName(gw), cfg.StateDir)
	}
	return 0
}

func configReload(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock config reload", "airlock config reload [--config FILE]", stderr)
	cfgPath := configFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	c, err := operatorClient(*cfgPath)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	var r api.Reloaded
	if err := c.Do(context.Background(), http.MethodPost, "/v1/config/reload", struct{}{}, &r); err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			return failf(stderr, "%s", ae.Err.Message)
		}
		return failf(stderr, "%v", err)
	}
	fmt.Fprintf(stdout, "%s: reloaded (%s, sha256 %s)\n", r.Path, count(r.Targets, "target"), r.SHA256)
	return 0
}
