// Package systemtest is airlock's system-level reliability and security
// suite: it builds the airlock and airlock-ssh binaries, runs `airlock
// serve` as its own process against real sshd processes and in-process
// fault servers, and checks what the gateway promises under load, faults
// and hostile input — every request accounted for with exactly one
// terminal outcome, nothing lost from the audit chain, nothing dialed that
// was not allowed.
//
// The package holds tests only. The long variants run with AIRLOCK_SOAK=1
// (make soak); docs/reliability.md lists each scenario with its last
// measured figures.
package systemtest
