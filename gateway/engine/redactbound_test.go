package engine

import (
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/redact"
)

// A field far over its limit is read by the redactor only as far as what
// is kept of it and a margin: quick, and a credential that starts in the
// kept part is still hidden whole.
func TestRedactionOfAHugeFieldIsBounded(t *testing.T) {
	red := redact.New(nil)
	limit := 4 * api.MaxReason
	secret := "password=" + strings.Repeat("s3cr3t", 8)
	for _, at := range []int{0, limit / 2, limit - 20, limit - 1} {
		field := strings.Repeat("a", at) + " " + secret + " " + strings.Repeat("x", 5<<20)
		bounded := boundForRedaction(field, limit)
		if len(bounded) > limit+redactionMargin {
			t.Fatalf("the redactor reads %d bytes", len(bounded))
		}
		kept := clip(red.Redact(bounded).Text, limit)
		if strings.Contains(kept, "s3cr3t") {
			t.Errorf("a credential starting at %d survives in what is kept", at)
		}
	}
	if short := "password=hunter2hunter2"; boundForRedaction(short, limit) != short {
		t.Error("a field within its limit is not read whole")
	}
}
