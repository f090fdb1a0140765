package apitokens

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// putLegacyAPIToken writes an API token the way earlier versions
// did: the record and its global ref, with no origin in either.
func putLegacyAPIToken(t *testing.T, s *storage.Store, memberID, name string, createdAt time.Time) string {
	t.Helper()
	secret := storage.NewSecret(Prefix, apiTokenRandomBytes)
	d := storage.Digest(secret)
	id := testID()
	err := s.Update(t.Context(), func(tx *storage.Tx) error {
		if err := tx.Put(apiTokenRefKey(d), []byte(`{"member_id":"`+memberID+`","token_id":"`+id+`"}`), 0); err != nil {
			return err
		}
		old := `{"id":"` + id + `","member_id":"` + memberID + `","name":"` + name + `","digest":"` + d +
			`","created_at":"` + createdAt.UTC().Format(time.RFC3339Nano) + `"}`
		return tx.Put(apiTokenKey(memberID, id), []byte(old), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

func reopen(t *testing.T, s *storage.Store) *storage.Store {
	t.Helper()
	dir := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}

// Suspending the member stops a legacy token that was kept.
func TestSuspensionStopsLegacyAPITokens(t *testing.T) {
	s := storagetest.Open(t)
	m, err := members.Of(s).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	old := putLegacyAPIToken(t, s, m.ID, "laptop script", time.Now().Add(-time.Hour))
	s = reopen(t, s)
	if _, _, err := Of(s).Member(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if _, err := members.Of(s).SetSuspended(t.Context(), "alice", true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(s).Member(t.Context(), old); !errors.Is(err, members.ErrSuspended) {
		t.Fatalf("a suspended member's legacy token: %v", err)
	}
}

// A ref the migration cannot read stops Open with a clear error and leaves
// the directory unlocked (Badger closed), so the next Open says the same
// instead of "in use by another process".
func TestMigrationFailureReleasesTheStore(t *testing.T) {
	s := storagetest.Open(t)
	dir := s.Path()
	if err := s.Update(t.Context(), func(tx *storage.Tx) error { return tx.Put(apiTokenRefKey("x"), []byte("not json"), 0) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		s2, err := storage.Open(dir, storage.Options{})
		if err == nil {
			s2.Close()
			t.Fatal("Open succeeded over an unreadable API token ref")
		}
		if errors.Is(err, storage.ErrLocked) || !strings.Contains(err.Error(), "migrate API tokens") {
			t.Fatalf("Open %d: %v", i, err)
		}
	}
}

var testIDs atomic.Uint64

// testID is a fresh record id for records the tests write themselves.
func testID() string { return strconv.FormatUint(uint64(time.Now().UnixNano())+testIDs.Add(1), 10) }
