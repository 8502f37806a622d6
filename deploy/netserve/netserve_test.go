package netserve

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// Close ends connections whose handlers are still reading, waits for every
// handler, and refuses new connections.
func TestCloseEndsEveryConnectionAndWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	var running, returned atomic.Int32
	s := Serve(ln, func(c net.Conn) {
		running.Add(1)
		defer returned.Add(1)
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			io.WriteString(c, line)
		}
	})
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "ping\n")
		if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "ping\n" {
			t.Fatalf("echo: %q, %v", got, err)
		}
		clients = append(clients, c)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if running.Load() != 3 || returned.Load() != 3 {
		t.Fatalf("after Close: %d handlers ran, %d returned; want 3 and 3", running.Load(), returned.Load())
	}
	for i, c := range clients {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("client %d after Close: %v, want EOF", i, err)
		}
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("a connection was accepted after Close")
	}
}
