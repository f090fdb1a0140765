package kv

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Retry bounds RunTx: each retry after a conflict waits a random time of up
// to a backoff that doubles from RetryBackoffMin to RetryBackoffMax (writers
// retried at once meet again), for at most RetryBudget of waiting in all
// (storage/tx.go's values).
const (
	RetryBackoffMin = 500 * time.Microsecond
	RetryBackoffMax = 50 * time.Millisecond
	RetryBudget     = 10 * time.Second
)

// RunTx runs fn in e.Update, again after ErrConflict, with randomized
// exponential backoff, until it commits, fails otherwise, ctx ends, or
// RetryBudget of waiting has passed (then ErrConflict is returned). fn may
// run several times, so it must have no effect outside the transaction.
func RunTx(ctx context.Context, e Engine, opts TxOptions, fn func(Writer) error) error {
	backoff := RetryBackoffMin
	var waited time.Duration
	for {
		err := e.Update(ctx, opts, fn)
		if !errors.Is(err, ErrConflict) || waited >= RetryBudget {
			return err
		}
		d := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		waited += d
		backoff = min(2*backoff, RetryBackoffMax)
	}
}
