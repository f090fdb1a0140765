// Package kv is Hearth's storage engine waist: an ordered, transactional
// key-value store (the Engine interface) and the optional services an
// engine may offer, discovered by interface assertion (Counters, Leases,
// IDSlots, LiveEpochs, Replacer, Cursors; GarbageCollector, Syncer, Sizer
// for an embedded engine's housekeeping), and the engine-neutral backup
// stream (stream.go). Two engines implement it: storage/kv/badgerkv
// (embedded, the default) and storage/kv/pgkv (PostgreSQL ≥ 15 through pgx,
// several nodes on one database). storage/kv/kvtest is the conformance suite
// both pass; docs/storage-engines.md describes it and the domain packages
// on it.
//
// Keys compare as bytes (memcmp; a key that is a prefix of another sorts
// first). Keys are non-empty and at most MaxKeySize bytes; values at most
// MaxValueSize bytes (an engine may refuse less with ErrTooBig).
package kv

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Limits every engine accepts.
const (
	MaxKeySize   = 4096
	MaxValueSize = 64 << 20
)

var (
	// ErrNotFound is returned by Get for a key that is absent or expired.
	ErrNotFound = errors.New("kv: key not found")
	// ErrConflict is returned by Update when a concurrent commit invalidated
	// the transaction's reads or writes (Badger's conflict; PostgreSQL's
	// serialization failure 40001, deadlock 40P01 or unique violation
	// 23505). Nothing of the transaction was committed; the caller may run
	// it again (RunTx does, with backoff) or treat it as a lost race.
	ErrConflict = errors.New("kv: transaction conflict, nothing was committed; retry")
	// ErrTooBig is returned by Update when the engine cannot hold the
	// transaction in one commit; the caller splits the work.
	ErrTooBig = errors.New("kv: transaction too big")
	// ErrUnavailable wraps errors of an engine that cannot be reached now
	// (the database is down, restarting or refusing connections);
	// callers answer 503 and the engine recovers by itself. When Update's
	// commit itself fails with it (the connection dropped during COMMIT)
	// the outcome is unknown to the engine; a retry must be idempotent.
	ErrUnavailable = errors.New("kv: storage engine unavailable")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("kv: engine closed")
	// ErrInvalid is returned for an empty or oversized key or value and an
	// invalid Range; nothing is changed.
	ErrInvalid = errors.New("kv: invalid argument")
	// ErrNotSynced is returned by a synchronous Update (and Sync) of an
	// engine that syncs its own logs when it could not bring them to disk:
	// the commit is made and visible, but it may not survive a power loss
	// (a failed sync of Async commits only counts in Syncer.FailedSyncs).
	// Running the transaction again does not help: the
	// disk or its file system failed.
	ErrNotSynced = errors.New("kv: the store could not write its log to disk")
)

// Engine is an ordered, transactional key-value store shared by every
// goroutine (and, for a server engine, every node) using it. All methods are
// safe for concurrent use.
type Engine interface {
	// View runs fn on one consistent snapshot: every read in fn sees the
	// commits that finished before View started and none made later, so a
	// long View (a backup, a document build) reads one instant. Keys whose
	// TTL has passed when the snapshot is taken are absent; a key whose TTL
	// passes during the View may stay visible (pgkv: expiry is judged at
	// the transaction's start) or vanish (badgerkv: at each read). fn must
	// not keep the Reader after returning.
	View(ctx context.Context, fn func(Reader) error) error

	// Update runs fn in one read-write transaction and commits it when fn
	// returns nil (fn's error is returned unchanged and nothing is
	// committed otherwise). Reads see the snapshot of the transaction's
	// start plus its own writes (read-your-writes). The commit is
	// serializable for every key fn read or wrote: if a transaction that
	// committed after this one started wrote a key this one read (Get,
	// GetMany, or a key a Scan returned) or wrote, Update returns
	// ErrConflict and commits nothing. (Both engines also refuse write
	// skew across different keys read by both transactions; an insert into
	// a range another transaction scanned is refused by PostgreSQL but not
	// by Badger, so a count limit over a range must read and write a guard
	// key, as storage/shared.go's GuardCount does.) Update makes one attempt: use RunTx
	// to retry. When Update returns nil the commit is durable as TxOptions
	// says; notifications queued with Notify are then delivered.
	Update(ctx context.Context, opts TxOptions, fn func(Writer) error) error

	// Subscribe calls fn, on a goroutine of the engine, with the payload of
	// every notification committed on channel after Subscribe returned, in
	// commit order for one publisher, including those committed by this
	// process. fn must return quickly. stop ends the subscription (fn is
	// not called once stop has returned). Delivery is at most once: a
	// subscriber that was disconnected misses what was sent meanwhile, and
	// Live reports it.
	Subscribe(channel string, fn func(payload string)) (stop func(), err error)

	// Live reports whether every notification committed since the last
	// call returned true has been (or will be) delivered to subscribers:
	// false while a server engine's listening connection is down. Caches
	// filled from the engine may be trusted only while Live is true, and
	// must be emptied when it turns true again.
	Live() bool

	// Export calls fn with every live record of one snapshot in key order
	// (expired keys are left out; ExpiresAt is kept). fn's slices are valid
	// only during the call. Export serves while writes go on.
	Export(ctx context.Context, fn func(Record) error) error

	// Import writes the records next returns until it returns io.EOF. With
	// ImportMerge records are added to (or replace) what is there; with
	// ImportReplace the store holds exactly the imported records afterwards
	// (PostgreSQL: atomically in one transaction; Badger: the records must
	// come in ascending key order, as a backup's do, and are written beside
	// the deletion of the keys they lack, so a failure halfway leaves a mix). Records
	// whose ExpiresAt has passed are skipped. Import refuses invalid
	// records with ErrInvalid before anything of that batch is written.
	Import(ctx context.Context, next func() (Record, error), mode ImportMode) error

	// Ping reports whether the engine can serve now (ErrUnavailable if not).
	Ping(ctx context.Context) error

	// Close releases the engine; transactions running meanwhile fail.
	Close() error
}

// Reader reads inside a transaction. Its methods are not safe for use by
// several goroutines at once.
type Reader interface {
	// Get returns key's value, or ErrNotFound when the key is absent or
	// its TTL has passed. The slice belongs to the caller.
	Get(key []byte) ([]byte, error)
	// GetMany returns the values of keys in their order, nil for an absent
	// or expired key, in one round trip for a server engine.
	GetMany(keys [][]byte) ([][]byte, error)
	// Scan calls fn for the keys of r in key order (descending with
	// r.Reverse), skipping expired keys, until fn returns false or an
	// error (returned unchanged) or r.Limit keys were passed. key and val
	// are valid only during the call; val is nil with r.KeysOnly. fn may
	// call Get and GetMany on the same transaction, but must not write.
	Scan(r Range, fn func(key, val []byte) (more bool, err error)) error
}

// Range selects the keys of a Scan: those starting with Prefix (every key
// when Prefix is empty) that are ≥ Start on a forward scan, ≤ Start with
// Reverse. A nil Start means from the first key of Prefix (the last one with
// Reverse). Keys outside Prefix are never passed, whatever Start is.
type Range struct {
	Prefix   []byte
	Start    []byte
	Reverse  bool
	KeysOnly bool
	// Limit stops the scan after that many keys; 0 means no limit.
	Limit int
}

// Writer reads and writes inside a read-write transaction.
type Writer interface {
	Reader
	// Put sets key to val. A ttl > 0 makes the key absent to every read
	// (Get, GetMany, Scan, Export) in transactions that start once ttl has
	// passed, measured on the engine's clock (the database server's for
	// pgkv, which starts counting at the transaction's start) — badgerkv
	// keeps whole seconds, rounded up, so a key may live up to 1 s longer;
	// the engine removes it eventually. ttl
	// 0 means no expiry (and clears an earlier one). The engine copies
	// key and val: the caller may reuse them once Put returns.
	Put(key, val []byte, ttl time.Duration) error
	// Delete removes key; deleting an absent key is not an error.
	Delete(key []byte) error
	// Notify queues payload (at most MaxPayload bytes) for the
	// subscribers of channel; it is sent if and when the transaction
	// commits, never otherwise.
	Notify(channel, payload string) error
}

// Missed is the payload a subscriber receives after notifications may have
// been lost (the engine's listener reconnected): drop every cached record.
// Notify refuses it (it contains a NUL byte), so no commit sends it.
const Missed = "\x00missed"

// MaxPayload bounds a notification's payload (PostgreSQL's NOTIFY limit is
// 8000 bytes) and MaxChannel its channel name.
const (
	MaxPayload = 7900
	MaxChannel = 63
)

// TxOptions chooses how an Update commits.
type TxOptions struct {
	// Async returns once the commit is visible and survives a crash of
	// the process, before it is on disk (PostgreSQL's synchronous_commit
	// off; Hearth's UpdateAsync): a power loss can lose it. For records a
	// client can get again by asking; never for removals.
	Async bool
}

// Record is one key of an Export or Import.
type Record struct {
	Key, Value []byte
	// ExpiresAt is the Unix time in seconds after which the key is
	// absent, 0 for none (Badger's unit, kept by the backup stream).
	ExpiresAt uint64
}

// ImportMode says what Import does with keys already there.
type ImportMode int

const (
	// ImportMerge adds the records, replacing keys that exist.
	ImportMerge ImportMode = iota
	// ImportReplace leaves exactly the imported records.
	ImportReplace
)

// CheckKey returns ErrInvalid for a key no engine accepts.
func CheckKey(key []byte) error {
	if len(key) == 0 || len(key) > MaxKeySize {
		return errors.Join(ErrInvalid, errors.New("key must be 1 to 4096 bytes"))
	}
	return nil
}

// CheckValue returns ErrInvalid for a value no engine accepts.
func CheckValue(val []byte) error {
	if len(val) > MaxValueSize {
		return errors.Join(ErrInvalid, errors.New("value longer than 64 MiB"))
	}
	return nil
}

// CheckNotify returns ErrInvalid for a channel or payload no engine accepts.
func CheckNotify(channel, payload string) error {
	if channel == "" || len(channel) > MaxChannel || len(payload) > MaxPayload {
		return errors.Join(ErrInvalid, errors.New("notification channel must be 1 to 63 bytes and payload at most 7900 bytes"))
	}
	if strings.ContainsRune(channel, '\n') {
		return errors.Join(ErrInvalid, errors.New("notification channel contains a newline"))
	}
	for _, c := range []byte(channel + payload) {
		if c == 0 {
			return errors.Join(ErrInvalid, errors.New("notification contains a NUL byte"))
		}
	}
	return nil
}

// PrefixEnd returns the smallest key greater than every key starting with
// prefix (prefix with its last byte below 0xff incremented and the rest cut),
// or nil when there is none (empty prefix or all 0xff).
func PrefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := append([]byte{}, prefix[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}

// ---- Optional capabilities (discovered by interface assertion) ----

// Counters is shared rate-limit counting: the sliding window of
// internal/ratelimit (a fixed window's count plus the previous window's
// weighted by its overlap) kept by the engine, so a limit holds across every
// node of one store. Keys are strings of at most MaxKeySize bytes.
type Counters interface {
	// CountAllow counts one event for key and reports whether it is within
	// limit events per window; a refused event is not counted. retryAfter
	// is when trying again may succeed (0 when allowed).
	CountAllow(ctx context.Context, key string, limit int, window time.Duration) (allowed bool, remaining int, retryAfter time.Duration, err error)
	// CountPeek reports the same without counting.
	CountPeek(ctx context.Context, key string, limit int, window time.Duration) (allowed bool, remaining int, retryAfter time.Duration, err error)
	// CountUndo takes back one counted event of the current window.
	CountUndo(ctx context.Context, key string, window time.Duration) error
	// CountReset forgets key.
	CountReset(ctx context.Context, key string) error
}

// Leases elect one holder of a named lease among every node of the store:
// singleton work (document builds, relay subscriptions, sweeps) runs on the
// holder only.
type Leases interface {
	// Lead calls fn while this process holds the lease name, and tries
	// again to take it after fn returned or the lease was lost, until ctx
	// ends. fn's context is cancelled when the lease is lost (the engine
	// can no longer prove it holds it) or ctx ends; Lead returns when ctx
	// has ended and fn has returned. At most one process runs fn for a
	// name at a time, except for the short overlap while a lost holder's
	// context is being cancelled: work done under a lease must be
	// idempotent.
	Lead(ctx context.Context, name string, fn func(ctx context.Context))
}

// IDSlots allocates this process a node slot, unique among the processes
// using the store at once, to build ids that cannot collide across nodes
// (storage/secret.go's time-ordered ids: milliseconds, slot, sequence).
type IDSlots interface {
	// IDSlot returns this process's slot in 0..MaxIDSlot, claiming one on
	// the first call and keeping it for the engine's life. It fails while
	// the slot cannot be proven held (a server engine's connection is
	// down): ids must not be made then.
	IDSlot(ctx context.Context) (uint16, error)
	// HeldIDSlot returns the slot IDSlot claimed while it is proven held,
	// without any I/O (so it may be called inside a transaction); ok is
	// false when no slot is held now, and IDSlot (outside a transaction)
	// claims one again.
	HeldIDSlot() (slot uint16, ok bool)
}

// LiveEpochs is offered by engines whose notifications can be missed (a
// server engine's listening connection): LiveEpoch is Live together with a
// number that changes every time Live turns true again (each
// (re)connection), read at once. A cache emptied during an epoch may be
// trusted while that same epoch is live; Live alone cannot tell a
// subscriber that has not yet handled its kv.Missed from one that has.
type LiveEpochs interface {
	LiveEpoch() (epoch uint64, live bool)
}

// Replacer is offered by engines shared by several processes: a restore
// that keeps every acknowledged write. ReplaceAll runs one transaction,
// exclusive among every process of the store (ErrReplaceRunning
// otherwise): it passes every current record of its snapshot to r.Save (as
// Export), calls r.Saved, then leaves exactly the records r.Next yields
// (as Import with ImportReplace) and queues r.Notes. A commit of another
// process that the saved records miss and the import would overwrite
// makes it fail with ErrConflict, changing nothing: every write
// acknowledged anywhere is either in what Save got or still in the store
// afterwards.
type Replacer interface {
	ReplaceAll(ctx context.Context, r Replacement) error
}

// Replacement is the work of Replacer.ReplaceAll.
type Replacement struct {
	// Save gets every current record, in key order; its slices are valid
	// only during the call.
	Save func(Record) error
	// Saved runs after the last Save and before anything changes (sync
	// what Save wrote).
	Saved func() error
	// Next yields the records to import, io.EOF after the last.
	Next func() (Record, error)
	// Notes are sent if and when the replacement commits.
	Notes []Note
}

// Note is a notification (Writer.Notify's arguments).
type Note struct{ Channel, Payload string }

// ErrReplaceRunning is returned by ReplaceAll while another ReplaceAll runs
// on the store (in any process).
var ErrReplaceRunning = errors.New("kv: another replace of the store is running")

// GarbageCollector is offered by engines that reclaim space on a schedule
// the store sets (Badger's value-log garbage collection; PostgreSQL's
// autovacuum needs none).
type GarbageCollector interface {
	// CollectGarbage reclaims what it can until there is nothing left,
	// ctx ends or more (when not nil), asked before each file, says no,
	// and says how many files it rewrote.
	CollectGarbage(ctx context.Context, more func() bool) (rewritten int, err error)
}

// EachPutter is offered by Writers that keep what a Put is given until the
// commit (badgerkv): Put copies key and val every time, PutEach copies val
// once for all of keys. A saved item's index entries each carry its
// record, so a write of one would copy the record five to eight times.
type EachPutter interface {
	// PutEach is Put of val at each of keys, with ttl; the caller may
	// reuse keys and val once it returns.
	PutEach(keys [][]byte, val []byte, ttl time.Duration) error
}

// Syncer is offered by embedded engines whose commits may be acknowledged
// before they are on disk (asynchronous commits, NoSync).
type Syncer interface {
	// Sync returns once every commit that returned before the call is on
	// disk, or ErrNotSynced when the sync that was to bring them there
	// failed.
	Sync() error
	// FailedSyncs is the number of syncs that failed since the engine
	// opened. A writer acknowledging work made of Async commits, whose
	// syncs fail no caller, reads it before its first commit and again
	// after its Sync: a higher count means a sync covering some of its
	// commits may have failed (every writer overlapping the failure sees
	// it, however many end together).
	FailedSyncs() uint64
}

// Sizer is offered by engines that know their size on disk.
type Sizer interface {
	// Size is the bytes on disk of the engine's tables and of its logs.
	Size() (tables, logs int64)
}

// MaxIDSlot is the largest node slot (64 nodes).
const MaxIDSlot = 63
