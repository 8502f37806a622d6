package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// Replicas on PostgreSQL beside one gateway on SQLite: the same request
// (the api client path, `true` on the same sshd), 16 in flight, spread
// over 1, 2 or 3 replicas of one database.

type replicaResult struct {
	name      string
	lat       []time.Duration
	wall      time.Duration
	appendLat histogram
}

// replicaConfig is one configuration measured: the gateways its actions
// are spread over.
type replicaConfig struct {
	name   string
	runs   []func() error
	probes []gatewayProbe
}

// measureReplicas measures the SQLite gateway (run, probe) and 1, 2 and
// 3 replicas on PostgreSQL, in interleaved rounds of n actions each, 16
// at a time.
func measureReplicas(t *testing.T, s *sshtest.SSHD, run func() error, probe gatewayProbe, rounds, n int) []replicaResult {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	ds := replicas(t, s, dsn, 3, "run", "  max_parallel = 128")
	var runs []func() error
	var probes []gatewayProbe
	for _, d := range ds {
		ctl, err := api.ReadControl(d.socket)
		if err != nil {
			t.Fatal(err)
		}
		c := api.NewLocalClient(ctl.Socket, ctl.Token)
		r := func() error {
			a, err := c.RunAction(ctx, api.ActionRequest{Target: "box", Command: "true"}, api.Events{})
			if err == nil && !a.Success() {
				err = fmt.Errorf("replica: %v: %s", a.Outcome, a.Detail)
			}
			return err
		}
		approveFirst(t, d, r)
		runs = append(runs, r)
		probes = append(probes, gatewayProbe{pid: d.PID(), metricsURL: d.HTTPURL + "/metrics"})
	}
	configs := []replicaConfig{{name: "SQLite, one gateway", runs: []func() error{run}, probes: []gatewayProbe{probe}}}
	for k := 1; k <= 3; k++ {
		configs = append(configs, replicaConfig{name: fmt.Sprintf("PostgreSQL, %s", count(k, "replica")), runs: runs[:k], probes: probes[:k]})
	}
	for _, c := range configs { // warm up
		for _, r := range c.runs {
			if err := r(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
	}
	out := make([]replicaResult, len(configs))
	for i, c := range configs {
		out[i].name = c.name
	}
	appendHist := func(c replicaConfig) histogram {
		var h histogram
		for i, p := range c.probes {
			if i == 0 {
				h = p.appendHistogram(t)
			} else {
				h = h.plus(p.appendHistogram(t))
			}
		}
		return h
	}
	for r := range rounds {
		for k := range configs {
			i := (k + r) % len(configs)
			c := configs[i]
			var next atomic.Int64
			spread := func() error { return c.runs[int(next.Add(1))%len(c.runs)]() }
			before := appendHist(c)
			lat, wall, err := runBatch(spread, n, 16)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			d := appendHist(c).minus(before)
			res := &out[i]
			res.lat = append(res.lat, lat...)
			res.wall += wall
			if res.appendLat.counts == nil {
				res.appendLat = d
			} else {
				res.appendLat = res.appendLat.plus(d)
			}
		}
	}
	for _, d := range ds {
		d.signal(syscall.SIGTERM)
	}
	return out
}

// plus adds two histograms of the same buckets.
func (h histogram) plus(o histogram) histogram {
	d := histogram{bounds: h.bounds, counts: slices.Clone(h.counts), sum: h.sum + o.sum}
	for i := range d.counts {
		d.counts[i] += o.counts[i]
	}
	return d
}

func (r *report) replicasMarkdown(b *strings.Builder) {
	if len(r.replicas) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Replicas on PostgreSQL\n\n")
	fmt.Fprintf(b, "The api client path (`true` on the same sshd, 16 actions in flight) through one gateway on SQLite, and\n")
	fmt.Fprintf(b, "spread over 1, 2 and 3 `airlock serve` replicas of one PostgreSQL %s database (a throwaway cluster on\n", r.pgVersion)
	fmt.Fprintf(b, "this machine, `fsync = on`), in %d interleaved rounds. Append latency is from the gateways'\n", 5)
	fmt.Fprintf(b, "`airlock_audit_append_seconds`. On %d CPUs the replicas, PostgreSQL and sshd share the same cores:\n", r.machine.cpus)
	fmt.Fprintf(b, "this measures what the shared database and the replicas' coordination cost, not how far more\n")
	fmt.Fprintf(b, "machines would scale.\n\n")
	fmt.Fprintf(b, "| storage | actions | p50 | p99 | throughput | throughput ÷ SQLite | audit append p99 | append p99 ÷ SQLite |\n")
	fmt.Fprintf(b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	base := r.replicas[0]
	tput := func(x replicaResult) float64 { return float64(len(x.lat)) / x.wall.Seconds() }
	for _, x := range r.replicas {
		sorted := slices.Sorted(slices.Values(x.lat))
		fmt.Fprintf(b, "| %s | %d | %s | %s | %.1f | %.2f | %s | %.2f |\n", x.name, len(sorted), ms(percentile(sorted, .5)), ms(percentile(sorted, .99)),
			tput(x), tput(x)/tput(base), ms(x.appendLat.quantile(.99)), ratio(x.appendLat.quantile(.99), base.appendLat.quantile(.99)))
	}
}
