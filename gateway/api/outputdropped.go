package api

// OutputDropped says which bytes of a finished action's output the
// gateway did not keep, so that no page of GET /v1/actions/{id}/output
// returns them: those of a stream between what it keeps of the stream's
// start (the account's max_output) and of its end (the last 64 KiB).
// Absent when every byte the command wrote can be paged (output "full").
type OutputDropped struct {
	// StdoutBytes and StderrBytes count the bytes of each stream that
	// are not kept; the first of them is at offset MaxOutput (or where
	// the gateway's disk ran out: Why).
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// MaxOutput is the account's max_output the action ran under.
	MaxOutput int64 `json:"max_output"`
	// Why is "max_output" (a stream was longer than that) or "disk" (the
	// gateway's disk had no room to keep more; see Text).
	Why string `json:"why"`
	// Text says it in a sentence, with what to do.
	Text string `json:"text"`
}

// The values of OutputDropped.Why.
const (
	DroppedMaxOutput = "max_output"
	DroppedDisk      = "disk"
)
