// Command barehelper is a measuring prototype, not a product: one action
// over the gateway's local socket, like `airlock-ssh TARGET COMMAND`, with
// a hand-written HTTP/1.1 request and no net/http, TLS or HTTP/2 linked
// (4 MB against airlock-ssh's 9.4 MB). The benchmark's TestBenchCPU runs
// it in airlock-ssh's place (AIRLOCK_BENCH_CPU_HELPER) to measure what a
// smaller helper would save. It handles only what that load needs: a
// finished event with exited 0 exits 0, anything else 255.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: barehelper TARGET COMMAND...")
		os.Exit(255)
	}
	if err := run(os.Args[1], strings.Join(os.Args[2:], " ")); err != nil {
		fmt.Fprintln(os.Stderr, "barehelper:", err)
		os.Exit(255)
	}
}

func run(target, command string) error {
	sock := os.Getenv("AIRLOCK_SOCKET")
	b, err := os.ReadFile(filepath.Join(filepath.Dir(sock), "control.json"))
	if err != nil {
		return err
	}
	var ctl struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(b, &ctl); err != nil {
		return err
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		return err
	}
	defer c.Close()
	body, err := json.Marshal(map[string]any{"target": target, "command": command, "timeout_s": 60})
	if err != nil {
		return err
	}
	head := fmt.Sprintf("POST /v1/actions HTTP/1.1\r\nHost: airlock\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", ctl.Token, len(body))
	if _, err := io.WriteString(c, head+string(body)); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	chunked, err := readHead(br)
	if err != nil {
		return err
	}
	var r io.Reader = br
	if chunked {
		r = &chunkReader{br: br}
	}
	return finish(r)
}

// readHead reads the status line and headers, and says whether the body
// is chunked.
func readHead(br *bufio.Reader) (bool, error) {
	status, err := br.ReadString('\n')
	if err != nil {
		return false, err
	}
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		return false, fmt.Errorf("gateway answered %s", strings.TrimSpace(status))
	}
	chunked := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return false, err
		}
		if strings.EqualFold(strings.TrimSpace(line), "transfer-encoding: chunked") {
			chunked = true
		}
		if line == "\r\n" {
			return chunked, nil
		}
	}
}

// finish reads events up to the finished one and prints its stdout.
func finish(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || event != "finished" {
			continue
		}
		var obj struct {
			Outcome  string `json:"outcome"`
			ExitCode *int   `json:"exit_code"`
			Stdout   string `json:"stdout"`
		}
		if err := json.Unmarshal([]byte(d), &obj); err != nil {
			return err
		}
		os.Stdout.WriteString(obj.Stdout)
		if obj.Outcome != "exited" || obj.ExitCode == nil || *obj.ExitCode != 0 {
			return fmt.Errorf("outcome %s", obj.Outcome)
		}
		return nil
	}
	return fmt.Errorf("the stream ended without a result: %v", sc.Err())
}

// chunkReader reads an HTTP/1.1 chunked body.
type chunkReader struct {
	br   *bufio.Reader
	left int64
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		line, err := c.br.ReadString('\n')
		if err != nil {
			return 0, err
		}
		size, _, _ := strings.Cut(strings.TrimSpace(line), ";")
		n, err := strconv.ParseInt(size, 16, 64)
		if err != nil {
			return 0, fmt.Errorf("bad chunk size %q", line)
		}
		if n == 0 {
			return 0, io.EOF
		}
		c.left = n
	}
	n, err := c.br.Read(p[:min(int64(len(p)), c.left)])
	c.left -= int64(n)
	if c.left == 0 && err == nil {
		_, err = c.br.ReadString('\n')
	}
	return n, err
}
