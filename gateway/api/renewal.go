package api

// Renewal says which run a run renews: the same agent (its anchor
// process, or its run token) asking again after that run's approval ran
// out. It is part of a run and of an approval request (docs/approvals.md,
// "Runs that renew").
type Renewal struct {
	// Renews is the run this run (or the request's run) renews; absent
	// for a first run.
	Renews string `json:"renews,omitempty"`
	// RenewedBy, on a run that ran out, is the run that renews it: where
	// its agent acts now (GET /v1/runs/{id} only).
	RenewedBy string `json:"renewed_by,omitempty"`
	// Renewable, on an expired run, says that its agent's next action
	// asks a reviewer to renew it, instead of being refused.
	Renewable bool `json:"renewable,omitempty"`
}
