package approvals

import (
	"fmt"
	"time"
)

// Rule sets the mode for the target accounts it matches. An empty Target
// or Account, or "*", matches any.
type Rule struct {
	Target  string
	Account string
	Mode    Mode
	// MaxGrant bounds how long a reviewer may let an approved call's
	// exact action pass again (Decision.Grant); 0 allows no grant.
	MaxGrant time.Duration
}

func (r Rule) matches(target, account string) bool {
	return (r.Target == "" || r.Target == "*" || r.Target == target) &&
		(r.Account == "" || r.Account == "*" || r.Account == account)
}

// Policy maps target accounts to modes. Where several rules match, the
// stronger mode (call) wins; where none does, call applies: a target account
// nobody configured is never run-approved by accident.
type Policy struct {
	Rules []Rule
}

// ModeFor returns the mode for one target account.
func (p Policy) ModeFor(target, account string) Mode {
	var m Mode
	for _, r := range p.Rules {
		if r.matches(target, account) && r.Mode.Stronger(m) {
			m = r.Mode
		}
	}
	if m == 0 {
		return ModeCall
	}
	return m
}

// MaxGrantFor returns the longest grant a reviewer may give on one target
// account's call approvals: the smallest of the matching rules' (0: none).
func (p Policy) MaxGrantFor(target, account string) time.Duration {
	var m time.Duration
	first := true
	for _, r := range p.Rules {
		if r.matches(target, account) {
			if first || r.MaxGrant < m {
				m = r.MaxGrant
			}
			first = false
		}
	}
	return m
}

func (p Policy) validate() error {
	for i, r := range p.Rules {
		if _, ok := modeNames[r.Mode]; !ok {
			return fmt.Errorf("state database: policy rule %d: invalid mode %d: %w", i, r.Mode, ErrUnknownValue)
		}
	}
	return nil
}
