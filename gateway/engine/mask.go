package engine

import (
	"bytes"
	"io"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/redact"
	"github.com/airlockgw/airlock/sshexec"
)

// Hiding a delivered secret's value in the command's output: every
// occurrence is replaced by "[secret NAME]" before any byte of the stream
// is passed on, stored or returned, and the replacements are counted.

// secretMask hides one value in both streams of an action.
type secretMask struct {
	value []byte // without a trailing line end
	mark  []byte
	out   streamMask
	err   streamMask
}

func newSecretMask(name string, value []byte) *secretMask {
	m := &secretMask{value: maskedValue(value), mark: []byte("[secret " + name + "]")}
	m.out.m, m.err.m = m, m
	return m
}

// stream returns the mask of one stream.
func (m *secretMask) stream(s sshexec.Stream) *streamMask {
	if s == sshexec.Stderr {
		return &m.err
	}
	return &m.out
}

// replaced is how many occurrences were replaced in both streams.
func (m *secretMask) replaced() int { return m.out.count + m.err.count }

// streamMask hides the value in one stream as it arrives: it holds back
// the end of what it was given while that end could be the start of the
// value.
type streamMask struct {
	m       *secretMask
	pending []byte
	count   int
	// total is the length of the stream with every occurrence replaced.
	total int64
}

// write takes the next chunk and returns what can be passed on now.
func (s *streamMask) write(p []byte) []byte {
	buf := append(s.pending, p...)
	out, n := replaceValue(buf, s.m.value, s.m.mark)
	s.count += n
	// Hold back the longest end of out that the value starts with (it
	// cannot hold a mark: a mark ends in ']', which is then the last
	// byte, and is checked like any other).
	keep := overlapEnd(out, s.m.value)
	s.pending = append([]byte(nil), out[len(out)-keep:]...)
	out = out[:len(out)-keep]
	s.total += int64(len(out))
	return out
}

// flush returns what was held back at the end of the stream.
func (s *streamMask) flush() []byte {
	p := s.pending
	s.pending = nil
	s.total += int64(len(p))
	return p
}

// replaceValue returns b with every occurrence of v replaced by mark, and
// how many there were; b itself when there are none.
func replaceValue(b, v, mark []byte) ([]byte, int) {
	n := bytes.Count(b, v)
	if n == 0 {
		return b, 0
	}
	return bytes.ReplaceAll(b, v, mark), n
}

// overlapEnd is the length of the longest proper prefix of v that b ends
// with.
func overlapEnd(b, v []byte) int {
	for k := min(len(v)-1, len(b)); k > 0; k-- {
		if bytes.HasSuffix(b, v[:k]) {
			return k
		}
	}
	return 0
}

// secretScan checks the bytes of a get for the values of gateway-held
// secrets, as the output mask knows them (without a trailing line end),
// on their way to w: it passes on only what cannot be part of a value,
// holding back the end of what came while that end could start one, and
// once a value is found it passes nothing more on. A value never reaches
// w whole, whatever the chunks.
type secretScan struct {
	w       io.Writer
	names   []string
	values  [][]byte
	pending []byte
	// found names the first secret whose value came, "" for none.
	found string
}

func (s *secretScan) Write(p []byte) (int, error) {
	if s.found != "" {
		return len(p), nil
	}
	buf := append(s.pending, p...)
	keep := 0
	for i, v := range s.values {
		if bytes.Contains(buf, v) {
			s.found, s.pending = s.names[i], nil
			return len(p), nil
		}
		keep = max(keep, overlapEnd(buf, v))
	}
	if _, err := s.w.Write(buf[:len(buf)-keep]); err != nil {
		return 0, err
	}
	s.pending = append([]byte(nil), buf[len(buf)-keep:]...)
	return len(p), nil
}

// flush passes on what was held back, at the end of the file.
func (s *secretScan) flush() error {
	p := s.pending
	s.pending = nil
	if s.found != "" || len(p) == 0 {
		return nil
	}
	_, err := s.w.Write(p)
	return err
}

// redactingInspector reads processes as the store's inspector does, with
// what looks like a credential in an anchor's arguments replaced: the
// arguments are shown to reviewers and recorded in run.created, and an
// agent started as `airlock run -- airlock-ssh box 'mysql -pSECRET'` would
// otherwise put its command there whole.
type redactingInspector struct {
	approvals.Inspector
	redactor func() *redact.Redactor
}

// ID passes on the cheaper liveness read of an inspector that has one.
func (r redactingInspector) ID(pid int) (approvals.ProcessID, error) {
	return approvals.CurrentID(r.Inspector, pid)
}

var _ approvals.IDReader = redactingInspector{}

func (r redactingInspector) Describe(id approvals.ProcessID) (approvals.Process, error) {
	p, err := r.Inspector.Describe(id)
	if err != nil {
		return p, err
	}
	red := r.redactor()
	argv := make([]string, len(p.Argv))
	for i, a := range p.Argv {
		argv[i] = red.Redact(a).Text
	}
	p.Argv = argv
	return p, nil
}
