package ledger

import (
	"sync/atomic"
	"time"
)

// Stats are counters of the ledger's commits since it was opened, for
// monitoring (a server exports them as Prometheus histograms). They are
// cumulative and read without locks, so a snapshot taken during a commit
// may be one batch behind in some fields.
type Stats struct {
	Batches uint64 // committed batches
	Entries uint64 // leaves committed in them
	// BatchBuckets[i] counts batches of at most BatchBucketBounds[i]
	// entries (and more than the bound before it); the last counts the
	// rest.
	BatchBuckets [len(BatchBucketBounds) + 1]uint64
	// CommitSeconds is the total time spent in store commits (fsync
	// included); CommitBuckets counts commits by CommitBucketBounds as
	// BatchBuckets does.
	CommitSeconds float64
	CommitBuckets [len(CommitBucketBounds) + 1]uint64
	// HeadSeconds is the total time spent keeping the batches'
	// checkpoints in the signed-head file (a write and fdatasync each,
	// signedhead.go); the next batch's commit runs meanwhile.
	HeadSeconds float64
	// Splits counts batches decided again as two because their
	// transaction would have passed the store's size limit (Store.Budget).
	Splits uint64
}

// BatchBucketBounds are the upper bounds of the batch-size buckets.
var BatchBucketBounds = [...]float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048}

// CommitBucketBounds are the upper bounds, in seconds, of the commit
// latency buckets.
var CommitBucketBounds = [...]float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// stats is the ledger's stats part: the live form of Stats. It owns the
// commit counters. Locking: none; every counter is an atomic, written by
// the commit goroutine (record, recordHead) and the sequencer (split),
// read by snapshot from any goroutine, so a snapshot taken during a
// commit may be one batch behind in some fields.
type stats struct {
	batches, entries atomic.Uint64
	commitNanos      atomic.Uint64
	headNanos        atomic.Uint64
	splits           atomic.Uint64
	batchBuckets     [len(BatchBucketBounds) + 1]atomic.Uint64
	commitBuckets    [len(CommitBucketBounds) + 1]atomic.Uint64
}

// record counts one committed batch of entries and its commit's time.
func (s *stats) record(entries int, commit time.Duration) {
	s.batches.Add(1)
	s.entries.Add(uint64(entries))
	s.commitNanos.Add(uint64(commit))
	s.batchBuckets[bucketOf(BatchBucketBounds[:], float64(entries))].Add(1)
	s.commitBuckets[bucketOf(CommitBucketBounds[:], commit.Seconds())].Add(1)
}

// recordHead counts the time of one signed-head write.
func (s *stats) recordHead(d time.Duration) { s.headNanos.Add(uint64(d)) }

// split counts a batch decided again as two.
func (s *stats) split() { s.splits.Add(1) }

// snapshot reads the counters.
func (s *stats) snapshot() Stats {
	var out Stats
	out.Batches = s.batches.Load()
	out.Entries = s.entries.Load()
	out.CommitSeconds = time.Duration(s.commitNanos.Load()).Seconds()
	out.HeadSeconds = time.Duration(s.headNanos.Load()).Seconds()
	out.Splits = s.splits.Load()
	for i := range out.BatchBuckets {
		out.BatchBuckets[i] = s.batchBuckets[i].Load()
	}
	for i := range out.CommitBuckets {
		out.CommitBuckets[i] = s.commitBuckets[i].Load()
	}
	return out
}

func bucketOf(bounds []float64, v float64) int {
	for i, b := range bounds {
		if v <= b {
			return i
		}
	}
	return len(bounds)
}

// Stats returns the ledger's commit counters.
func (l *Ledger) Stats() Stats { return l.stats.snapshot() }
