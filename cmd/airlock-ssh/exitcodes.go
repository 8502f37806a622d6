package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/airlockgw/airlock/sshexec/outcome"
)

// exitCodes is how airlock-ssh's exit status tells its ends apart: as ssh
// does (the remote status, else 255), or detailed, one code for each
// outcome and for each of airlock-ssh's own ends (--exit-codes,
// $AIRLOCK_EXIT_CODES).
type exitCodes uint8

const (
	// sshCodes: the remote exit status, else 255 (the contract's default).
	sshCodes exitCodes = iota
	// detailedCodes: the remote exit status when it is not one of
	// detailedFirst–detailedLast; those are airlock's, below.
	detailedCodes
)

// parseExitCodes reads --exit-codes or $AIRLOCK_EXIT_CODES (from).
func parseExitCodes(v, from string) (exitCodes, error) {
	switch v {
	case "ssh":
		return sshCodes, nil
	case "detailed":
		return detailedCodes, nil
	}
	return sshCodes, usagef(badValue, "--exit-codes", "%s %q: give ssh (the remote status, else 255) or detailed (see airlock-ssh --help)", from, v)
}

// exitCodesFromEnv is $AIRLOCK_EXIT_CODES: sshCodes when unset.
func exitCodesFromEnv() (exitCodes, error) {
	v, ok := os.LookupEnv("AIRLOCK_EXIT_CODES")
	if !ok || v == "" {
		return sshCodes, nil
	}
	return parseExitCodes(v, "$AIRLOCK_EXIT_CODES")
}

// An end is what run's steps return: 0–255, the remote command's exit
// status (outcome exited); above, one of airlock-ssh's ends, which
// exitCodes.status turns into the exit status.
const (
	// endNotRun: nothing was asked or nothing ran, and there is no
	// outcome: airlock-ssh's command line, no gateway, the gateway
	// refused the request or the local token, input or a file to send.
	endNotRun = 256 + iota
	// endUnknown: the outcome is not known: the connection to the
	// gateway broke or it stopped answering once it may have taken the
	// action, or the action is still in flight (--action).
	endUnknown
	// endOutputCut: the command exited, but its output did not reach
	// the agent whole (without --accept-truncation), or airlock-ssh was
	// stopped before it did.
	endOutputCut
	// endInputNotSent: the command exited, but standard input arrived
	// after the request was sent without it.
	endInputNotSent
	// endFileNotWritten: a get succeeded, but its file could not be
	// fetched or written.
	endFileNotWritten
	// endOutcome + o: the action ended with outcome o (not exited).
	endOutcome = 512
)

// The detailed codes: detailedFirst + an outcome's persisted position for
// that outcome (outcomes are append only, so a code never changes
// meaning), then airlock-ssh's own ends from 250; detailedLast, for a
// remote status that falls in this range.
const (
	detailedFirst    = 200
	detailedNotRun   = 200
	detailedUnknown  = 250
	detailedCut      = 251
	detailedInput    = 252
	detailedFile     = 253
	detailedInRange  = 254
	detailedLast     = 254
	detailedOutcomes = detailedUnknown - detailedFirst - 1 // room for 49 outcomes
)

// outcomeEnd is the end of an action with outcome o.
func outcomeEnd(o outcome.Outcome) int { return endOutcome + int(o) }

// status is the exit status for end.
func (c exitCodes) status(end int) int {
	switch {
	case end >= 0 && end <= 255 && (c == sshCodes || end < detailedFirst || end > detailedLast):
		return end
	case c == sshCodes:
		return 255
	case end <= 255:
		return detailedInRange
	case end >= endOutcome:
		return detailedFirst + end - endOutcome
	}
	return map[int]int{endNotRun: detailedNotRun, endUnknown: detailedUnknown, endOutputCut: detailedCut,
		endInputNotSent: detailedInput, endFileNotWritten: detailedFile}[end]
}

// exitCodeTable is the detailed codes as --help prints them.
func exitCodeTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  0-%d, 255  the remote command's exit status (outcome exited)\n", detailedFirst-1)
	fmt.Fprintf(&b, "  %d        nothing ran, no outcome: the command line, no gateway, the gateway\n             refused the request or the token, the input or the file to send\n", detailedNotRun)
	for _, o := range outcome.Outcomes() {
		if o != outcome.Exited {
			fmt.Fprintf(&b, "  %d        %s\n", detailedCodes.status(outcomeEnd(o)), o)
		}
	}
	fmt.Fprintf(&b, "  %d        the outcome is unknown (the gateway stopped answering or the\n             connection broke once it may have taken the action; still in flight)\n", detailedUnknown)
	fmt.Fprintf(&b, "  %d        the command exited, but its output did not reach you whole\n", detailedCut)
	fmt.Fprintf(&b, "  %d        the command exited, but standard input that came late was not sent\n", detailedInput)
	fmt.Fprintf(&b, "  %d        a get succeeded, but its file could not be fetched or written\n", detailedFile)
	fmt.Fprintf(&b, "  %d        the command exited with a status in %d-%d (stderr says which)\n", detailedInRange, detailedFirst, detailedLast)
	return b.String()
}

// noteInRange says on stderr which remote status a detailed exit status
// of detailedInRange stands for.
func (c exitCodes) noteInRange(remote int, id string, stderr io.Writer) {
	if c == detailedCodes && remote >= detailedFirst && remote <= detailedLast {
		fmt.Fprintf(stderr, "airlock-ssh: the command exited %d, a status --exit-codes=detailed keeps for airlock's own ends (%d-%d); exiting %d (action %s)\n", remote, detailedFirst, detailedLast, detailedInRange, id)
	}
}
