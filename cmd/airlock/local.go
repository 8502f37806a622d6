package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
)

func init() {
	commands["token"] = (&group{name: "token", usage: tokenUsage, verbs: map[string]verbFunc{
		"rotate": tokenRotate,
	}}).command("rotate the local token (token rotate)")
	commands["run"] = command{summary: "start a command as the anchor of a new run (run -- CMD...)", run: runRun}
}

const tokenUsage = `usage: airlock token VERB [flags]

verbs:
  rotate [--config FILE]
      give the gateway a new local token; existing local connections are cut
`

// localSocket finds the gateway's socket: $AIRLOCK_SOCKET, else the
// configuration's listen.socket when a configuration exists, else the
// standard path.
func localSocket(cfgPath string) (string, error) {
	if s := os.Getenv("AIRLOCK_SOCKET"); s != "" {
		return s, nil
	}
	path := config.Path(cfgPath)
	if _, err := os.Stat(path); err == nil || cfgPath != "" {
		cfg, err := config.Load(path)
		if err != nil {
			return "", explainConfig(err, cfgPath)
		}
		return cfg.Listen.Socket, nil
	}
	return api.DefaultSocket()
}

// localConfig is the gateway's configuration as localSocket finds it,
// when there is one that loads.
func localConfig(cfgPath string) (*config.Config, bool) {
	path := config.Path(cfgPath)
	if _, err := os.Stat(path); err != nil {
		return nil, false
	}
	cfg, err := config.Load(path)
	return cfg, err == nil
}

// runEnded reports an error of EndRun that means the run had ended
// already (denied, revoked, expired, used up): the gateway no longer has
// it as the caller's live run (not_found) or refuses to end it again
// (conflict). There is nothing left to end.
func runEnded(err error) bool {
	var ae *api.Error
	return errors.As(err, &ae) && (ae.Err.Code == api.CodeNotFound || ae.Err.Code == api.CodeConflict)
}

// localClient is the client of the gateway at socket (api.LocalClient).
func localClient(socket string) (*api.Client, error) {
	c, err := api.LocalClient(socket)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no gateway at %s: is `airlock serve` running?", socket)
		}
		return nil, err
	}
	return c, nil
}

func tokenRotate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock token rotate", "airlock token rotate [--config FILE]", stderr)
	cfgPath := configFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	socket, err := localSocket(*cfgPath)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	c, err := localClient(socket)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	if err := c.Do(context.Background(), http.MethodPost, "/v1/token/rotate", struct{}{}, nil); err != nil {
		return failf(stderr, "%v", err)
	}
	fmt.Fprintln(stdout, "local token rotated; existing local connections were cut")
	return 0
}

// runRun registers this process as the anchor of a new run, then runs CMD
// as its child: CMD and everything it starts act within that run, and the
// run ends when this process does.
func runRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock run", "airlock run [--config FILE] [--] CMD [ARGS...]", stderr)
	cfgPath := configFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return failf(stderr, "give the command to run: airlock run -- CMD [ARGS...]")
	}
	socket, err := localSocket(*cfgPath)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	c, err := localClient(socket)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	ctx := context.Background()
	var run api.Run
	if err := c.Do(ctx, http.MethodPost, "/v1/runs", struct{}{}, &run); err != nil {
		return failf(stderr, "registering the run: %v", err)
	}
	fmt.Fprintf(stderr, "airlock: run %s started for %s (a reviewer approves it at its first action)\n", run.ID, argv[0])
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+socket, "AIRLOCK_RUN_ID="+run.ID)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		c.EndRun(ctx, run.ID)
		return failf(stderr, "%v", err)
	}
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	if err := c.EndRun(ctx, run.ID); err != nil && !runEnded(err) {
		fmt.Fprintf(stderr, "airlock: ending run %s: %v (it ends anyway now that this process exits)\n", run.ID, err)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return failf(stderr, "%v", err)
}
