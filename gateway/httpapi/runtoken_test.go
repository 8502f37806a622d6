package httpapi

import (
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/engine"
)

// TestRunTokenProblemSaysWhich: a run token past its own lifetime and a
// run whose approval ran out for good are told apart.
func TestRunTokenProblemSaysWhich(t *testing.T) {
	token, run := runTokenProblem(engine.ErrTokenExpired), runTokenProblem(engine.ErrRunExpired)
	if !strings.Contains(token, "the run token has expired") {
		t.Errorf("an expired token: %q", token)
	}
	if !strings.Contains(run, "the run's approval ran out") || strings.Contains(run, "token") {
		t.Errorf("a run that ran out: %q", run)
	}
}
