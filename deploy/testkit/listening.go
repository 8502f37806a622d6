package testkit

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ListeningAddrs returns the TCP addresses ("127.0.0.1:PORT") process pid
// listens on, read from /proc: for a child that binds port 0 and does not
// say which port it got. (Linux only; reading another user's process
// needs root.)
func ListeningAddrs(pid int) ([]string, error) {
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	fds, err := os.ReadDir(filepath.Join(proc, "fd"))
	if err != nil {
		return nil, fmt.Errorf("testkit: %w", err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(proc, "fd", fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var addrs []string
	for _, table := range []string{"tcp", "tcp6"} {
		found, err := listeners(filepath.Join(proc, "net", table), inodes)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, found...)
	}
	return addrs, nil
}

// tcpListen is the state column's value for a listening socket in
// /proc/net/tcp (TCP_LISTEN).
const tcpListen = "0A"

// listeners reads one /proc/net/tcp table: the local addresses of the
// listening sockets whose inode is one of inodes.
func listeners(table string, inodes map[string]bool) ([]string, error) {
	f, err := os.Open(table)
	if os.IsNotExist(err) {
		return nil, nil // no IPv6
	}
	if err != nil {
		return nil, fmt.Errorf("testkit: %w", err)
	}
	defer f.Close()
	var addrs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		col := strings.Fields(sc.Text())
		if len(col) < 10 || col[3] != tcpListen || !inodes[col[9]] {
			continue
		}
		addr, err := parseProcAddr(col[1])
		if err != nil {
			return nil, fmt.Errorf("testkit: %s: %w", table, err)
		}
		addrs = append(addrs, addr)
	}
	return addrs, sc.Err()
}

// parseProcAddr reads "0100007F:1F90": the address in hex, in 32-bit
// words of the machine's byte order (little-endian here), and the port in
// hex.
func parseProcAddr(s string) (string, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return "", fmt.Errorf("address %q", s)
	}
	b, err := hex.DecodeString(hexIP)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return "", fmt.Errorf("address %q", s)
	}
	for w := 0; w < len(b); w += 4 {
		b[w], b[w+1], b[w+2], b[w+3] = b[w+3], b[w+2], b[w+1], b[w]
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return "", fmt.Errorf("port in %q", s)
	}
	return net.JoinHostPort(net.IP(b).String(), strconv.Itoa(int(port))), nil
}
