package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// storeCounters is the engine's kv.Counters behind the store's gate: a
// store not open (yet, or any more) answers ErrClosed, a database that is
// away ErrEngineUnavailable (its message names no host; the cause is
// logged at most every 10 s), as every other store operation does.
type storeCounters struct{ s *Store }

var _ kv.Counters = storeCounters{}

func (c storeCounters) do(f func(kv.Counters) error) error {
	s := c.s
	if err := s.enter(false); err != nil {
		return err
	}
	defer s.leave(false)
	k, ok := s.eng.(kv.Counters)
	if !ok {
		return fmt.Errorf("storage: the %s engine keeps no shared counters", s.Engine())
	}
	return s.engineErr(f(k))
}

func (c storeCounters) CountAllow(ctx context.Context, key string, limit int, window time.Duration) (allowed bool, remaining int, retry time.Duration, err error) {
	err = c.do(func(k kv.Counters) (err error) {
		allowed, remaining, retry, err = k.CountAllow(ctx, key, limit, window)
		return err
	})
	return allowed, remaining, retry, err
}

func (c storeCounters) CountPeek(ctx context.Context, key string, limit int, window time.Duration) (allowed bool, remaining int, retry time.Duration, err error) {
	err = c.do(func(k kv.Counters) (err error) {
		allowed, remaining, retry, err = k.CountPeek(ctx, key, limit, window)
		return err
	})
	return allowed, remaining, retry, err
}

func (c storeCounters) CountUndo(ctx context.Context, key string, window time.Duration) error {
	return c.do(func(k kv.Counters) error { return k.CountUndo(ctx, key, window) })
}

func (c storeCounters) CountReset(ctx context.Context, key string) error {
	return c.do(func(k kv.Counters) error { return k.CountReset(ctx, key) })
}
