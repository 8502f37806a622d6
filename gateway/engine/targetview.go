package engine

import (
	"slices"
	"time"

	"github.com/airlockgw/airlock/gateway/api"
	cmdclass "github.com/airlockgw/airlock/gateway/classify"
	"github.com/airlockgw/airlock/gateway/config"
)

// allClasses are the command classes, least to most severe.
var allClasses = []cmdclass.Class{cmdclass.ReadOnly, cmdclass.Mutating, cmdclass.Destructive, cmdclass.Privileged, cmdclass.Forbidden}

// accountPolicy is a's policy as GET /v1/targets shows it. Escalate lists
// every class the lifecycle escalates (classify: a class at or above any
// escalate class), refused ones left out: they never reach a reviewer.
func accountPolicy(cfg *config.Config, a *config.Account) api.AccountPolicy {
	p := api.AccountPolicy{DenyPatterns: len(a.DenyPatterns), MaxTransferBytes: a.MaxTransfer,
		ApprovalTimeoutS: int(cfg.Approval.Timeout / time.Second)}
	for _, c := range allClasses {
		refused := slices.Contains(a.Refuse, c)
		if refused {
			p.Refuse = append(p.Refuse, c.String())
		}
		if !refused && slices.ContainsFunc(a.Escalate, func(e cmdclass.Class) bool { return c >= e }) {
			p.Escalate = append(p.Escalate, c.String())
		}
		if slices.Contains(a.AllowUnreviewed, c) {
			p.AllowUnreviewed = append(p.AllowUnreviewed, c.String())
		}
	}
	return p
}
