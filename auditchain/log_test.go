package auditchain

import (
	"context"
	"testing"
)

func TestAppendVerifyIntact(t *testing.T) {
	o := testOptions(t)
	o.CheckpointEvery = 10
	v := buildLog(t, o, 95)
	rep := verify(t, o, v, trustedFile(t, o)...)
	if !rep.Intact() {
		t.Fatalf("untouched log: damage %+v", rep.Damage)
	}
	// 95 entries and 10 checkpoint entries (sizes 10, 20, … 100); the final
	// checkpoint at Close covers everything.
	if rep.Entries != 105 || rep.Uncovered != 0 {
		t.Errorf("report %+v, want 105 entries, 0 uncovered", rep)
	}
	t.Logf("%+v", rep)
	_ = context.Background()
}
