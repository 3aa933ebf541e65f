package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/custodylog/custody/internal/witnessproc"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/witness"
	"github.com/custodylog/custody/witness/cosign"
)

// WitnessResult compares the latency of pending receipts over HTTP
// without witnesses and in witness finality mode under a 2-of-3 quorum of
// local witnesses (two omniwitness, one litewitness), with the same load.
type WitnessResult struct {
	Clients     int          `json:"clients"`
	Interval    string       `json:"witness_interval"`
	Unwitnessed AppendResult `json:"unwitnessed"`
	Witnessed   AppendResult `json:"witnessed"`
	// Ratio is the witnessed pending receipts' p50 over the unwitnessed.
	Ratio float64 `json:"pending_p50_ratio"`
	// Cosigned is how many checkpoints the quorum cosigned during the
	// witnessed run, and Commits how many the ledger committed: one
	// witnessed checkpoint covers Commits/Cosigned batches.
	Cosigned int `json:"cosigned_checkpoints"`
	Commits  int `json:"commits"`
	// WitnessMs is the mean time a witness took to answer add-checkpoint,
	// and PerWitnessMs the same by witness (w1, w2: omniwitness; w3:
	// litewitness).
	WitnessMs    float64            `json:"witness_answer_ms"`
	PerWitnessMs map[string]float64 `json:"witness_answer_ms_by_witness"`
	// QuorumMs is the mean time from a checkpoint's publication to its
	// meeting the quorum.
	QuorumMs float64 `json:"quorum_ms"`
}

// WitnessLatency runs about n authorised submissions from clients HTTP
// clients twice, on fresh ledgers in dir: once without witnesses, once
// with --witness-finality and the witnesses from bin (scripts/witness.sh),
// sending each witness at most one checkpoint per interval.
func WitnessLatency(ctx context.Context, dir, bin string, n, clients int, interval time.Duration) (WitnessResult, error) {
	if err := witnessproc.Missing(bin); err != nil {
		return WitnessResult{}, err
	}
	res := WitnessResult{Clients: clients, Interval: interval.String()}
	var err error
	if res.Unwitnessed, err = HTTPAppends(ctx, filepath.Join(dir, "unwitnessed"), n, clients); err != nil {
		return res, fmt.Errorf("unwitnessed: %w", err)
	}
	wdir := filepath.Join(dir, "witnessed")
	ab, err := newAuthBench(ctx, filepath.Join(wdir, "log"), n, clients)
	if err != nil {
		return res, fmt.Errorf("setting up chains: %w", err)
	}
	defer ab.w.l.Close()
	lg := witnessproc.Log{Origin: origin, VKey: ab.w.l.VerifierKey()}
	var ws []*witnessproc.Witness
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	for i, kind := range []string{"omniwitness", "omniwitness", "litewitness"} {
		d := filepath.Join(wdir, fmt.Sprintf("w%d", i+1))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return res, err
		}
		name := fmt.Sprintf("w%d.bench.example", i+1)
		var w *witnessproc.Witness
		if kind == "omniwitness" {
			w, err = witnessproc.StartOmniwitness(bin, d, name, lg)
		} else {
			w, err = witnessproc.StartLitewitness(bin, d, name, lg)
		}
		if err != nil {
			return res, err
		}
		ws = append(ws, w)
	}
	p, err := witness.ParsePolicy([]byte(ws[0].PolicyLine("w1") + "\n" + ws[1].PolicyLine("w2") + "\n" + ws[2].PolicyLine("w3") +
		"\ngroup local 2 w1 w2 w3\nquorum local\n"))
	if err != nil {
		return res, err
	}
	srv := server.New(ab.w.l, server.Options{MaxInFlight: max(1024, 2*clients),
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		WitnessPolicy: p, WitnessFinality: true, WitnessTimeout: 30 * time.Second,
		Witness: cosign.Options{Interval: interval}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln, server.ServeOptions{}) }()
	s0 := ab.w.l.Stats()
	w0 := srv.WitnessStats()
	res.Witnessed, err = ab.runHTTP(ctx, "http://"+ln.Addr().String()+"/v1/entries")
	s1 := ab.w.l.Stats()
	w1 := srv.WitnessStats()
	stop()
	if err = errors.Join(err, <-served); err != nil {
		return res, fmt.Errorf("witnessed: %w", err)
	}
	res.Commits = int(s1.Batches - s0.Batches)
	res.Cosigned = w1.Witnessed - w0.Witnessed
	if n := w1.Answers - w0.Answers; n > 0 {
		res.WitnessMs = 1000 * (w1.AnswerSeconds - w0.AnswerSeconds) / float64(n)
	}
	res.PerWitnessMs = map[string]float64{}
	for name, s := range w1.PerWitness {
		s0 := w0.PerWitness[name]
		if n := s.Answers - s0.Answers; n > 0 {
			res.PerWitnessMs[name] = 1000 * (s.AnswerSeconds - s0.AnswerSeconds) / float64(n)
		}
	}
	if res.Cosigned > 0 {
		res.QuorumMs = 1000 * (w1.QuorumSeconds - w0.QuorumSeconds) / float64(res.Cosigned)
	}
	if res.Unwitnessed.PendingP50Ms > 0 {
		res.Ratio = res.Witnessed.PendingP50Ms / res.Unwitnessed.PendingP50Ms
	}
	return res, nil
}
