package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp"
)

func init() {
	commands["mcp"] = command{summary: "MCP server over stdio for agent hosts; this process anchors the session's run (mcp)", run: runMCP}
}

// runMCP speaks MCP on stdin and stdout and logs only to stderr. It
// registers itself as the anchor of a new run, so that the host's agent
// session is one run, and ends the run when the host closes stdin. When
// the gateway is not running it keeps serving: every tool call says so and
// the next one tries again.
func runMCP(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock mcp", "airlock mcp [--config FILE] [--files DIR]", stderr)
	cfgPath := configFlag(fs)
	files := fs.String("files", "", "the session's transfer directory, where ssh_put reads and ssh_get saves files (created 0700; default: $XDG_DATA_HOME/airlock/files, or ~/.local/share/airlock/files)")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return failf(stderr, "airlock mcp takes no arguments; hosts launch it as is")
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "airlock-mcp", Output: stderr, Level: hclog.Info})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	b := &bridge{cfgPath: *cfgPath, log: log}
	if _, err := b.client(ctx); err != nil {
		log.Warn("no gateway yet; tool calls will report it and try again", "error", err)
	}
	defer b.endRun()
	opts := mcp.Options{Version: version(), Logger: log}
	if dir, err := transferDir(*files); err != nil {
		log.Warn("no file tools (ssh_put, ssh_get): the transfer directory cannot be used", "error", err)
	} else {
		opts.FileRoot = dir
	}
	if cfg, ok := localConfig(*cfgPath); ok {
		// What the tools say of waits and output sizes, and how long a
		// call is held, as the gateway is configured.
		opts.OutputBudget, opts.ApprovalTimeout, opts.MaxWait = cfg.MCP.OutputBudget, cfg.Approval.Timeout, cfg.MCP.MaxWait
	}
	srv := mcp.NewServer(b, opts)
	err := srv.Run(ctx, &sdk.IOTransport{Reader: os.Stdin, Writer: nopWriteCloser{stdout}})
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		log.Error("MCP session ended", "error", err)
		return 1
	}
	return 0
}

// bridge is the MCP tools' Backend over the local socket: an api.Client
// whose process (this one) is registered as its run's anchor, connected
// when first needed and again after the gateway restarted or rotated its
// token.
type bridge struct {
	cfgPath string
	log     hclog.Logger

	mu     sync.Mutex
	c      *api.Client
	socket string
	runID  string
}

// client returns a registered client, connecting first if need be.
func (b *bridge) client(ctx context.Context) (*api.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c != nil {
		return b.c, nil
	}
	socket, err := localSocket(b.cfgPath)
	if err != nil {
		return nil, fmt.Errorf("the airlock gateway's socket is unknown: %w", err)
	}
	c, err := localClient(socket)
	if err != nil {
		return nil, fmt.Errorf("the airlock gateway is not running (%v); ask an operator to start it (airlock serve), then retry; nothing was run", err)
	}
	// This process anchors the run: the host's whole agent session is
	// one run, approved once in run mode, ended when this process ends.
	var run api.Run
	if err := c.Do(ctx, http.MethodPost, "/v1/runs", struct{}{}, &run); err != nil {
		if isUnreachable(err) {
			return nil, fmt.Errorf("the airlock gateway is not running (no answer on %s: %v); ask an operator to start it (airlock serve), then retry; nothing was run", socket, err)
		}
		return nil, fmt.Errorf("registering this session's run with the gateway at %s: %w", socket, err)
	}
	if b.runID != "" && b.runID != run.ID {
		b.log.Info("the gateway came back; this session continues as a new run", "run", run.ID, "previous", b.runID)
	} else {
		b.log.Info("run registered; a reviewer approves it at its first action if its targets need it", "run", run.ID, "socket", socket)
	}
	b.c, b.socket, b.runID = c, socket, run.ID
	return c, nil
}

// call runs f with a registered client. When the gateway could not be
// reached or refused the local token — nothing was sent to a target — it
// reconnects and tries once more.
func (b *bridge) call(ctx context.Context, f func(*api.Client) error) error {
	for attempt := 0; ; attempt++ {
		c, err := b.client(ctx)
		if err != nil {
			return err
		}
		err = f(c)
		if err == nil || attempt > 0 || ctx.Err() != nil || !(isUnreachable(err) || isUnauthorized(err)) {
			var silent *api.SilenceError
			switch {
			case isUnreachable(err):
				return fmt.Errorf("the airlock gateway stopped answering (%v); ask an operator to start it again (airlock serve); if an action was under way, get_action tells what became of it once the gateway is back", err)
			case errors.As(err, &silent) && silent.ActionID != "":
				return fmt.Errorf("%v: its outcome is unknown, and it may have run; get_action with action_id %s tells what became of it once the gateway answers again; ask an operator to look at the gateway", silent, silent.ActionID)
			case errors.As(err, &silent):
				return fmt.Errorf("%v, before it named an action; ask an operator to look at the gateway (airlock serve), then retry", silent)
			}
			return err
		}
		b.mu.Lock()
		if b.c == c {
			b.c = nil
		}
		b.mu.Unlock()
	}
}

func (b *bridge) RunAction(ctx context.Context, req api.ActionRequest, ev api.Events) (*api.Action, error) {
	var a *api.Action
	err := b.call(ctx, func(c *api.Client) (err error) {
		a, err = c.RunAction(ctx, req, ev)
		return err
	})
	return a, err
}

func (b *bridge) Targets(ctx context.Context) ([]api.Target, error) {
	var t []api.Target
	err := b.call(ctx, func(c *api.Client) (err error) {
		t, err = c.Targets(ctx)
		return err
	})
	return t, err
}

func (b *bridge) Action(ctx context.Context, id string) (*api.Action, error) {
	var a *api.Action
	err := b.call(ctx, func(c *api.Client) (err error) {
		a, err = c.Action(ctx, id)
		return err
	})
	return a, err
}

func (b *bridge) StartAction(ctx context.Context, req api.ActionRequest) (string, error) {
	var id string
	err := b.call(ctx, func(c *api.Client) (err error) {
		id, err = c.StartAction(ctx, req)
		return err
	})
	return id, err
}

func (b *bridge) WaitAction(ctx context.Context, id string, ev api.Events) (*api.Action, error) {
	var a *api.Action
	err := b.call(ctx, func(c *api.Client) (err error) {
		a, err = c.WaitAction(ctx, id, ev)
		return err
	})
	return a, err
}

func (b *bridge) Output(ctx context.Context, id, stream string, offset, limit int64) (*api.OutputPage, error) {
	var p *api.OutputPage
	err := b.call(ctx, func(c *api.Client) (err error) {
		p, err = c.Output(ctx, id, stream, offset, limit)
		return err
	})
	return p, err
}

// Upload sends a file for ssh_put. Not retried: the reader is consumed.
func (b *bridge) Upload(ctx context.Context, r io.Reader, size int64) (*api.Upload, error) {
	c, err := b.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.Upload(ctx, r, size)
}

// Fetch writes ssh_get's bytes to w. Not retried: w has them in part.
func (b *bridge) Fetch(ctx context.Context, a *api.Action, w io.Writer) (int64, error) {
	c, err := b.client(ctx)
	if err != nil {
		return 0, err
	}
	return c.Fetch(ctx, a, w)
}

// endRun ends the run when the host is done with this session. If this
// fails the run still ends: the gateway watches its anchor process.
func (b *bridge) endRun() {
	b.mu.Lock()
	c, id := b.c, b.runID
	b.mu.Unlock()
	if c == nil || id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.EndRun(ctx, id)
	if runEnded(err) {
		b.log.Info("the run had ended already", "run", id)
		return
	}
	if err != nil {
		b.log.Warn("ending the run; it ends anyway when this process exits", "run", id, "error", err)
		return
	}
	b.log.Info("run ended", "run", id)
}

// isUnreachable reports an error in reaching the socket: nothing was sent.
func isUnreachable(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

func isUnauthorized(err error) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Err.Code == api.CodeUnauthorized
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// transferDir is the MCP session's transfer directory: dir, or the
// user's data directory's airlock/files; created 0700, and refused when
// it is a link or another user's, or group or others may write it.
func transferDir(dir string) (string, error) {
	if dir == "" {
		base := os.Getenv("XDG_DATA_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			base = filepath.Join(home, ".local", "share")
		}
		dir = filepath.Join(base, "airlock", "files")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", err
	}
	if err := securefile.PrivateDir(dir, -1); err != nil {
		return "", err
	}
	return dir, nil
}
