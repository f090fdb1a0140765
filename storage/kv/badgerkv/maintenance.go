package badgerkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

var (
	_ kv.GarbageCollector = (*Engine)(nil)
	_ kv.Syncer           = (*Engine)(nil)
	_ kv.Sizer            = (*Engine)(nil)
)

// CollectGarbage implements kv.GarbageCollector: it rewrites value-log
// files that are at least half garbage, until none is left, ctx ends or
// more says no, and returns how many it rewrote. The files it rewrote are
// deleted at the end of the run (below), so the space it writes meanwhile
// adds up: more bounds it (the store's free-space reserve).
func (e *Engine) CollectGarbage(ctx context.Context, more func() bool) (rewritten int, err error) {
	if err := e.enter(ctx); err != nil {
		return 0, err
	}
	defer e.mu.RUnlock()
	if e.durable != nil {
		// Badger deletes a rewritten value-log file at once unless an
		// iterator is open, and it does not sync the rewritten values
		// itself with SyncWrites off: hold an iterator until they are on
		// disk.
		txn := e.db.NewTransaction(false)
		it := txn.NewIterator(badger.IteratorOptions{})
		defer func() {
			e.vlogWritten.Store(true)
			if serr := e.durable.wait(); serr != nil {
				// The rewritten values may not be on disk: keep the
				// iterator (and so the old files) until the process ends.
				// Badger panics on discarding a transaction with an open
				// iterator, so the transaction stays open too.
				err = fmt.Errorf("sync after value-log garbage collection failed; the old value-log files are kept: %w", serr)
				return
			}
			it.Close()
			txn.Discard()
		}()
	}
	for ctx.Err() == nil && (more == nil || more()) {
		if err := e.db.RunValueLogGC(0.5); err != nil {
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				return rewritten, err
			}
			break
		}
		rewritten++
	}
	return rewritten, nil
}

// Sizer's Size: the bytes on disk of the tables and of the value logs
// (Badger's figures, updated about once a minute).
func (e *Engine) Size() (tables, logs int64) {
	if e.enter(context.Background()) != nil {
		return 0, 0
	}
	defer e.mu.RUnlock()
	return e.db.Size()
}

// importRecords writes the records next yields, with their expiry,
// through write batches. With replace the database holds exactly them
// afterwards: they must come in ascending key order (a backup's), and the
// current keys they lack are deleted as an iterator over them walks beside
// (readers see old and new records mixed meanwhile, never an empty store
// as Badger's DropAll would show them; a failure part-way leaves the mix).
func (e *Engine) importRecords(ctx context.Context, next func() (kv.Record, error), replace bool) error {
	wb := e.db.NewWriteBatch()
	defer wb.Cancel()
	// dropBefore deletes the current keys below key (all of them for nil).
	dropBefore := func([]byte) error { return nil }
	var it *badger.Iterator
	if replace {
		txn := e.db.NewTransaction(false)
		defer txn.Discard()
		it = txn.NewIterator(badger.IteratorOptions{}) // keys only
		defer it.Close()
		it.Rewind()
		dropBefore = func(key []byte) error {
			for ; it.Valid() && (key == nil || bytes.Compare(it.Item().Key(), key) < 0); it.Next() {
				if err := wb.Delete(it.Item().KeyCopy(nil)); err != nil {
					return mapErr(err)
				}
			}
			return nil
		}
	}
	now := uint64(time.Now().Unix())
	var last []byte
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := kv.CheckKey(r.Key); err != nil {
			return err
		}
		if err := kv.CheckValue(r.Value); err != nil {
			return err
		}
		if replace {
			if last != nil && bytes.Compare(r.Key, last) <= 0 {
				return fmt.Errorf("%w: records to replace with are not in ascending key order (%q after %q)", kv.ErrInvalid, r.Key, last)
			}
			last = append(last[:0], r.Key...)
			if err := dropBefore(r.Key); err != nil {
				return err
			}
		}
		if r.ExpiresAt != 0 && r.ExpiresAt <= now {
			continue // with replace, an equal current key is dropped with the next record's
		}
		if it != nil && it.Valid() && bytes.Equal(it.Item().Key(), r.Key) {
			it.Next() // overwritten
		}
		en := badger.NewEntry(bytes.Clone(r.Key), bytes.Clone(r.Value))
		en.ExpiresAt = r.ExpiresAt
		if err := wb.SetEntry(en); err != nil {
			return mapErr(err)
		}
	}
	if err := dropBefore(nil); err != nil {
		return err
	}
	return mapErr(wb.Flush())
}

// ZapLogger adapts zap to Badger's Logger (Options.Logger). Badger is
// chatty at info level (compactions, flushes), so its info lines become
// debug.
func ZapLogger(l *zap.Logger) badger.Logger { return zapLogger{l.Sugar()} }

type zapLogger struct{ s *zap.SugaredLogger }

func (l zapLogger) Errorf(f string, a ...any)   { l.s.Errorf(strings.TrimSpace(f), a...) }
func (l zapLogger) Warningf(f string, a ...any) { l.s.Warnf(strings.TrimSpace(f), a...) }
func (l zapLogger) Infof(f string, a ...any)    { l.s.Debugf(strings.TrimSpace(f), a...) }
func (l zapLogger) Debugf(f string, a ...any)   { l.s.Debugf(strings.TrimSpace(f), a...) }
