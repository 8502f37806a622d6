// Package sshtest gives tests real SSH servers to talk to: a real OpenSSH
// sshd on loopback with its own host key, authorized_keys and config
// (SSHD), and an in-process server (FaultServer) for the faults sshd cannot
// be made to produce on demand, such as closing a session without an exit
// status or opening channels toward the client.
//
// Under CI=true a test whose sshd is missing fails; elsewhere it is skipped
// with the command that installs it.
package sshtest
