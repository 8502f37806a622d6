package approvals

import "fmt"

// Rule sets the mode for the target accounts it matches. An empty Target
// or Account, or "*", matches any.
type Rule struct {
	Target  string
	Account string
	Mode    Mode
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

func (p Policy) validate() error {
	for i, r := range p.Rules {
		if _, ok := modeNames[r.Mode]; !ok {
			return fmt.Errorf("approvals: policy rule %d: invalid mode %d: %w", i, r.Mode, ErrUnknownValue)
		}
	}
	return nil
}
