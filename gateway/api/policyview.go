package api

// AccountPolicy is what an account's policy does with an agent's request,
// as GET /v1/targets and the MCP tool list_targets show it (a part of
// TargetAccount), so that an agent can tell beforehand which commands wait
// for a reviewer, which are refused, and how long a reviewer has. It
// never carries a secret's value, a key or a path to one.
type AccountPolicy struct {
	// Escalate are the classes of command (read_only, mutating,
	// destructive, privileged, forbidden) that ask a call approval of
	// their own even inside an approved run: every class at or above
	// the account's lowest escalate class that is not refused.
	Escalate []string `json:"escalate,omitempty"`
	// Refuse are the classes the account rejects outright.
	Refuse []string `json:"refuse,omitempty"`
	// AllowUnreviewed are the classes that run with no reviewer at all
	// (no secret, nothing that looks like a credential, not escalated).
	AllowUnreviewed []string `json:"allow_unreviewed,omitempty"`
	// DenyPatterns counts the account's deny patterns: commands that
	// match one are rejected whatever their class.
	DenyPatterns int `json:"deny_patterns,omitempty"`
	// MaxTransferBytes bounds a file put to or got from the account; 0:
	// the account takes no transfers.
	MaxTransferBytes int64 `json:"max_transfer_bytes"`
	// ApprovalTimeoutS is how long a reviewer has to decide, in seconds
	// (approval.timeout); an undecided request ends expired.
	ApprovalTimeoutS int `json:"approval_timeout_s"`
}
