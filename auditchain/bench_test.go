package auditchain

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/pgtest"
)

// benchEntry is a typical action.finished entry; its leaf is about 300 bytes.
func benchEntry(i int) Entry {
	return Entry{
		Kind:     KindActionFinished,
		ActionID: fmt.Sprintf("act-%016x", i),
		RunID:    "run-0123456789abcdef",
		Fields: []Field{
			Str("outcome", "exited"),
			Int("exit_code", 0),
			Str("target", "build-box"),
			Str("account", "deploy"),
			Str("command", "systemctl restart worker && journalctl -u worker -n 20"),
			Str("host_key_fingerprint", "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s"),
			Bytes("stdout_sha256", make([]byte, 32)),
			Int("stdout_bytes", 1234),
			Bool("stdout_truncated", false),
			Int("duration_ms", 118),
		},
	}
}

func benchOptions(b *testing.B) Options {
	o := DefaultOptions(b.TempDir())
	o.Origin = "bench.test/log"
	o.CheckpointInterval = -1
	return o
}

// BenchmarkAppendDurable measures one appender: each op is one durable
// append (commit and fsync). It reports the median and 99th percentile.
func BenchmarkAppendDurable(b *testing.B) {
	l := openLog(b, benchOptions(b))
	defer closeLog(b, l)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := l.Append(ctx, benchEntry(i)); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkAppendConcurrent32 measures group commit: each op is 32
// appenders each appending 8 entries at once.
func BenchmarkAppendConcurrent32(b *testing.B) {
	const appenders, each = 32, 8
	l := openLog(b, benchOptions(b))
	defer closeLog(b, l)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		for g := 0; g < appenders; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < each; j++ {
					if _, err := l.Append(ctx, benchEntry(g*each+j)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*appenders*each)/time.Since(start).Seconds(), "entries/s")
}

// benchLogSize is the size of the log the verify and export benchmarks
// read; AUDITCHAIN_BENCH_ENTRIES overrides it (for example 1000000).
func benchLogSize() int {
	if n, err := strconv.Atoi(os.Getenv("AUDITCHAIN_BENCH_ENTRIES")); err == nil && n > 0 {
		return n
	}
	return 10000
}

var benchLog struct {
	once sync.Once
	dir  string
	o    Options
	err  error
}

// sharedBenchLog builds the read benchmarks' log once per process.
func sharedBenchLog(b *testing.B) Options {
	benchLog.once.Do(func() {
		benchLog.dir, benchLog.err = os.MkdirTemp("", "auditchain-bench")
		if benchLog.err != nil {
			return
		}
		o := DefaultOptions(benchLog.dir)
		o.Origin = "bench.test/log"
		o.CheckpointInterval = -1
		l, err := Open(context.Background(), o)
		if err != nil {
			benchLog.err = err
			return
		}
		n := benchLogSize()
		var wg sync.WaitGroup
		const writers = 64
		for g := 0; g < writers; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < n; i += writers {
					if _, err := l.Append(context.Background(), benchEntry(i)); err != nil {
						benchLog.err = err
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := l.Close(context.Background()); err != nil && benchLog.err == nil {
			benchLog.err = err
		}
		benchLog.o = o
	})
	if benchLog.err != nil {
		b.Fatal(benchLog.err)
	}
	return benchLog.o
}

// BenchmarkVerify: each op verifies the whole shared log.
func BenchmarkVerify(b *testing.B) {
	o := sharedBenchLog(b)
	v, err := ReadVerifierKey(o.VerifierKeyPath)
	if err != nil {
		b.Fatal(err)
	}
	trusted := trustedFile(b, o)
	b.ResetTimer()
	var entries int64
	for i := 0; i < b.N; i++ {
		rep := verify(b, o, v, trusted...)
		if !rep.Intact() {
			b.Fatal(rep.Damage)
		}
		entries += rep.Entries
	}
	b.ReportMetric(float64(entries)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkExport: each op exports the whole shared log as JSON Lines.
func BenchmarkExport(b *testing.B) {
	o := sharedBenchLog(b)
	ctx := context.Background()
	r, err := OpenReader(ctx, o.Path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.ResetTimer()
	var entries int64
	for i := 0; i < b.N; i++ {
		for rec, err := range r.Entries(ctx, -1) {
			if err != nil {
				b.Fatal(err)
			}
			line, err := rec.MarshalJSON()
			if err != nil {
				b.Fatal(err)
			}
			io.Discard.Write(line)
			entries++
		}
	}
	b.ReportMetric(float64(entries)/b.Elapsed().Seconds(), "entries/s")
}

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	if benchLog.dir != "" {
		os.RemoveAll(benchLog.dir)
	}
	os.Exit(code)
}

// BenchmarkAppendReplicas compares the log on SQLite with the log on
// PostgreSQL behind 1, 2 and 3 replicas (Logs on one database), under
// two loads: "16" is 16 appenders in all, spread over the replicas (one
// load, shared out); "16each" is 16 appenders on every replica (each
// replica serving agents of its own, as replicas are added for). Each
// appender appends 4 entries one after another per op. It reports
// entries/s in all, the p99 latency of one append, and how many entries
// a commit held on average.
func BenchmarkAppendReplicas(b *testing.B) {
	for _, load := range []string{"16", "16each"} {
		for _, impl := range []string{"sqlite", "pg-1", "pg-2", "pg-3"} {
			b.Run("load="+load+"/impl="+impl, func(b *testing.B) { benchAppendReplicas(b, load, impl) })
		}
	}
}

func benchAppendReplicas(b *testing.B, load, impl string) {
	const each = 4
	var logs []*Log
	var commits, committed atomic.Int64
	onCommit := func(n int, _ time.Duration) { commits.Add(1); committed.Add(int64(n)) }
	if impl == "sqlite" {
		o := benchOptions(b)
		o.OnCommit = onCommit
		logs = []*Log{openLog(b, o)}
	} else {
		db := pgDB(b)
		n, _ := strconv.Atoi(impl[len("pg-"):])
		first := replicaOptions(b, db, "")
		first.OnCommit = onCommit
		logs = append(logs, openLog(b, first))
		for range n - 1 {
			o := replicaOptions(b, db, first.KeyPath)
			o.OnCommit = onCommit
			logs = append(logs, openLog(b, o))
		}
	}
	defer func() {
		for _, l := range logs {
			closeLog(b, l)
		}
	}()
	appenders := 16
	if load == "16each" {
		appenders = 16 * len(logs)
	}
	ctx := context.Background()
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N*appenders*each)
	commits.Store(0)
	committed.Store(0)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		for g := range appenders {
			l := logs[g%len(logs)]
			wg.Go(func() {
				for j := range each {
					t0 := time.Now()
					if _, err := l.Append(ctx, benchEntry(i*appenders*each+g*each+j)); err != nil {
						b.Error(err)
						return
					}
					d := time.Since(t0)
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	b.StopTimer()
	elapsed := time.Since(start)
	slices.Sort(lat)
	b.ReportMetric(float64(b.N*appenders*each)/elapsed.Seconds(), "entries/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	if c := commits.Load(); c > 0 {
		b.ReportMetric(float64(committed.Load())/float64(c), "entries/commit")
	}
}
