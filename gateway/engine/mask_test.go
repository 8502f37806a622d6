package engine

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/sshexec"
)

// TestSecretMaskStreams: however a stream is cut into chunks, what the
// mask passes on is the stream with every occurrence replaced, and the
// count is the number of occurrences.
func TestSecretMaskStreams(t *testing.T) {
	value := []byte("s3cr3t-v4lue")
	streams := [][]byte{
		[]byte("before s3cr3t-v4lue after"),
		[]byte("s3cr3t-v4lues3cr3t-v4lue"),
		[]byte("s3cr3t-v4lus3cr3t-v4lue s3cr3t"), // a near miss, then a prefix at the end
		[]byte("ss3cr3t-v4lue"),
		[]byte("nothing here"),
		bytes.Repeat([]byte("xs3cr3t-v4luey"), 500),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, stream := range streams {
		want := bytes.ReplaceAll(stream, value, []byte("[secret db]"))
		wantN := bytes.Count(stream, value)
		for range 50 {
			m := newSecretMask("db", append(value, '\n'))
			s := m.stream(sshexec.Stdout)
			var got []byte
			for rest := stream; len(rest) > 0; {
				n := 1 + rng.IntN(len(rest))
				got = append(got, s.write(rest[:n])...)
				rest = rest[n:]
			}
			got = append(got, s.flush()...)
			if !bytes.Equal(got, want) || m.replaced() != wantN || s.total != int64(len(want)) {
				t.Fatalf("stream %q: got %q (%d replaced, total %d), want %q (%d)", stream, got, m.replaced(), s.total, want, wantN)
			}
		}
	}
}

// TestSecretScanChunks: however a get's bytes are cut into chunks, a file
// without a secret's value passes whole, and one with a value is found,
// named, and never passed on with the value whole.
func TestSecretScanChunks(t *testing.T) {
	values := map[string][]byte{"api": []byte("tok-123456"), "db": []byte("s3cr3t-v4lue")}
	files := []struct {
		file []byte
		want string
	}{
		{[]byte("nothing here, s3cr3t-v4lu and tok-12345 near misses"), ""},
		{[]byte("s3cr3t-v4lus3cr3t-v4lue"), "db"},
		{[]byte("password=s3cr3t-v4lue\n"), "db"},
		{append(bytes.Repeat([]byte("x"), 70000), "tok-123456"...), "api"},
		{[]byte("s3cr3t-v4lu"), ""}, // a prefix at the end
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, f := range files {
		for range 50 {
			var out bytes.Buffer
			s := &secretScan{w: &out, names: []string{"api", "db"}, values: [][]byte{values["api"], values["db"]}}
			for rest := f.file; len(rest) > 0; {
				n := 1 + rng.IntN(len(rest))
				if k, err := s.Write(rest[:n]); k != n || err != nil {
					t.Fatalf("Write: %d %v", k, err)
				}
				rest = rest[n:]
			}
			if err := s.flush(); err != nil {
				t.Fatal(err)
			}
			if s.found != f.want {
				t.Fatalf("%.40q: found %q, want %q", f.file, s.found, f.want)
			}
			switch {
			case f.want == "" && !bytes.Equal(out.Bytes(), f.file):
				t.Fatalf("%.40q: passed on %.40q", f.file, out.Bytes())
			case f.want != "" && bytes.Contains(out.Bytes(), values[f.want]):
				t.Fatalf("%.40q: the value was passed on", f.file)
			}
		}
	}
}

// countingInspector counts Stat and ID calls of an inspector with both.
type countingInspector struct {
	approvals.Inspector
	stats, ids int
}

func (c *countingInspector) Stat(pid int) (approvals.ProcStat, error) {
	c.stats++
	return c.Inspector.Stat(pid)
}

func (c *countingInspector) ID(pid int) (approvals.ProcessID, error) {
	c.ids++
	return c.Inspector.(approvals.IDReader).ID(pid)
}

// TestRedactingInspectorPassesTheLivenessRead: the engine's wrapper keeps
// the store's cheap liveness read (one /proc file, not three).
func TestRedactingInspectorPassesTheLivenessRead(t *testing.T) {
	inner := &countingInspector{Inspector: &approvals.ProcFS{}}
	var insp approvals.Inspector = redactingInspector{Inspector: inner}
	ir, ok := insp.(approvals.IDReader)
	if !ok {
		t.Fatal("the wrapper hides the liveness read")
	}
	if _, err := ir.ID(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if inner.ids != 1 || inner.stats != 0 {
		t.Fatalf("ID went to Stat %d times and ID %d times, want ID once", inner.stats, inner.ids)
	}
}
