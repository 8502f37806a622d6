// Package testkit is what every suite of airlock's tests waits and starts
// peers with, so that each is done one way: Patience bounds a wait for
// something that must happen, Eventually and EventuallyErr poll a
// condition until it holds (Poll and PollErr for helpers that return an
// error instead of failing a test), OnPort starts a child that binds a
// port of its own and tries another when its log says the port was taken
// (PortInUse), ListeningAddrs finds the port a child bound on port 0 and
// did not report, LocalUser makes another local user, and Password is
// the reviewer password test gateways share.
//
// A child is never handed a port that was bound, released and guessed to
// be free: whoever else takes it in between makes the child fail in a way
// that reads like a bug of the child ("sshd exited at start"). A child
// binds its own: on port 0 when it can report the port it got (`airlock
// serve` logs "listening http=…") or ListeningAddrs can find it; through
// OnPort when it must be told one; or it is handed a connection the test
// accepted (sshd in inetd mode).
//
// It is a leaf: it imports only the standard library, so that any test
// helper package may use it. It must not know about airlock's own types.
package testkit
