package api

import (
	"bytes"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/sshexec"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeBytesRoundTrip(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("plain text\n"), []byte("ünïcödé"), {0xff, 0xfe, 0x00, 'a'}, []byte("\x1b[31mred\x1b[0m")} {
		s, enc := EncodeBytes(b)
		got, err := DecodeBytes(s, enc)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("round trip of %q: got %q (%s), %v", b, got, enc, err)
		}
	}
	if _, enc := EncodeBytes([]byte{0xff}); enc != EncodingBase64 {
		t.Error("invalid UTF-8 must be sent as base64")
	}
}

func TestReadEvents(t *testing.T) {
	stream := ": comment\n\nevent: state\ndata: {\"state\":\"running\"}\n\nevent: stdout\ndata: line1\ndata: line2\n\ndata: no-name\n\n"
	type ev struct{ Event, Data string }
	var got []ev
	err := ReadEvents(strings.NewReader(stream), func(e string, d []byte) error {
		got = append(got, ev{e, string(d)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []ev{{"state", `{"state":"running"}`}, {"stdout", "line1\nline2"}, {"message", "no-name"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestNextStepCoversEveryFailure(t *testing.T) {
	// Every outcome, a failed exit included; only exit status 0 has none.
	for _, o := range sshexec.Outcomes() {
		for _, term := range []sshexec.Termination{0, sshexec.NotStarted, sshexec.Confirmed, sshexec.Unconfirmed} {
			s := NextStepOf(&Action{Outcome: o, Termination: term})
			if s == nil || s.Text == "" || (s.Retry != RetryNo && s.Retry != RetryYes && s.Retry != RetryAfterCheck) ||
				(s.Who != WhoAgent && s.Who != WhoReviewer && s.Who != WhoOperator) {
				t.Errorf("next step for %s (%s): %+v", o, term, s)
			}
		}
	}
	zero := 0
	if s := NextStep(&Action{Outcome: sshexec.Exited, ExitCode: &zero}); s != "" {
		t.Errorf("success has a next step: %q", s)
	}
}

// TestOutputCapIsTheGateways: the API's output cap (MaxStdin, the bound on
// an action object) is the one sshexec keeps, though this package does not
// import sshexec.
func TestOutputCapIsTheGateways(t *testing.T) {
	if outputCap != sshexec.DefaultOutputLimit {
		t.Fatalf("outputCap = %d, sshexec.DefaultOutputLimit = %d", outputCap, sshexec.DefaultOutputLimit)
	}
}
