package engine

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/airlockgw/airlock/gateway/config"
)

// metrics are the gateway's Prometheus metrics, in a registry of its own.
type metrics struct {
	reg          *prometheus.Registry
	actions      *prometheus.CounterVec
	inFlight     prometheus.Gauge
	approvalWait prometheus.Histogram
	phase        *prometheus.HistogramVec
	auditAppend  prometheus.Histogram
	auditCommit  prometheus.Histogram
	auditBatch   prometheus.Histogram
	authFailures *prometheus.CounterVec
	witnessRuns  *prometheus.CounterVec
	// configDrift and configDigest are the replicas' configuration drift
	// (drift.go).
	configDrift  prometheus.Gauge
	configDigest *prometheus.GaugeVec
	digestMu     sync.Mutex
	digestShown  string
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_actions_total",
			Help: "Actions by terminal outcome.",
		}, []string{"outcome"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "airlock_actions_in_flight",
			Help: "Actions between request and outcome.",
		}),
		approvalWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "airlock_approval_wait_seconds",
			Help:    "Time an action waited for a reviewer's decision.",
			Buckets: []float64{0.01, 0.1, 1, 5, 15, 30, 60, 120, 300, 600},
		}),
		phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "airlock_action_phase_seconds",
			Help:    "Duration of each phase of an action: check, run, policy, requested, approval, slot, intent, dial, handshake, auth, session, command, output, result.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"phase"}),
		auditAppend: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "airlock_audit_append_seconds",
			Help:    "Latency of one durable audit append.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		auditCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "airlock_audit_commit_seconds",
			Help:    "Time of one group commit of the audit log (transaction to durable), whatever its size; an append's latency beyond this is waiting for the writer.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		auditBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "airlock_audit_commit_entries",
			Help:    "Entries per group commit of the audit log.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
		}),
	}
	m.authFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "airlock_auth_failures_total",
		Help: "Failed credentials by kind (reviewer_password, run_token, local_token, …): every one, also those the audit log's bound holds back and guesses at one reviewer spread over many addresses.",
	}, []string{"credential"})
	m.witnessRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "airlock_audit_witness_runs_total",
		Help: "Runs of the audit witness_command by result (ok, failed): a failed run means a signed checkpoint was not kept elsewhere; the gateway's log says why.",
	}, []string{"result"})
	m.witnessRuns.WithLabelValues("ok")
	m.witnessRuns.WithLabelValues("failed") // 0 shows before the first failure
	m.configDrift = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "airlock_replicas_config_drift",
		Help: "Live replicas sharing this gateway's database whose configuration's security digest differs from this one's (0 without a storage block).",
	})
	m.configDigest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "airlock_config_digest_info",
		Help: "1, labelled with the short security digest of the configuration this replica enforces, as airlock storage status shows it (with a storage block).",
	}, []string{"digest"})
	m.reg.MustRegister(m.actions, m.inFlight, m.approvalWait, m.phase, m.auditAppend, m.auditCommit, m.auditBatch, m.authFailures, m.witnessRuns,
		m.configDrift, m.configDigest,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Metrics is the engine's Prometheus registry: actions by outcome, in
// flight, approval waits, connection phases and audit appends, with the Go
// and process collectors.
func (e *Engine) Metrics() *prometheus.Registry { return e.metrics.reg }

// setConfigDigest makes digest the one airlock_config_digest_info names.
func (m *metrics) setConfigDigest(digest string) {
	short := config.ShortDigest(digest)
	m.digestMu.Lock()
	defer m.digestMu.Unlock()
	if short == m.digestShown {
		return
	}
	m.configDigest.Reset()
	m.configDigest.With(prometheus.Labels{"digest": short}).Set(1)
	m.digestShown = short
}

// witnessRun counts one run of the witness command (err nil: it accepted
// the note).
func (m *metrics) witnessRun(err error) {
	result := "ok"
	if err != nil {
		result = "failed"
	}
	m.witnessRuns.WithLabelValues(result).Inc()
}
