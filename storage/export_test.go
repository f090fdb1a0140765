package storage

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/hearthkit/caddy-hearth/storage/kv/badgerkv"
	"github.com/hearthkit/caddy-hearth/storage/kv/pgkv/pgtest"
)

// Internals for the external tests (package storage_test), which use the
// domain packages that import storage.

// ClusterServer is clusterServer.
func ClusterServer(t testing.TB) *pgtest.Server {
	t.Helper()
	return clusterServer(t)
}

// LiveEpoch is the epoch of the shared engine's listener (kv.LiveEpochs).
func (s *Store) LiveEpoch() uint64 {
	e, _ := (*s.liveEpochs.Load()).LiveEpoch()
	return e
}

// BadgerDB is the Badger database under the store (nil on PostgreSQL), for
// tests of what only Badger's own reads show.
func (s *Store) BadgerDB() *badger.DB {
	if e, ok := s.base.(*badgerkv.Engine); ok {
		return e.DB()
	}
	return nil
}

// SetRestoreHook sets s's restoreHook (nil removes it); set it before a
// restore starts.
func (s *Store) SetRestoreHook(fn func(n int) error) { s.restoreHook = fn }

// The layout of a backup (storage/kv/stream.go).
const (
	BackupMagic       = kv.StreamMagic
	BackupEndMarker   = ^uint64(0)
	BackupEndMagic    = kv.StreamEndMagic
	BackupChecksumLen = sha256.Size
)

// ExportRecords streams every record of the engine under s (kv.Engine's
// Export), to compare a store's records before and after.
func (s *Store) ExportRecords(ctx context.Context, fn func(kv.Record) error) error {
	return s.eng.Export(ctx, fn)
}

// BadgerOnly is badgerOnly.
func BadgerOnly(t testing.TB) {
	t.Helper()
	badgerOnly(t)
}

// The layout of ids (idGen).
const (
	IDSeqBits  = idSeqBits
	IDSlotBits = idSlotBits
)
