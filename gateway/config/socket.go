package config

import "os/user"

// groupExists reports whether the group name exists on this host: the
// one question the configuration asks of the operating system, so that
// a socket_group nobody created is reported with its file:line. What the
// gateway asks of the host's directories and groups when it starts is the
// engine's (engine.SocketGroupID, engine.CheckSocketReachable).
func groupExists(name string) bool {
	_, err := user.LookupGroup(name)
	return err == nil
}
