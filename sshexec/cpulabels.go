package sshexec

import (
	"context"
	"runtime/pprof"
)

// ProfileLabel is the pprof label under which Run counts its CPU time
// per phase of the connection, as the gateway counts an action's (its
// engine.ProfileLabel is the same key): "handshake" from the version
// exchange to the end of authentication, "session" and "command" after.
// The connection's goroutines are made during the handshake and keep its
// label: decrypting what the connection receives counts there.
const ProfileLabel = "airlock_phase"

var (
	cpuHandshake = pprof.WithLabels(context.Background(), pprof.Labels(ProfileLabel, "handshake"))
	cpuSession   = pprof.WithLabels(context.Background(), pprof.Labels(ProfileLabel, "session"))
	cpuCommand   = pprof.WithLabels(context.Background(), pprof.Labels(ProfileLabel, "command"))
)
