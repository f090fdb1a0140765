package pgkv

// What several nodes share through the database: notifications (LISTEN/
// NOTIFY), leases and id slots, counters.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/jackc/pgx/v5"
)

// ---- notifications ----

// Subscribe implements kv.Engine.
func (e *Engine) Subscribe(channel string, fn func(string)) (func(), error) {
	if err := kv.CheckNotify(channel, ""); err != nil {
		return nil, err
	}
	if strings.ContainsRune(channel, '\n') {
		return nil, fmt.Errorf("%w: a channel may not contain a newline", kv.ErrInvalid)
	}
	return e.hub.Subscribe(channel, fn), nil
}

// Live implements kv.Engine.
func (e *Engine) Live() bool { return e.listening.Load()&1 == 1 }

// LiveEpoch implements kv.LiveEpochs: the epoch counts the listener's
// connections.
func (e *Engine) LiveEpoch() (uint64, bool) {
	l := e.listening.Load()
	return l >> 1, l&1 == 1
}

// listen keeps one connection LISTENing on the prefix's channel and
// dispatches to the hub; after every (re)connection it tells every
// subscriber kv.Missed, since notifications sent while it was away are
// lost.
func (e *Engine) listen() {
	defer e.bg.Done()
	backoff := 50 * time.Millisecond
	for e.ctx.Err() == nil {
		err := e.listenOnce()
		e.listening.Store(e.listening.Load() &^ 1) // only this goroutine changes it while open
		if e.ctx.Err() != nil {
			return
		}
		_ = err
		t := time.NewTimer(backoff)
		select {
		case <-e.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (e *Engine) listenOnce() error {
	conn, err := pgx.ConnectConfig(e.ctx, e.cfg.ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(e.ctx, `LISTEN `+pgx.Identifier{e.q.channel}.Sanitize()); err != nil {
		return err
	}
	// A new epoch: caches filled before it are not trusted (LiveEpoch),
	// whether or not their subscriber has had kv.Missed yet.
	e.listening.Store((e.listening.Load()>>1+1)<<1 | 1)
	for _, c := range e.hub.Channels() {
		e.hub.Publish(c, kv.Missed)
	}
	for {
		n, err := conn.WaitForNotification(e.ctx)
		if err != nil {
			return err
		}
		ch, payload, ok := strings.Cut(n.Payload, "\n")
		if ok {
			e.hub.Publish(ch, payload)
		}
	}
}

// ---- leases ----

// tryLease takes or renews the lease name for this engine; it reports
// whether this engine holds it now.
func (e *Engine) tryLease(ctx context.Context, name string) (bool, error) {
	if err := e.ensureSchema(ctx); err != nil {
		return false, err
	}
	var holder string
	err := e.pool.QueryRow(ctx, `INSERT INTO `+e.p+`_lease (name, holder, expires_at) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
		WHERE `+e.p+`_lease.holder = EXCLUDED.holder OR `+e.p+`_lease.expires_at <= now()
		RETURNING holder`, name, e.holder, e.opts.LeaseTTL.Milliseconds()).Scan(&holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, mapErr(ctx, err)
	}
	return holder == e.holder, nil
}

func (e *Engine) releaseLease(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e.pool.Exec(ctx, `DELETE FROM `+e.p+`_lease WHERE name = $1 AND holder = $2`, name, e.holder)
}

// Lead implements kv.Leases with lease rows: tried every LeaseTTL/3, renewed
// as often while held; fn's context ends once a renewal has not succeeded
// for 2/3 of LeaseTTL (before the row can expire for another node).
func (e *Engine) Lead(ctx context.Context, name string, fn func(context.Context)) {
	every := e.opts.LeaseTTL / 3
	for ctx.Err() == nil && e.ctx.Err() == nil {
		start := time.Now()
		ok, _ := e.tryLease(ctx, name)
		if ok {
			e.holdLease(ctx, name, start, fn)
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
		case <-e.ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

func (e *Engine) holdLease(ctx context.Context, name string, acquired time.Time, fn func(context.Context)) {
	lctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.ctx, cancel)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(lctx)
	}()
	every := e.opts.LeaseTTL / 3
	deadline := acquired.Add(2 * e.opts.LeaseTTL / 3)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			cancel()
			e.releaseLease(name)
			return
		case <-t.C:
			start := time.Now()
			rctx, rcancel := context.WithDeadline(lctx, deadline)
			ok, err := e.tryLease(rctx, name)
			rcancel()
			if err == nil && ok {
				deadline = start.Add(2 * e.opts.LeaseTTL / 3)
			} else if err == nil || time.Now().After(deadline) {
				// Lost (another holder) or not renewed in time.
				cancel()
			}
		}
	}
}

// IDSlot implements kv.IDSlots with the leases "kv:idslot:<i>": the first
// free slot is taken and renewed in the background; the slot is refused
// (error) once a renewal has not succeeded for 2/3 of LeaseTTL, and claimed
// anew (maybe another number) on the next call.
func (e *Engine) IDSlot(ctx context.Context) (uint16, error) {
	e.slotMu.Lock()
	defer e.slotMu.Unlock()
	if e.slot >= 0 && time.Since(time.Unix(0, e.slotSince.Load())) < 2*e.opts.LeaseTTL/3 {
		return uint16(e.slot), nil
	}
	if e.slot >= 0 {
		e.slot = -1
		return 0, fmt.Errorf("%w: the id slot's lease was not renewed in time", kv.ErrUnavailable)
	}
	for i := 0; i <= kv.MaxIDSlot; i++ {
		start := time.Now()
		ok, err := e.tryLease(ctx, fmt.Sprintf("kv:idslot:%d", i))
		if err != nil {
			return 0, err
		}
		if ok {
			e.slot = i
			e.slotSince.Store(start.UnixNano())
			e.bg.Add(1)
			go e.keepSlot(i)
			return uint16(i), nil
		}
	}
	return 0, fmt.Errorf("all %d id slots are held by other nodes", kv.MaxIDSlot+1)
}

// HeldIDSlot implements kv.IDSlots: the slot while its lease was renewed
// less than 2/3 of LeaseTTL ago.
func (e *Engine) HeldIDSlot() (uint16, bool) {
	e.slotMu.Lock()
	defer e.slotMu.Unlock()
	if e.slot >= 0 && time.Since(time.Unix(0, e.slotSince.Load())) < 2*e.opts.LeaseTTL/3 {
		return uint16(e.slot), true
	}
	return 0, false
}

func (e *Engine) keepSlot(i int) {
	defer e.bg.Done()
	name := fmt.Sprintf("kv:idslot:%d", i)
	t := time.NewTicker(e.opts.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(e.ctx, e.opts.LeaseTTL/3)
		ok, err := e.tryLease(ctx, name)
		cancel()
		e.slotMu.Lock()
		if e.slot != i {
			e.slotMu.Unlock()
			return
		}
		if err == nil && ok {
			e.slotSince.Store(start.UnixNano())
		} else if err == nil {
			e.slot = -1 // taken by another node after it expired
			e.slotMu.Unlock()
			return
		}
		e.slotMu.Unlock()
	}
}

// ---- counters ----

func (e *Engine) count(ctx context.Context, key string, limit int, window time.Duration, op int) (bool, int, time.Duration, error) {
	if len(key) == 0 || len(key) > kv.MaxKeySize || window < time.Millisecond || (op != -1 && limit < 1) {
		return false, 0, 0, fmt.Errorf("%w: counter key of 1 to 4096 bytes, limit ≥ 1 and window ≥ 1 ms", kv.ErrInvalid)
	}
	if err := e.ensureSchema(ctx); err != nil {
		return false, 0, 0, err
	}
	var allowed bool
	var remaining *int32
	var retryMS int64
	err := e.pool.QueryRow(ctx, `SELECT allowed, remaining, retry_ms FROM `+e.p+`_count($1, $2, $3, $4)`,
		key, limit, window.Milliseconds(), op).Scan(&allowed, &remaining, &retryMS)
	if err != nil {
		return false, 0, 0, mapErr(ctx, err)
	}
	rem := 0
	if remaining != nil {
		rem = int(*remaining)
	}
	return allowed, rem, time.Duration(retryMS) * time.Millisecond, nil
}

// CountAllow implements kv.Counters.
func (e *Engine) CountAllow(ctx context.Context, key string, limit int, window time.Duration) (bool, int, time.Duration, error) {
	return e.count(ctx, key, limit, window, 1)
}

// CountPeek implements kv.Counters.
func (e *Engine) CountPeek(ctx context.Context, key string, limit int, window time.Duration) (bool, int, time.Duration, error) {
	return e.count(ctx, key, limit, window, 0)
}

// CountUndo implements kv.Counters.
func (e *Engine) CountUndo(ctx context.Context, key string, window time.Duration) error {
	_, _, _, err := e.count(ctx, key, 1, window, -1)
	return err
}

// CountReset implements kv.Counters.
func (e *Engine) CountReset(ctx context.Context, key string) error {
	if err := e.ensureSchema(ctx); err != nil {
		return err
	}
	_, err := e.pool.Exec(ctx, `DELETE FROM `+e.p+`_counter WHERE k = $1`, key)
	return mapErr(ctx, err)
}
