package policy

import (
	"errors"
	"testing"
)

// TestReadOnlyMark: only the exact prefix a gateway writes is a mark, and
// a mark written any other way names no verb.
func TestReadOnlyMark(t *testing.T) {
	p, err := Parse([]byte("verb \"status\" {\n  argv = [\"/bin/echo\", \"ok\"]\n}\n"), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if rest, ok := CutReadOnly(MarkReadOnly("status")); !ok || rest != "status" {
		t.Errorf("CutReadOnly(MarkReadOnly(status)) = %q, %v", rest, ok)
	}
	for _, command := range []string{
		"status",
		" @read-only status",
		"'@read-only' status",
		"@read-only\tstatus",
		"@read-onlystatus",
		"@READ-ONLY status",
	} {
		if rest, ok := CutReadOnly(command); ok {
			t.Errorf("%q is read as marked (rest %q)", command, rest)
		}
	}
	for _, command := range []string{
		" @read-only status",
		"'@read-only' status",
		"@read-only\tstatus",
		MarkReadOnly(MarkReadOnly("status")),
	} {
		rest, _ := CutReadOnly(command)
		if _, err := p.Match(rest); !errors.Is(err, ErrUnknownVerb) {
			t.Errorf("%q: Match err = %v, want an unknown verb", command, err)
		}
	}
}
