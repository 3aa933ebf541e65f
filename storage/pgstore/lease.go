package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custodylog/custody/storage"
)

// Lease is the state of the sequencer lease.
type Lease = storage.Lease

var _ storage.Leaser = (*Store)(nil)

// Epoch is the lease epoch this store commits under (0: none).
func (s *Store) Epoch() uint64 { return s.epoch.Load() }

// Holder names this process in the lease row.
func (s *Store) Holder() string { return s.holder }

// Acquire takes the sequencer lease for ttl if it has expired (or was
// released), increasing its epoch; advertise is the URL this server takes
// appends at. It returns the lease as it now stands: Mine says whether
// this store got it.
func (s *Store) Acquire(ctx context.Context, advertise string, ttl time.Duration) (Lease, error) {
	var l Lease
	var epoch, failovers int64
	err := s.pool.QueryRow(ctx, `UPDATE custody_lease SET epoch = epoch + 1, holder = $1, url = $2,
			expires_at = clock_timestamp() + $3 * interval '1 millisecond',
			failovers = failovers + CASE WHEN holder <> '' AND holder <> $1 THEN 1 ELSE 0 END
		WHERE id = 1 AND expires_at < clock_timestamp()
		RETURNING epoch, holder, url, expires_at, failovers`, s.holder, advertise, ttl.Milliseconds()).
		Scan(&epoch, &l.Holder, &l.URL, &l.Expires, &failovers)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.Lease(ctx)
	}
	if err != nil {
		return Lease{}, s.wrap(fmt.Errorf("acquiring the sequencer lease: %w", err))
	}
	l.Epoch, l.Failovers, l.Live, l.Mine = uint64(epoch), uint64(failovers), true, true
	s.leaseMS.Store(max(ttl.Milliseconds(), 100))
	s.newScope()
	s.epoch.Store(l.Epoch)
	return l, nil
}

// Renew extends the lease this store holds by ttl. It fails with
// storage.ErrFenced, and forgets the epoch, if the lease is no longer
// this store's.
func (s *Store) Renew(ctx context.Context, ttl time.Duration) (time.Time, error) {
	epoch := s.epoch.Load()
	if epoch == 0 {
		return time.Time{}, fmt.Errorf("%w: no lease to renew", storage.ErrFenced)
	}
	var exp time.Time
	err := s.pool.QueryRow(ctx, `UPDATE custody_lease SET expires_at = clock_timestamp() + $2 * interval '1 millisecond'
		WHERE id = 1 AND epoch = $1 AND holder = $3 RETURNING expires_at`, int64(epoch), ttl.Milliseconds(), s.holder).Scan(&exp)
	if errors.Is(err, pgx.ErrNoRows) {
		if s.epoch.CompareAndSwap(epoch, 0) {
			s.endScope()
		}
		return time.Time{}, fmt.Errorf("%w: the lease of epoch %d was taken over", storage.ErrFenced, epoch)
	}
	if err != nil {
		return time.Time{}, s.wrap(fmt.Errorf("renewing the sequencer lease: %w", err))
	}
	s.leaseMS.Store(max(ttl.Milliseconds(), 100))
	return exp, nil
}

// Drop forgets the lease locally: every later commit is fenced. The
// caller steps down.
func (s *Store) Drop() {
	s.epoch.Store(0)
	s.endScope()
}

// Release gives the lease up so another server can take it at once.
func (s *Store) Release(ctx context.Context) error {
	epoch := s.epoch.Swap(0)
	s.endScope()
	if epoch == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `UPDATE custody_lease SET expires_at = '-infinity' WHERE id = 1 AND epoch = $1 AND holder = $2`,
		int64(epoch), s.holder)
	return s.wrap(err)
}

// Lease reads the lease as it stands.
func (s *Store) Lease(ctx context.Context) (Lease, error) {
	var l Lease
	var epoch, failovers int64
	var expires *time.Time // NULL for a lease never taken or released ('-infinity')
	err := s.pool.QueryRow(ctx, `SELECT epoch, holder, url, CASE WHEN isfinite(expires_at) THEN expires_at END,
			expires_at > clock_timestamp(), failovers
		FROM custody_lease WHERE id = 1`).Scan(&epoch, &l.Holder, &l.URL, &expires, &l.Live, &failovers)
	if err != nil {
		return Lease{}, s.wrap(fmt.Errorf("reading the sequencer lease: %w", err))
	}
	if expires != nil {
		l.Expires = *expires
	}
	l.Epoch, l.Failovers = uint64(epoch), uint64(failovers)
	l.Mine = l.Holder == s.holder && l.Epoch == s.epoch.Load() && l.Epoch != 0
	return l, nil
}
