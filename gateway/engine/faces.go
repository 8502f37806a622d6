package engine

import (
	"time"

	"context"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
)

// Engine is the gateway's core, open: its stores are open, recovery is
// done, and it runs actions until Close. It is wiring over its faces, one
// small service for each kind of caller; a front end takes the faces it
// uses and nothing else:
//
//   - Actions: an agent's actions (start, follow, transfer files) and the
//     targets it may name;
//   - Runs: agents' runs (resolve a caller's, create, end, revoke, list);
//   - Review: what reviewers do (log in, list and decide requests, read
//     output, reveal commands);
//   - Audit: reading and verifying the audit log;
//   - Admin: what the gateway's operator does (agents, reviewer
//     accounts, login links, reload, token rotation);
//   - Identity: verifying the credentials of callers, and the budgets
//     of failed attempts.
//
// The faces share one core; each method of a face is the one place its
// operation and its refusals exist, whichever front end asks.
type Engine struct {
	*core
	faces faces
}

// faces are the engine's faces, each over the one core.
type faces struct {
	actions  Actions
	runs     Runs
	review   Review
	audit    Audit
	admin    Admin
	identity Identity
}

// Actions is the engine as agents act through it: start an action, follow
// one of their run's, send and fetch transfer files, list the targets.
type Actions struct{ *core }

// Runs is the engine's runs: the caller's run (local or remote), a new
// remote one, ending, revoking and listing them.
type Runs struct{ *core }

// Review is the engine as reviewers use it: log in (password, login link,
// single sign-on), list and decide approval requests, read what actions
// did (every read recorded).
type Review struct{ *core }

// Audit is the engine's audit log as investigators and the notifier read
// it.
type Audit struct{ *core }

// Admin is the engine as the gateway's operator changes it: agent
// identities, reviewer accounts, login links, the configuration, the
// local token's rotation.
type Admin struct{ *core }

// Identity verifies who calls: agent tokens, workload tokens, client
// certificates, and the failure budgets that slow down guessing.
type Identity struct{ *core }

// newEngine returns the engine over c with its faces.
func newEngine(c *core) *Engine {
	return &Engine{core: c, faces: faces{Actions{c}, Runs{c}, Review{c}, Audit{c}, Admin{c}, Identity{c}}}
}

// Actions is the engine as agents act through it.
func (e *Engine) Actions() *Actions { return &e.faces.actions }

// Runs is the engine's runs.
func (e *Engine) Runs() *Runs { return &e.faces.runs }

// Review is the engine as reviewers use it.
func (e *Engine) Review() *Review { return &e.faces.review }

// Audit is the engine's audit log.
func (e *Engine) Audit() *Audit { return &e.faces.audit }

// Admin is the engine as the operator changes it.
func (e *Engine) Admin() *Admin { return &e.faces.admin }

// Identity verifies who calls.
func (e *Engine) Identity() *Identity { return &e.faces.identity }

// Action returns the action id, as a reviewer sees any (Actions.Action).
func (e *Review) Action(ctx context.Context, id string) (*Action, error) { return e.action(ctx, id) }

// Recent returns the objects of the actions the engine holds, newest
// first (Actions.Recent).
func (e *Review) Recent() []api.Action { return e.recentActions() }

// Target returns the configured target name, as reviewers are shown its
// address and host keys.
func (e *Review) Target(name string) (*config.Target, bool) {
	t, ok := e.conf().cfg.Targets[name]
	return t, ok
}

// Now is the engine's clock, which stamps what reviewers are shown.
func (e *Review) Now() time.Time { return e.clock.Now() }
