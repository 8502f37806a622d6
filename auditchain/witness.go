package auditchain

import (
	"bytes"
	"context"
	"os/exec"
)

// runWitness hands each signed checkpoint to the witness command, one at a
// time and bounded by WitnessTimeout. When the witness is slower than the
// log, only the newest note waits; a later checkpoint is consistent with
// (and so vouches for) every earlier one.
func (l *Log) runWitness() {
	defer close(l.witnessDone)
	for msg := range l.witness {
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.WitnessTimeout)
		cmd := exec.CommandContext(ctx, l.opts.WitnessCommand[0], l.opts.WitnessCommand[1:]...)
		cmd.Stdin = bytes.NewReader(msg)
		var out bytes.Buffer
		cmd.Stdout = &limitedBuffer{buf: &out, max: 4096}
		cmd.Stderr = cmd.Stdout
		cmd.WaitDelay = l.opts.WitnessTimeout
		err := cmd.Run()
		cancel()
		if err != nil {
			l.log.Error("witness command failed", "command", l.opts.WitnessCommand[0], "error", err, "output", out.String())
		} else {
			l.log.Debug("witness accepted checkpoint", "command", l.opts.WitnessCommand[0])
		}
	}
}

// limitedBuffer keeps the first max bytes written and discards the rest,
// so a chatty witness cannot grow the gateway's memory.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (w *limitedBuffer) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
