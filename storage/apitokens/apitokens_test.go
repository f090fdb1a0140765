package apitokens

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// The engine suite's server for this package (storagetest.Main).
const testPostgresPort = 15444

func TestMain(m *testing.M) { storagetest.Main(m, testPostgresPort) }

// openSavedTest opens a store with one member, "reader".
func openSavedTest(t testing.TB) (*storage.Store, *members.Member) {
	t.Helper()
	st := storagetest.Open(t)
	m, err := members.Of(st).CreateMember(t.Context(), "reader", "", "password123")
	if err != nil {
		t.Fatal(err)
	}
	return st, m
}

// Concurrent creations cannot together pass the per-member limit.
func TestConcurrentCreationsKeepTheLimit(t *testing.T) {
	st, m := openSavedTest(t)
	const extra = 30
	var wg sync.WaitGroup
	for i := 0; i < MaxPerMember+extra; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := Of(st).Create(t.Context(), m.ID, fmt.Sprintf("token %d", i), 0); err != nil && !storage.IsInvalid(err) {
				t.Errorf("create: %v", err)
			}
		}()
	}
	wg.Wait()
	all, err := Of(st).List(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != MaxPerMember {
		t.Fatalf("%d after concurrent creations, want the limit %d", len(all), MaxPerMember)
	}
}

// One-line names shown on pages refuse control characters: an API token's
// name (a member's display name: storage's TestNamesRefuseControlCharacters).
func TestTokenNamesRefuseControlCharacters(t *testing.T) {
	st, m := openSavedTest(t)
	for _, name := range []string{"a\x00b", "tab\there", "esc\x1b[31m", "line\nbreak"} {
		if _, _, err := Of(st).Create(t.Context(), m.ID, name, 0); !storage.IsInvalid(err) {
			t.Errorf("token name %q: %v, want invalid", name, err)
		}
	}
	if _, _, err := Of(st).Create(t.Context(), m.ID, "Obsidian on the laptop", 0); err != nil {
		t.Fatal(err)
	}
	toks, err := Of(st).List(t.Context(), m.ID)
	if err != nil || len(toks) != 1 {
		t.Fatalf("tokens: %d, %v; refused names must create nothing", len(toks), err)
	}
}

func TestAPITokenLifecycle(t *testing.T) {
	st, m := openSavedTest(t)
	tok, secret, err := Of(st).Create(t.Context(), m.ID, "sync", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(secret) < 70 || len(secret) > 80 || secret[:4] != "app_" {
		t.Fatalf("token %d chars", len(secret))
	}
	got, rec, err := Of(st).Member(t.Context(), secret)
	if err != nil || got.ID != m.ID || rec.LastUsedAt == nil {
		t.Fatal(err)
	}
	if _, _, err := Of(st).Member(t.Context(), secret+"x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal("wrong token accepted")
	}
	if _, err := members.Of(st).SetSuspended(t.Context(), "reader", true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(st).Member(t.Context(), secret); !errors.Is(err, members.ErrSuspended) {
		t.Fatal("suspended member's token accepted")
	}
	if _, err := members.Of(st).SetSuspended(t.Context(), "reader", false); err != nil {
		t.Fatal(err)
	}
	if err := Of(st).Delete(t.Context(), m.ID, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(st).Member(t.Context(), secret); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal("deleted token accepted")
	}
	_, short, err := Of(st).Create(t.Context(), m.ID, "short", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, _, err := Of(st).Member(t.Context(), short); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal("expired token accepted")
	}
	_, kept, _ := Of(st).Create(t.Context(), m.ID, "kept", 0)
	if err := members.Of(st).DeleteMember(t.Context(), "reader"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(st).Member(t.Context(), kept); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal("token of deleted member accepted")
	}
}

func TestInboundAddressKeepsItsSiteAndID(t *testing.T) {
	st, m := openSavedTest(t)
	secret, err := Of(st).RotateInboundSecret(t.Context(), m.ID, "https://example.com")
	if err != nil {
		t.Fatal(err)
	}
	in, err := Of(st).InboundInfo(t.Context(), m.ID)
	if err != nil || in.Site != "https://example.com" || in.ID == "" || in.Digest != storage.Digest(secret) {
		t.Fatalf("inbound %+v, %v", in, err)
	}
	if _, err := Of(st).RotateInboundSecret(t.Context(), m.ID, "https://"+string(make([]byte, library.MaxURLLen))); !storage.IsInvalid(err) {
		t.Fatalf("over-long site: %v", err)
	}

	// A record written before addresses had ids and sites.
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	err = st.Update(t.Context(), func(tx *storage.Tx) error {
		return tx.PutJSON(inboundKey(m.ID), map[string]any{"digest": storage.Digest(secret), "created_at": created}, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := Of(st).InboundInfo(t.Context(), m.ID)
	b, _ := Of(st).InboundInfo(t.Context(), m.ID)
	if a.ID == "" || a.ID != b.ID || a.Site != "" || !a.CreatedAt.Equal(created) {
		t.Fatalf("old record read as %+v and %+v", a, b)
	}
}

func TestSetAPITokenExpiry(t *testing.T) {
	st, m := openSavedTest(t)
	tok, secret, err := Of(st).Create(t.Context(), m.ID, "sync", 0)
	if err != nil {
		t.Fatal(err)
	}
	works := func(want bool) {
		t.Helper()
		_, _, err := Of(st).Member(t.Context(), secret)
		if want && err != nil || !want && !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("token works = %v, want %v", err == nil, want)
		}
	}
	at := func(d time.Duration) *time.Time { x := time.Now().Add(d); return &x }
	works(true)
	if _, err := Of(st).SetExpiry(t.Context(), m.ID, tok.ID, at(-time.Second)); err != nil {
		t.Fatal(err)
	}
	works(false)
	if rec, err := Of(st).SetExpiry(t.Context(), m.ID, tok.ID, nil); err != nil || rec.ExpiresAt != nil {
		t.Fatalf("never: %+v %v", rec, err)
	}
	works(true)
	future := at(24 * time.Hour)
	if rec, err := Of(st).SetExpiry(t.Context(), m.ID, tok.ID, future); err != nil || !rec.ExpiresAt.Equal(*future) {
		t.Fatalf("future: %+v %v", rec, err)
	}
	works(true)
	// Long past: the lookup record goes, the token stays listed as expired.
	if _, err := Of(st).SetExpiry(t.Context(), m.ID, tok.ID, at(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	works(false)
	if list, _ := Of(st).List(t.Context(), m.ID); len(list) != 1 || !list[0].Expired(time.Now()) {
		t.Fatalf("tokens listed: %+v", list)
	}
	other, _ := members.Of(st).CreateMember(t.Context(), "other", "", "password123")
	if _, err := Of(st).SetExpiry(t.Context(), other.ID, tok.ID, nil); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("another member's token: %v", err)
	}
	if _, err := Of(st).SetExpiry(t.Context(), m.ID, "404", nil); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown token: %v", err)
	}
}

// A newsletter address made before addresses had ids (and before the id
// index) is found once IndexInboundIDs ran, and stops working when rotated.
func TestInboundMemberByIDFindsOlderAddressesAfterIndexing(t *testing.T) {
	st, m := openSavedTest(t)
	legacy := Inbound{Digest: storage.Digest("nl_legacysecretlegacysecret"), CreatedAt: storage.Now().Add(-time.Hour)}
	err := st.Update(t.Context(), func(tx *storage.Tx) error {
		if err := tx.Put(inboundRefKey(legacy.Digest), []byte(m.ID), 0); err != nil {
			return err
		}
		return tx.PutJSON(inboundKey(m.ID), legacy, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	info, err := Of(st).InboundInfo(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).InboundMemberByID(t.Context(), info.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("before indexing: %v", err)
	}
	if err := Of(st).IndexInboundIDs(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, err := Of(st).InboundMemberByID(t.Context(), info.ID); err != nil || got.ID != m.ID {
		t.Fatalf("after indexing: %v %v", got, err)
	}
	if _, err := Of(st).RotateInboundSecret(t.Context(), m.ID, "https://example.org"); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).InboundMemberByID(t.Context(), info.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("old address after rotation: %v", err)
	}
	cur, _ := Of(st).InboundInfo(t.Context(), m.ID)
	if got, err := Of(st).InboundMemberByID(t.Context(), cur.ID); err != nil || got.ID != m.ID {
		t.Fatalf("new address: %v %v", got, err)
	}
	if err := members.Of(st).DeleteMember(t.Context(), m.Username); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).InboundMemberByID(t.Context(), cur.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after member deletion: %v", err)
	}
}

// A newsletter address's id is the local part of an e-mail address anyone
// can send mail to, so it must not be guessable: 80 random bits in lower
// case base32, different for every address. Addresses made the old way
// (time-based ids) keep working.
func TestInboundAddressIDsAreRandom(t *testing.T) {
	st, m := openSavedTest(t)
	seen := map[string]bool{}
	for range 20 {
		if _, err := Of(st).RotateInboundSecret(t.Context(), m.ID, "https://example.com"); err != nil {
			t.Fatal(err)
		}
		in, err := Of(st).InboundInfo(t.Context(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(in.ID) != 16 || strings.Trim(in.ID, "abcdefghijklmnopqrstuvwxyz234567") != "" || seen[in.ID] {
			t.Fatalf("address id %q: want 16 fresh characters of lower case base32 (80 random bits)", in.ID)
		}
		seen[in.ID] = true
		if got, err := Of(st).InboundMemberByID(t.Context(), in.ID); err != nil || got.ID != m.ID {
			t.Fatalf("address %q: %v %v", in.ID, got, err)
		}
	}
	for _, bad := range []string{"", "ABCDEFGHIJKLMNOP", "abcdefghijklmno1", "abcdefghijklmnopq", "../gql/inbound"} {
		if _, err := Of(st).InboundMemberByID(t.Context(), bad); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("%q: %v", bad, err)
		}
	}

	// An address made the old way: its id a fresh time-based id.
	other, err := members.Of(st).CreateMember(t.Context(), "older", "", "password123")
	if err != nil {
		t.Fatal(err)
	}
	old := Inbound{Digest: storage.Digest("nl_oldsecretoldsecretoldsecret"), CreatedAt: storage.Now(), Site: "https://example.com"}
	err = st.Update(t.Context(), func(tx *storage.Tx) error {
		var err error
		if old.ID, err = tx.FreshID(inboundIDKey); err != nil {
			return err
		}
		if err := tx.Put(inboundRefKey(old.Digest), []byte(other.ID), 0); err != nil {
			return err
		}
		if err := tx.Put(inboundIDKey(old.ID), []byte(other.ID), 0); err != nil {
			return err
		}
		return tx.PutJSON(inboundKey(other.ID), old, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Of(st).InboundMemberByID(t.Context(), old.ID); err != nil || got.ID != other.ID {
		t.Fatalf("old address %q: %v %v", old.ID, got, err)
	}
	if err := Of(st).DeleteInbound(t.Context(), other.ID, old.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).InboundMemberByID(t.Context(), old.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("old address after deletion: %v", err)
	}
}
