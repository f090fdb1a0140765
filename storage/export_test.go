package storage

import (
	"context"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv/pgkv/pgtest"
)

// Internals for the external tests (package storage_test), which use the
// domain packages that import storage.

// PutLegacyAPIToken is putLegacyAPIToken.
func PutLegacyAPIToken(t *testing.T, s *Store, memberID, name string, createdAt time.Time) string {
	t.Helper()
	return putLegacyAPIToken(t, s, memberID, name, createdAt)
}

// Reopen is reopen.
func Reopen(t *testing.T, s *Store) *Store {
	t.Helper()
	return reopen(t, s)
}

// MigrateAPITokenOrigins is migrateAPITokenOrigins.
func (s *Store) MigrateAPITokenOrigins(ctx context.Context) (kept, expired int, err error) {
	return s.migrateAPITokenOrigins(ctx)
}

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

// SetCopyRecordsHook sets copyRecordsHook (nil removes it).
func SetCopyRecordsHook(fn func(n int) error) { copyRecordsHook = fn }

// The layout of ids (idGen).
const (
	IDSeqBits  = idSeqBits
	IDSlotBits = idSlotBits
)
