// Package approvals decides whose authority an action runs under and
// whether a human has approved it. It owns runs, approval requests,
// reviewer decisions and accounts, expiry, the policy of run versus call
// mode, and the binding of a call decision to the digest of one exact
// action. It knows nothing of SSH, HTTP or HTML, and does not write the
// audit log: it hands every state change to the gateway as an Event (see
// EventSink) and refuses to make a change that could not be recorded.
//
// # Runs, in a reviewer's terms
//
// A run is one agent process's bounded authority. When you approve a run
// you approve that process — you see its executable and the SHA-256 of the
// file, its arguments, working directory, user and parent chain — for a
// limited time (the TTL, 1 hour unless you choose otherwise, never more
// than the configured maximum), optionally for a limited number of actions
// and for only some targets or accounts. The approval ends early when the
// process exits, when the agent ends the run, or when a reviewer revokes
// it. It never passes to another process: a restarted agent, a second agent
// started the same way, or a new process that happens to get the same pid
// is a new run and needs a new approval.
//
// Which process is the run's anchor: the process started by "airlock run",
// the "airlock mcp" process, or else the nearest ancestor of the calling
// helper that is not a shell or transparent wrapper (sh, bash, dash, zsh,
// fish, env, timeout, nice, nohup, setsid, stdbuf, xargs). An agent that
// runs each tool call in a fresh shell is therefore one run. Processes are
// named by pid and start time, so pid reuse cannot revive a run, and a
// request is accepted only from the anchor itself or its descendants.
//
// A remote caller (HTTP, MCP over HTTP) gets a run with a random token
// instead; that run ends when the caller deletes it, its token expires, or
// a reviewer revokes it.
//
// A denied run stays denied for as long as its process lives: the agent
// cannot ask again by sending another command.
//
// A run whose approval ran out (its TTL, or its action budget) is renewed
// when its agent acts again: a new pending run that names it (Run.Renews),
// for the same anchor process or run token, which a reviewer approves or
// denies as a first run. Nothing else renews: see Run.Renewable and
// NotRenewedError.
//
// # Modes
//
// Each target account is configured "run" or "call"; where several rules
// apply, "call" wins, and an account no rule covers is "call".
//
//   - run: the first action of a run that is not yet approved raises one
//     run request (actions arriving meanwhile wait on the same request).
//     Once you approve, the run's actions on run-mode accounts pass without
//     asking you, until the approval's TTL, action budget, scope, the run's
//     end or your revocation stops them.
//   - call: every action raises its own request, even inside an approved
//     run. Approving it lets exactly that command, with that target,
//     account, timeout and run, through once: the decision is bound to the
//     SHA-256 of the action's canonical encoding (CanonicalAction). A
//     different command, a second attempt, or a decision after the request
//     expired authorises nothing.
//
// A request left without a decision expires after the approval timeout
// (120 s by default); the action fails as "expired" and may be retried,
// which asks again.
//
// # Separation of duties
//
// Only a Reviewer decides, and a Reviewer comes only from Accounts.Verify
// (name and argon2id password) or Accounts.VerifyToken (reviewer API
// token). A reviewer whose name is the requester's (the anchor process's
// user, or the API client that created a remote run) cannot decide that
// run's requests.
//
// # State
//
// Runs, requests, decisions and reviewer accounts live in the gateway's
// SQLite state database (state.db, separate from the audit log). After a
// restart, requests that were pending are expired, runs whose anchor
// process is gone are ended, and approvals keep their original expiry.
package approvals
