package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/approvals/clocktest"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
)

// seqOutput is what `seq 1 n` prints.
func seqOutput(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// pageAll reads one stream of action id page by page, limit bytes a page,
// through the API's output pages, as an agent does: the bytes of every
// page in order, and the bytes the pages said they skipped.
func pageAll(t *testing.T, c *api.Client, id, stream string, limit int64) (got []byte, skipped int64) {
	t.Helper()
	ctx := context.Background()
	for off := int64(0); ; {
		p, err := c.Output(ctx, id, stream, off, limit)
		if err != nil {
			t.Fatalf("page at %d of %s: %v", off, stream, err)
		}
		b, err := api.DecodeBytes(p.Data, p.Encoding)
		if err != nil || p.Offset != off || int64(len(b)) != p.Bytes {
			t.Fatalf("page at %d: offset %d, %d bytes said, %d read (%v)", off, p.Offset, p.Bytes, len(b), err)
		}
		got = append(got, b...)
		skipped += p.Skipped
		if p.NextOffset == nil {
			return got, skipped
		}
		if *p.NextOffset != off+p.Bytes+p.Skipped {
			t.Fatalf("page at %d: next offset %d after %d bytes and %d skipped", off, *p.NextOffset, p.Bytes, p.Skipped)
		}
		off = *p.NextOffset
	}
}

// spillFiles are the names of the files in the gateway's output spill.
func (g *testGateway) spillFiles() []string {
	g.t.Helper()
	ents, err := os.ReadDir(filepath.Join(g.cfg.StateDir, "outputs"))
	if err != nil {
		g.t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestOutputPastTheCapIsKept: through a real gateway and a real sshd, a
// command that writes 20 MB is read back page by page through the API
// and every byte matches; the bytes past the in-memory cap are in an
// owner-only spill file, removed with its retention (after which a page
// there says they are gone); output past the account's max_output is told
// as dropped, with the numbers and the fix, in the action, its record,
// and the pages; nothing spills under output "tail" or "none"; and the
// limit is in the target listing before anything runs.
func TestOutputPastTheCapIsKept(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	ctx := context.Background()
	clk := clocktest.New(time.Now())
	const small = 10 << 20
	g := startGateway(t, s, gwOptions{options: func(o *Options) { o.clock = clk }, mutate: func(c *config.Config) {
		c.Targets["box-call"].Accounts[s.User].MaxOutput = small
	}})

	targets, err := g.agent.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	limits := map[string]int64{}
	for _, tg := range targets {
		limits[tg.Name] = tg.Accounts[0].MaxOutputBytes
	}
	if limits["box-run"] != config.DefaultMaxOutput || limits["box-call"] != small {
		t.Errorf("listed max_output %v, want box-run %d, box-call %d", limits, config.DefaultMaxOutput, small)
	}

	// 20 MB within the default max_output: every byte pages back.
	want := seqOutput(2_700_000)
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "seq 1 2700000", TimeoutS: 110})
	g.decideNext("run", "approve", "")
	r := <-res
	if r.err != nil || !r.a.Success() || r.a.StdoutBytes != int64(len(want)) || r.a.OutputDropped != nil {
		t.Fatalf("20 MB: %v %+v", r.err, r.a.OutputDropped)
	}
	got, skipped := pageAll(t, g.agent, r.a.ID, "stdout", 1<<20-7) // pages that end mid-line
	if skipped != 0 || !bytes.Equal(got, want) {
		t.Fatalf("paged back %d bytes (%d skipped), want the %d written", len(got), skipped, len(want))
	}
	spill := filepath.Join(g.cfg.StateDir, "outputs", r.a.ID+".stdout")
	fi, err := os.Stat(spill)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != int64(len(want))-8<<20 {
		t.Fatalf("spill file: %v, want %d bytes, mode 0600 (%v)", fi, len(want)-8<<20, err)
	}
	if d, err := os.Stat(filepath.Dir(spill)); err != nil || d.Mode().Perm() != 0o700 {
		t.Errorf("spill directory: %v (%v), want mode 0700", d, err)
	}

	// Past max_output: dropped, and said so with the numbers.
	const n = 20_000_000
	res = g.runAsync(api.ActionRequest{Target: "box-call", Command: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x", n), TimeoutS: 110})
	g.decideNext("call", "approve", "")
	r2 := <-res
	wantDropped := int64(n - small - 64<<10)
	d := r2.a.OutputDropped
	if r2.err != nil || !r2.a.Success() || d == nil || d.StdoutBytes != wantDropped || d.StderrBytes != 0 || d.MaxOutput != small || d.Why != api.DroppedMaxOutput ||
		!strings.Contains(d.Text, "max_output") || !strings.Contains(r2.a.Detail, strconv.FormatInt(wantDropped, 10)) {
		t.Fatalf("past max_output: %v %q %+v, want %d bytes dropped", r2.err, r2.a.Detail, d, wantDropped)
	}
	if fin := g.auditEntries("action.finished", r2.a.ID); len(fin) != 1 || fin[0].Fields["stdout_spill_dropped"] != float64(wantDropped) ||
		fin[0].Fields["stdout_spill_bytes"] != float64(small-8<<20) || fin[0].Fields["stdout_spill_why"] != "max_output" {
		t.Errorf("action.finished: %+v", fin)
	}
	got, skipped = pageAll(t, g.agent, r2.a.ID, "stdout", 1<<20)
	if skipped != wantDropped || int64(len(got)) != n-wantDropped || len(bytes.Trim(got, "x")) != 0 {
		t.Errorf("paged %d bytes with %d skipped, want %d and %d", len(got), skipped, n-wantDropped, wantDropped)
	}
	_, err = g.agent.Output(ctx, r2.a.ID, "stdout", small+5, 100)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || !strings.Contains(ae.Err.Message, "max_output") {
		t.Errorf("a page in the dropped bytes: %v, want 404 naming max_output", err)
	}
	// Read back from the audit log, the action says the same.
	if back, err := g.reviewer.Action(ctx, r2.a.ID); err != nil || back.OutputDropped == nil || *back.OutputDropped != *d {
		t.Errorf("read back: %v %+v, want %+v", err, back.OutputDropped, d)
	}

	// Nothing spills where the agent could not page it.
	for _, target := range []string{"box-tail", "box-none"} {
		a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: target, Command: "head -c 10000000 /dev/zero", TimeoutS: 110}, api.Events{})
		if err != nil || !a.Success() || a.OutputDropped != nil {
			t.Fatalf("%s: %v %+v", target, err, a)
		}
		for _, f := range g.spillFiles() {
			if strings.HasPrefix(f, a.ID) {
				t.Errorf("%s: spill file %s written", target, f)
			}
		}
	}

	// Retention: the files go a day after their actions, and a page
	// there says the bytes are gone, not that there were none.
	if files := g.spillFiles(); len(files) != 2 {
		t.Fatalf("spill files %v, want the two actions' stdout", files)
	}
	clk.Advance(24*time.Hour + time.Minute)
	testkit.Eventually(t, func() bool { return len(g.spillFiles()) == 0 }, "spill files left past their retention: %v", g.spillFiles())
	_, err = g.agent.Output(ctx, r.a.ID, "stdout", 9<<20, 100)
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || !strings.Contains(ae.Err.Message, "are gone") {
		t.Errorf("a page of a removed spill file: %v, want 404 saying the bytes are gone", err)
	}
	if p, err := g.agent.Output(ctx, r.a.ID, "stdout", 0, 100); err != nil || p.Bytes != 100 {
		t.Errorf("the stored head after the spill's retention: %v %+v", err, p)
	}
	g.verifyAudit()
}

// TestSecretMaskedInTheSpill: a gateway-held secret's value printed where
// the in-memory head ends and the spill file starts, and again later, is
// replaced in every page read back — whatever the page size — and held by
// no file of the state directory, the spill file included.
func TestSecretMaskedInTheSpill(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	value := "pw-" + rand.Text()
	g := startGateway(t, s, gwOptions{extraConfig: secretBlock(t, "db-password", value, "box-run/"+s.User)})
	const mark = "[secret db-password]"
	// The value starts 5 bytes before the 8 MiB cut, and again 3 bytes
	// before 9 MiB of the stream as sent (a 32 KiB read's edge too).
	first := 8<<20 - 5
	second := 9<<20 - 3
	cmd := fmt.Sprintf(`v=$(cat); head -c %d /dev/zero | tr '\0' a; printf '%%s' "$v"; head -c %d /dev/zero | tr '\0' b; printf '%%s' "$v"; echo end`,
		first, second-first-len(value))
	var want bytes.Buffer
	want.Write(bytes.Repeat([]byte("a"), first))
	want.WriteString(mark)
	want.Write(bytes.Repeat([]byte("b"), second-first-len(value)))
	want.WriteString(mark + "end\n")

	res := g.runAsync(api.ActionRequest{Target: "box-run", Secret: "db-password", Command: cmd, TimeoutS: 110})
	g.decideNext("call", "approve", "")
	r := <-res
	if r.err != nil || !r.a.Success() || r.a.SecretReplacements != 2 || r.a.StdoutBytes != int64(want.Len()) {
		t.Fatalf("action: %v %+v", r.err, r.a)
	}
	for _, limit := range []int64{1 << 20, 1<<20 - 11, 65536} {
		got, _ := pageAll(t, g.agent, r.a.ID, "stdout", limit)
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("pages of %d bytes: %d bytes back, want the %d masked", limit, len(got), want.Len())
		}
	}
	seen := scanForValue(t, g.cfg.StateDir, value, "running")
	if !seen[r.a.ID+".stdout"] {
		t.Errorf("no spill file was read (files: %v)", seen)
	}
}
