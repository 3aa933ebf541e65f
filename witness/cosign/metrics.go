package cosign

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	requests  *prometheus.CounterVec   // by witness and outcome
	latency   *prometheus.HistogramVec // by witness
	size      *prometheus.GaugeVec     // the size each witness last cosigned
	witnessed prometheus.Gauge         // the largest size that met the quorum
}

func newMetrics(reg prometheus.Registerer, c *Cosigner) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "custody_witness_requests_total",
			Help: "add-checkpoint requests, by witness and outcome (cosigned, conflict, fork, unknown_log, forbidden, bad_request, busy, bad_answer, timeout, error)."},
			[]string{"witness", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "custody_witness_request_duration_seconds",
			Help:    "Time for a witness to answer add-checkpoint.",
			Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}}, []string{"witness"}),
		size: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "custody_witness_cosigned_size",
			Help: "The tree size each witness last cosigned."}, []string{"witness"}),
		witnessed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "custody_witness_quorum_size",
			Help: "The largest tree size whose checkpoint met the witness quorum."}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency, m.size, m.witnessed)
	}
	return m
}

func (m *metrics) outcome(witness, outcome string) {
	m.requests.WithLabelValues(witness, outcome).Inc()
}
