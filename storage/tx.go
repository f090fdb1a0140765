package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// Errors shared by every repository. Handlers map them to their protocol's
// error format with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
	// ErrNotSynced: the write is made and visible, but it may not survive
	// a power loss: the store's disk failed a sync. Store.Sync returns it
	// when its own sync fails; a failed sync of writes acknowledged without
	// waiting (UpdateAsync) is counted by Store.FailedSyncs.
	ErrNotSynced = kv.ErrNotSynced
)

// InvalidError reports input that breaks a rule; its message is safe to show
// to the client.
type InvalidError struct {
	Msg string
	// Field names the input field at fault ("color"), when one is: APIs
	// that point at it (Inboxt's error path) say which.
	Field string
}

func (e *InvalidError) Error() string { return e.Msg }

// Invalid returns an *InvalidError with a formatted message.
func Invalid(format string, a ...any) error { return &InvalidError{Msg: fmt.Sprintf(format, a...)} }

// InvalidField returns an *InvalidError about the input field named field.
func InvalidField(field, format string, a ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, a...), Field: field}
}

// IsInvalid reports whether err is (or wraps) an *InvalidError.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

// Tx is a read or read-write transaction. Repositories take a *Tx so that one
// request's changes to several records commit together or not at all.
type Tx struct {
	r  kv.Reader
	w  kv.Writer // nil in a View
	st *Store    // in an Update: for new ids
	// state holds the domains' state of this transaction (TxState), by
	// kind.
	state [maxTxStates]any
	// cachedWritten lists the keys of cached records (see recordCache)
	// this transaction wrote or deleted.
	cachedWritten []string
	// written counts the bytes of the keys and values put or deleted
	// (Store.writesDone).
	written int64
}

// View runs fn in a read-only transaction.
func (s *Store) View(ctx context.Context, fn func(tx *Tx) error) error {
	if err := s.enter(false); err != nil {
		return err
	}
	defer s.leave(false)
	return s.engineErr(s.eng.View(ctx, func(r kv.Reader) error { return fn(&Tx{r: r}) }))
}

// Update runs fn in a read-write transaction and commits it when fn returns
// nil. On a conflict with a concurrent transaction it retries (see
// retryBudget), so fn must not have side effects outside the transaction.
func (s *Store) Update(ctx context.Context, fn func(tx *Tx) error) error {
	return s.updateRetrying(ctx, kv.TxOptions{}, fn)
}

// UpdateAsync is Update with an asynchronous commit (PostgreSQL's term,
// kv.TxOptions.Async), for records a client can get again by asking, with no
// person involved: it returns once the commit survives a crash of the
// process (Badger: in its memory-mapped logs) and the commit reaches the
// disk soon after (Badger: with the next synchronous commit's sync or a sync
// starting at the latest 200 ms later). A power loss or an operating-system
// crash before then can lose it. Nothing durable may depend on such a
// record, and removals (revocations) never go through here.
func (s *Store) UpdateAsync(ctx context.Context, fn func(tx *Tx) error) error {
	return s.updateRetrying(ctx, kv.TxOptions{Async: true}, fn)
}

// UpdateInParts commits fn(tx, ids) in one transaction when Badger can hold
// it, and otherwise in parts (halves, halved again as needed), each its own
// transaction: a batch of a few hundred large records outgrows Badger's
// transaction limit (15 % of a memtable). Before the first part, check runs
// over every id in a read transaction, so input it refuses changes nothing;
// fn must then accept what check accepted, or the parts before it stay.
func (s *Store) UpdateInParts(ctx context.Context, ids []string, check, fn func(tx *Tx, ids []string) error) error {
	checked := check == nil
	var apply func(ids []string) error
	apply = func(ids []string) error {
		err := s.Update(ctx, func(tx *Tx) error { return fn(tx, ids) })
		if !errors.Is(err, kv.ErrTooBig) || len(ids) < 2 {
			return err
		}
		if !checked {
			checked = true
			if err := s.View(ctx, func(tx *Tx) error { return check(tx, ids) }); err != nil {
				return err
			}
		}
		half := len(ids) / 2
		if err := apply(ids[:half]); err != nil {
			return err
		}
		return apply(ids[half:])
	}
	return apply(ids)
}

// Retries after a conflict. Writers of the same records (clients labelling
// overlapping items at once, a burst of single-item changes) conflict with
// one another; retried at once they meet again, so each retry waits a
// random time of up to a backoff that doubles from retryBackoffMin to
// retryBackoffMax, which spreads them out. Up to retryBudget of waiting.
const (
	retryBackoffMin = 500 * time.Microsecond
	retryBackoffMax = 50 * time.Millisecond
	retryBudget     = 10 * time.Second
)

// RetryBackoffMin and RetryBackoffMax bound the random wait after a
// conflict, for a domain's own retries around UpdateOnce (as Update's).
const (
	RetryBackoffMin = retryBackoffMin
	RetryBackoffMax = retryBackoffMax
)

// updateRetrying commits fn, again after a conflict, with a randomized
// backoff (see retryBudget).
func (s *Store) updateRetrying(ctx context.Context, opts kv.TxOptions, fn func(tx *Tx) error) error {
	backoff := retryBackoffMin
	var waited time.Duration
	for {
		err := s.update(ctx, opts, fn)
		if !errors.Is(err, kv.ErrConflict) || waited >= retryBudget {
			return err
		}
		d := backoff/2 + rand.N(backoff/2+1)
		if !sleepCtx(ctx, d) {
			return err
		}
		waited += d
		backoff = min(2*backoff, retryBackoffMax)
	}
}

// sleepCtx waits d, or less when ctx ends first; it reports whether the
// whole of d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// UpdateOnce is Update without retries: a conflicting concurrent commit makes
// it fail with ErrConflict. Use it for records that must be consumed once.
func (s *Store) UpdateOnce(ctx context.Context, fn func(tx *Tx) error) error {
	err := s.update(ctx, kv.TxOptions{}, fn)
	if errors.Is(err, kv.ErrConflict) {
		return ErrConflict
	}
	return err
}

// update runs fn in one read-write transaction and commits it (one
// attempt); it returns once the commit is durable as opts says.
func (s *Store) update(ctx context.Context, opts kv.TxOptions, fn func(tx *Tx) error) error {
	if err := s.enter(true); err != nil {
		return err
	}
	defer s.leave(true)
	tx := &Tx{}
	run := func() error {
		return s.eng.Update(ctx, opts, func(w kv.Writer) error {
			*tx = Tx{r: w, w: w, st: s, cachedWritten: tx.cachedWritten}
			if err := fn(tx); err != nil {
				return err
			}
			if err := tx.beforeCommit(); err != nil {
				return err
			}
			if s.shared && len(tx.cachedWritten) > 0 {
				// Every node drops these records when this commits.
				for _, p := range cacheNotes(s.node, tx.cachedWritten) {
					if err := w.Notify(cacheChannel, p); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	err := run()
	if errors.Is(err, errNoIDSlot) {
		// New ids need a node slot: claim one outside any transaction
		// (it may take a query per slot), then run fn again.
		if _, serr := s.slots.IDSlot(ctx); serr != nil {
			err = fmt.Errorf("%w: %v", errNoIDSlot, serr)
		} else {
			err = run()
		}
	}
	s.writesDone(tx.written)
	err = s.engineErr(err)
	if len(tx.cachedWritten) > 0 {
		// Also after a failed commit: dropping a cached record is safe.
		s.caches.drop(tx.cachedWritten)
	}
	if errors.Is(err, kv.ErrNotSynced) {
		// Committed and visible, only not known to be on disk: what
		// follows a commit still follows it.
		s.afterCommit(ctx, tx)
		return err
	}
	if err != nil {
		return err
	}
	return s.afterCommit(ctx, tx)
}

// getJSON decodes the record at key into v, or returns ErrNotFound.
func (tx *Tx) getJSON(key []byte, v any) error {
	b, err := tx.get(key)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// putJSON stores v at key; a positive ttl makes the engine drop it after
// that long.
func (tx *Tx) putJSON(key []byte, v any, ttl time.Duration) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.put(key, b, ttl)
}

// errReadOnly is a write in a View: a bug of the caller.
var errReadOnly = errors.New("storage: write in a read-only transaction")

func (tx *Tx) put(key, val []byte, ttl time.Duration) error {
	if tx.w == nil {
		return errReadOnly
	}
	tx.noteWrite(key)
	tx.written += int64(len(key) + len(val))
	return tx.w.Put(key, val, ttl)
}

// get returns the value at key (the caller's to keep), or ErrNotFound.
// A key longer than an engine takes holds nothing (the engines refuse to
// look it up): it is built from a client's input, an id of any length,
// which is unknown, not a failure of the store.
func (tx *Tx) get(key []byte) ([]byte, error) {
	if len(key) > kv.MaxKeySize {
		return nil, ErrNotFound
	}
	v, err := tx.r.Get(key)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, ErrNotFound
	}
	return v, err
}

func (tx *Tx) has(key []byte) (bool, error) {
	if len(key) > kv.MaxKeySize {
		return false, nil
	}
	_, err := tx.r.Get(key)
	if errors.Is(err, kv.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (tx *Tx) delete(key []byte) error {
	if tx.w == nil {
		return errReadOnly
	}
	tx.noteWrite(key)
	tx.written += int64(len(key))
	return tx.w.Delete(key)
}

// scan calls fn for every key with prefix, in key order (reverse when
// reverse is set), starting at start (inclusive; nil means the first key of
// the prefix), until fn returns false or an error. The value is valid only
// during the call.
func (tx *Tx) scan(prefix, start []byte, reverse, keysOnly bool, fn func(key, val []byte) (bool, error)) error {
	return tx.ScanSkipping(prefix, start, reverse, keysOnly, nil, fn)
}

// ScanSkipping is Scan that passes over the keys skip (when not nil)
// reports, without reading their values.
func (tx *Tx) ScanSkipping(prefix, start []byte, reverse, keysOnly bool, skip func(key []byte) bool, fn func(key, val []byte) (bool, error)) error {
	r := kv.Range{Prefix: prefix, Start: start, Reverse: reverse, KeysOnly: keysOnly}
	if skip == nil {
		return tx.r.Scan(r, fn)
	}
	// A cursor reads a value only when asked: the skipped keys' never.
	c := tx.Cursor(r)
	defer c.Close()
	for ; c.Valid(); c.Next() {
		k := c.Key()
		if skip(k) {
			continue
		}
		v, err := c.Value()
		if err != nil {
			return err
		}
		if more, err := fn(k, v); err != nil || !more {
			return err
		}
	}
	return kv.CursorErr(c)
}

// Cursor opens a cursor over r in the transaction (kv.OpenCursor): it
// reads a value only when asked, and moves with Seek as well as Next. The
// caller closes it before the transaction ends; kv.CursorErr reports a
// failed read once it is no longer Valid.
func (tx *Tx) Cursor(r kv.Range) kv.Cursor { return kv.OpenCursor(tx.r, r) }

// suffixes lists what follows prefix in every key that has it (ids or
// digests of an index), in key order.
func (tx *Tx) suffixes(prefix []byte) ([]string, error) {
	var out []string
	err := tx.scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
		out = append(out, string(k[len(prefix):]))
		return true, nil
	})
	return out, err
}

// deletePrefix deletes every key with prefix inside the transaction.
func (tx *Tx) deletePrefix(prefix []byte) error {
	var keys [][]byte
	err := tx.scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
		keys = append(keys, append([]byte{}, k...))
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.delete(k); err != nil {
			return err
		}
	}
	return nil
}

// key joins parts with '/' into a key.
func key(parts ...string) []byte { return AppendKey(nil, parts...) }

// AppendKey appends the key of parts (Key's) to b, growing it once: a
// writer of several keys of one item builds them in one buffer.
func AppendKey(b []byte, parts ...string) []byte {
	n := len(parts) - 1
	for _, p := range parts {
		n += len(p)
	}
	b = slices.Grow(b, n)
	for i, p := range parts {
		if i > 0 {
			b = append(b, '/')
		}
		b = append(b, p...)
	}
	return b
}

// notify queues payload for the subscribers of channel on every node; it
// is sent if and when the transaction commits.
func (tx *Tx) notify(channel, payload string) error {
	if tx.w == nil {
		return errReadOnly
	}
	return tx.w.Notify(channel, payload)
}

// The primitives of a transaction, for the domain packages under storage/
// (storage/agents, …): every key they read or write goes through these, so
// the record caches see every write (noteWrite) and a write in a View is
// refused. The methods in lower case are the same primitives for the
// domains still in this package.

// Get returns the value at key (the caller's to keep), or ErrNotFound.
func (tx *Tx) Get(key []byte) ([]byte, error) { return tx.get(key) }

// Has reports whether key holds a value.
func (tx *Tx) Has(key []byte) (bool, error) { return tx.has(key) }

// GetJSON decodes the record at key into v, or returns ErrNotFound.
func (tx *Tx) GetJSON(key []byte, v any) error { return tx.getJSON(key, v) }

// Put stores val at key; a positive ttl makes the engine drop it after that
// long.
func (tx *Tx) Put(key, val []byte, ttl time.Duration) error { return tx.put(key, val, ttl) }

// PutEach is Put of val at each of keys: one copy of val for them all on an
// engine that copies what it is given (kv.EachPutter), one Put each on
// others.
func (tx *Tx) PutEach(keys [][]byte, val []byte, ttl time.Duration) error {
	if tx.w == nil {
		return errReadOnly
	}
	ep, ok := tx.w.(kv.EachPutter)
	if !ok {
		for _, k := range keys {
			if err := tx.put(k, val, ttl); err != nil {
				return err
			}
		}
		return nil
	}
	for _, k := range keys {
		tx.noteWrite(k)
		tx.written += int64(len(k) + len(val))
	}
	return ep.PutEach(keys, val, ttl)
}

// PutJSON stores v, encoded as JSON, at key (ttl as Put).
func (tx *Tx) PutJSON(key []byte, v any, ttl time.Duration) error { return tx.putJSON(key, v, ttl) }

// Delete removes key (nothing when it is absent).
func (tx *Tx) Delete(key []byte) error { return tx.delete(key) }

// DeleteIfPresent removes key when it exists, and writes nothing when it
// does not: a deletion marker in a range that reads scan often lies in
// their way until the engine compacts it.
func (tx *Tx) DeleteIfPresent(key []byte) error {
	if ok, err := tx.has(key); err != nil || !ok {
		return err
	}
	return tx.delete(key)
}

// Scan calls fn for every key with prefix, in key order (reverse when
// reverse is set), starting at start (inclusive; nil means the first key of
// the prefix), until fn returns false or an error. With keysOnly the
// values are not read; a value is valid only during the call.
func (tx *Tx) Scan(prefix, start []byte, reverse, keysOnly bool, fn func(key, val []byte) (bool, error)) error {
	return tx.scan(prefix, start, reverse, keysOnly, fn)
}

// Suffixes lists what follows prefix in every key that has it, in key
// order.
func (tx *Tx) Suffixes(prefix []byte) ([]string, error) { return tx.suffixes(prefix) }

// DeletePrefix deletes every key with prefix.
func (tx *Tx) DeletePrefix(prefix []byte) error { return tx.deletePrefix(prefix) }

// Notify queues payload for the subscribers of channel on every node
// (Store.Subscribe); it is sent if and when the transaction commits.
func (tx *Tx) Notify(channel, payload string) error { return tx.notify(channel, payload) }

// NewID returns a new record id, unique across the nodes of the store and
// increasing with time (see idGen); only in a read-write transaction.
func (tx *Tx) NewID() (string, error) { return tx.newID() }

// FreshID is NewID whose record key keyOf(id) is absent: a creation never
// overwrites a record.
func (tx *Tx) FreshID(keyOf func(id string) []byte) (string, error) { return tx.freshID(keyOf) }

// Key joins parts with '/' into a key: every record key is made so.
func Key(parts ...string) []byte { return key(parts...) }
