package engine

import (
	"net/netip"
)

// Bucket is the unit a client address's budgets are kept per: one IPv4
// address; one /64 of IPv6 (a single host usually holds the whole /64);
// and every loopback address, IPv4 or IPv6, as one bucket ("loopback"),
// since any local user can send from any of 127.0.0.0/8. An IPv4 address
// written as IPv6 (::ffff:a.b.c.d) is that IPv4 address. An address that
// is not an IP (a Unix socket's) is its own bucket.
func Bucket(addr string) string {
	ip, err := netip.ParseAddr(Host(addr))
	if err != nil {
		return Host(addr)
	}
	ip = ip.Unmap().WithZone("")
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.Is4():
		return ip.String()
	}
	p, _ := ip.Prefix(64)
	return p.String()
}
