package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/custodylog/custody/internal/version"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server/api"
)

// metrics are the server's Prometheus metrics. The ledger's own commit
// counters (batch sizes, commit latency) are read from ledger.Stats at
// scrape time by ledgerCollector.
type metrics struct {
	appends  *prometheus.CounterVec   // by verdict: accepted, denied, refused, overloaded, unavailable, abandoned, error
	denials  *prometheus.CounterVec   // by reason_code
	refusals *prometheus.CounterVec   // by reason_code
	latency  *prometheus.HistogramVec // append answer latency by verdict
	inFlight prometheus.Gauge
	streams  prometheus.Gauge
	// streamsCut counts event streams ended because their client did not
	// keep up (fanout.go).
	streamsCut prometheus.Counter
	// heavyRefused counts reads answered 503 for want of a heavy-read
	// token (readcap.go).
	heavyRefused prometheus.Counter
	// answered holds appends' and latency's series of the verdicts every
	// logged append ends in (accepted, held, denied), looked up once here
	// rather than by label on every answer.
	answered map[string]verdictSeries
}

type verdictSeries struct {
	appends prometheus.Counter
	latency prometheus.Observer
}

// answer counts one append answered with verdict after d seconds.
func (m *metrics) answer(verdict string, seconds float64) {
	vs, ok := m.answered[verdict]
	if !ok {
		vs = verdictSeries{m.appends.WithLabelValues(verdict), m.latency.WithLabelValues(verdict)}
	}
	vs.appends.Inc()
	vs.latency.Observe(seconds)
}

func newMetrics(reg prometheus.Registerer, s *Server) *metrics {
	m := &metrics{
		appends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "custody_appends_total",
			Help: "Appends answered, by verdict (accepted, denied, refused, overloaded, unavailable, abandoned, error)."}, []string{"verdict"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "custody_denials_total",
			Help: "Submissions denied and logged as a DENIAL, by reason code."}, []string{"reason_code"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "custody_refusals_total",
			Help: "Submissions refused and not logged, by reason code."}, []string{"reason_code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "custody_append_duration_seconds",
			Help:    "Time from receiving an append to answering it, by verdict.",
			Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5}}, []string{"verdict"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "custody_appends_in_flight", Help: "Appends being decided now."}),
		streams:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "custody_event_streams", Help: "Open workflow event streams."}),
		streamsCut: prometheus.NewCounter(prometheus.CounterOpts{Name: "custody_event_streams_cut_total",
			Help: "Event streams ended because their client did not keep up (a write past StreamWriteTimeout, or more than StreamLag events behind)."}),
		heavyRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "custody_heavy_reads_refused_total",
			Help: "Bundle, workflow and catch-up reads answered 503 because every heavy-read token was taken."}),
	}
	m.answered = map[string]verdictSeries{}
	for _, v := range []string{api.Accepted, api.Held, api.Denied} {
		m.answered[v] = verdictSeries{m.appends.WithLabelValues(v), m.latency.WithLabelValues(v)}
	}
	bi := version.Get()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{Name: "custody_build_info",
		Help:        "Always 1; the labels say which custody build serves (internal/version).",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "goversion": bi.Go}})
	buildInfo.Set(1)
	reg.MustRegister(m.appends, m.denials, m.refusals, m.latency, m.inFlight, m.streams, m.streamsCut, m.heavyRefused, buildInfo,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "custody_queue_depth", Help: "Submissions waiting to be sequenced."},
			func() float64 { return float64(s.l.QueueDepth()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "custody_tree_size", Help: "Entries under the latest checkpoint."},
			func() float64 { return float64(s.l.Head().Size) }),
		&ledgerCollector{l: s.l},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "custody_lease_epoch", Help: "The sequencer lease's epoch as this server last saw it (0 on a data folder)."},
			func() float64 { return float64(s.l.Role().Epoch) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "custody_lease_leader", Help: "1 while this server sequences the log, 0 otherwise."},
			func() float64 {
				if s.l.Role().Leader {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "custody_lease_takeovers_total", Help: "Times this server took the sequencer lease."},
			func() float64 { return float64(s.l.Role().Takeovers) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "custody_lease_stepdowns_total", Help: "Times this server lost the sequencer lease (fenced, taken over, or not renewed in time)."},
			func() float64 { return float64(s.l.Role().StepDowns) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "custody_lease_lost_total", Help: "Times this server lost the sequencer lease without giving it up: taken over, not renewed in time, or a fenced commit."},
			func() float64 { return float64(s.l.Role().Lost) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "custody_lease_renewed_late_total", Help: "Lease renewals that came after more than two thirds of the lease had passed since the last one (renewals come every third)."},
			func() float64 { return float64(s.l.Role().RenewedLate) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "custody_lease_fenced_commits_total", Help: "Batches the database refused because the lease had moved on (nothing of them acknowledged)."},
			func() float64 { return float64(s.l.Role().FencedCommits) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "custody_lease_failovers", Help: "Takeovers of the log from another server, as the database counts them (all servers)."},
			func() float64 { return float64(s.l.Role().Failovers) }),
	)
	return m
}

// ledgerCollector exports ledger.Stats as histograms.
type ledgerCollector struct{ l *ledger.Ledger }

var (
	batchDesc = prometheus.NewDesc("custody_batch_entries",
		"Entries committed per batch (one Badger transaction and one checkpoint each).", nil, nil)
	commitDesc = prometheus.NewDesc("custody_commit_duration_seconds",
		"Duration of each batch's Badger commit, fsync included.", nil, nil)
	splitDesc = prometheus.NewDesc("custody_batch_splits_total",
		"Batches decided again as two halves because their transaction would have passed Badger's size limit.", nil, nil)
)

func (c *ledgerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- batchDesc
	ch <- commitDesc
	ch <- splitDesc
}

func (c *ledgerCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.l.Stats()
	ch <- prometheus.MustNewConstHistogram(batchDesc, st.Batches, float64(st.Entries),
		cumulative(ledger.BatchBucketBounds[:], st.BatchBuckets[:]))
	ch <- prometheus.MustNewConstHistogram(commitDesc, st.Batches, st.CommitSeconds,
		cumulative(ledger.CommitBucketBounds[:], st.CommitBuckets[:]))
	ch <- prometheus.MustNewConstMetric(splitDesc, prometheus.CounterValue, float64(st.Splits))
}

// cumulative turns per-bucket counts into Prometheus' cumulative buckets
// (the last, +Inf, bucket is implied by the total count).
func cumulative(bounds []float64, counts []uint64) map[float64]uint64 {
	out := make(map[float64]uint64, len(bounds))
	var sum uint64
	for i, b := range bounds {
		sum += counts[i]
		out[b] = sum
	}
	return out
}
