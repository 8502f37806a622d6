package main

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What the report reads of the airlock serve process: its CPU time, its memory and
// its histograms.

// gatewayProbe reads the airlock serve process's counters.
type gatewayProbe struct {
	pid        int
	metricsURL string
}

// cpu is the process's user+system time so far, from /proc/PID/stat.
func (g gatewayProbe) cpu(t *testing.T) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", g.pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	// Fields 14 and 15 of stat (utime, stime), in clock ticks; f starts at
	// field 3. The kernel's USER_HZ is 100 on every Linux architecture Go
	// supports.
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// resetPeak starts the process's peak resident set (VmHWM) again from its
// current one (proc(5): clear_refs, 5).
func (g gatewayProbe) resetPeak(t *testing.T) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", g.pid), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak resident set: %v", err)
	}
}

// memory returns the process's peak and current resident set, in KiB.
func (g gatewayProbe) memory(t *testing.T) (peak, now int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			peak, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			now, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return peak, now
}

// histogram is a cumulative Prometheus histogram: counts by upper bound.
type histogram struct {
	bounds []float64 // seconds, ascending, +Inf last
	counts []float64 // cumulative
	sum    float64
}

// appendHistogram reads airlock_audit_append_seconds from /metrics.
func (g gatewayProbe) appendHistogram(t *testing.T) histogram {
	return g.histogram(t, "airlock_audit_append_seconds")
}

// histogram reads one histogram from /metrics.
func (g gatewayProbe) histogram(t *testing.T, name string) histogram {
	resp, err := http.Get(g.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h histogram
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+"_sum "); ok {
			h.sum, _ = strconv.ParseFloat(v, 64)
		}
		rest, ok := strings.CutPrefix(sc.Text(), name+`_bucket{le="`)
		if !ok {
			continue
		}
		le, count, _ := strings.Cut(rest, `"} `)
		b, err1 := strconv.ParseFloat(le, 64)
		c, err2 := strconv.ParseFloat(count, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("metrics: %q", sc.Text())
		}
		h.bounds, h.counts = append(h.bounds, b), append(h.counts, c)
	}
	if len(h.bounds) == 0 {
		t.Fatalf("metrics: no %s histogram", name)
	}
	return h
}

func (h histogram) minus(o histogram) histogram {
	d := histogram{bounds: h.bounds, counts: slices.Clone(h.counts), sum: h.sum - o.sum}
	for i := range d.counts {
		d.counts[i] -= o.counts[i]
	}
	return d
}

func (h histogram) total() float64 { return h.counts[len(h.counts)-1] }

// quantile interpolates linearly within the bucket holding q, as
// Prometheus's histogram_quantile does.
func (h histogram) quantile(q float64) time.Duration {
	n := h.total()
	if n == 0 {
		return 0
	}
	rank := q * n
	lower, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			upper := h.bounds[i]
			if math.IsInf(upper, 1) {
				return time.Duration(lower * float64(time.Second))
			}
			frac := 0.0
			if c > below {
				frac = (rank - below) / (c - below)
			}
			return time.Duration((lower + (upper-lower)*frac) * float64(time.Second))
		}
		lower, below = h.bounds[i], c
	}
	return 0
}
