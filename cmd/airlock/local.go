package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
)

func init() {
	commands["token"] = (&group{name: "token", usage: tokenUsage, verbs: map[string]verbFunc{
		"rotate": tokenRotate,
	}}).command("rotate the local token (token rotate)")
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
	c, err := operatorClient(*cfgPath)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	if err := c.Do(context.Background(), http.MethodPost, "/v1/token/rotate", struct{}{}, nil); err != nil {
		return failf(stderr, "%v", err)
	}
	fmt.Fprintln(stdout, "local token rotated; existing local connections were cut")
	return 0
}
