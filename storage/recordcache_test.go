package storage

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// A cached application record gives way to every committed write to its
// key: a change, a deletion, a restore.
func TestOAuthAppCacheFollowsWrites(t *testing.T) {
	s, _, app, secret := oauthFixture(t)
	if _, err := s.AuthenticateOAuthClient(t.Context(), app.ClientID, secret); err != nil {
		t.Fatal(err)
	}
	if _, cached := appCache.Of(s).records[app.ClientID]; !cached {
		t.Fatal("the application was not cached after a lookup")
	}
	got, err := s.OAuthApp(t.Context(), app.ClientID)
	if err != nil || got.Name != "Tooter" {
		t.Fatalf("cached lookup: %+v, %v", got, err)
	}
	got.Scopes = []string{"write"} // a caller's copy, not the cache's
	got.Name = "Changed by a caller"
	if again, _ := s.OAuthApp(t.Context(), app.ClientID); again.Name != "Tooter" {
		t.Fatalf("a caller changed the cached record: %q", again.Name)
	}

	renamed := *app
	renamed.Name = "Tooter 2"
	if err := s.Update(t.Context(), func(tx *Tx) error { return tx.putJSON(oauthAppKey(app.ClientID), &renamed, 0) }); err != nil {
		t.Fatal(err)
	}
	if got, err := s.OAuthApp(t.Context(), app.ClientID); err != nil || got.Name != "Tooter 2" {
		t.Fatalf("after a write: %+v, %v", got, err)
	}

	if err := s.Update(t.Context(), func(tx *Tx) error { return tx.delete(oauthAppKey(app.ClientID)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateOAuthClient(t.Context(), app.ClientID, secret); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after a delete: %v, want ErrNotFound", err)
	}

	// A backup from a busier store carries a newer version of the record
	// (Badger keeps the versions of a backup), so restoring it replaces
	// the cached one.
	other := openOAuthTestStore(t)
	for i := range 20 {
		busier := *app
		busier.Name = fmt.Sprint("Tooter from backup ", i)
		if err := other.Update(t.Context(), func(tx *Tx) error { return tx.putJSON(oauthAppKey(app.ClientID), &busier, 0) }); err != nil {
			t.Fatal(err)
		}
	}
	var backup bytes.Buffer
	if err := other.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), func(tx *Tx) error { return tx.putJSON(oauthAppKey(app.ClientID), app, 0) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateOAuthClient(t.Context(), app.ClientID, secret); err != nil {
		t.Fatalf("after writing the record again: %v", err)
	}
	if _, err := s.Replace(&backup); err != nil {
		t.Fatal(err)
	}
	if got, err := s.OAuthApp(t.Context(), app.ClientID); err != nil || got.Name != "Tooter from backup 19" {
		t.Fatalf("after a restore: %+v, %v", got, err)
	}
}

// A lookup that read the record before a write committed must not cache
// what it read once the write has dropped the entry.
func TestRecordCacheIgnoresReadsOlderThanADrop(t *testing.T) {
	c := newRecordCache[OAuthApp](oauthAppKey(""), nil)
	app := &OAuthApp{ClientID: "c1", Name: "old"}
	gen := c.Generation()
	c.drop([]string{string(oauthAppKey("c1"))}) // a write committed meanwhile
	c.Add(gen, "c1", app)
	if got := c.Get("c1"); got != nil {
		t.Fatalf("a read older than the write was cached: %+v", got)
	}
	c.Add(c.Generation(), "c1", app)
	if got := c.Get("c1"); got == nil || got.Name != "old" {
		t.Fatalf("a current read was not cached: %+v", got)
	}
	c.drop([]string{string(memberIDKey("c1"))}) // another kind's key
	if got := c.Get("c1"); got == nil {
		t.Fatal("a write to another kind of record dropped the entry")
	}
}

func TestRecordCacheIsBounded(t *testing.T) {
	c := newRecordCache[OAuthApp](oauthAppKey(""), nil)
	for i := range recordCacheSize + 10 {
		id := fmt.Sprint(i)
		c.Add(c.Generation(), id, &OAuthApp{ClientID: id})
	}
	if n := len(c.records); n != recordCacheSize {
		t.Fatalf("%d cached applications, want %d", n, recordCacheSize)
	}
}

// A cached access token and its cached member give way at once to a
// revocation, a suspension and a deletion of the member.
func TestCachedTokensAndMembersFollowWrites(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	code, err := s.CreateOAuthCode(t.Context(), app.ClientID, m.ID, "https://app.example/cb", []string{"read"}, "")
	if err != nil {
		t.Fatal(err)
	}
	tok, secret, err := s.ExchangeOAuthCode(t.Context(), code, func(*OAuthCode) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, got, err := s.OAuthToken(t.Context(), secret); err != nil || got.ID != m.ID {
		t.Fatalf("OAuthToken = %v, %v", got, err)
	}
	if oauthTokenCache.Of(s).Get(Digest(secret)) == nil || memberCache.Of(s).Get(m.ID) == nil {
		t.Fatal("the token and its member were not cached after a lookup")
	}
	if _, _, err := s.OAuthToken(t.Context(), secret); err != nil {
		t.Fatalf("cached lookup: %v", err)
	}
	if _, err := s.SetSuspended(t.Context(), m.Username, true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.OAuthToken(t.Context(), secret); !errors.Is(err, ErrSuspended) {
		t.Fatalf("after suspending the member: %v, want ErrSuspended", err)
	}
	if _, err := s.SetSuspended(t.Context(), m.Username, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.OAuthToken(t.Context(), secret); err != nil {
		t.Fatalf("after lifting the suspension: %v", err)
	}
	if err := s.RevokeOAuthToken(t.Context(), tok.ClientID, secret); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.OAuthToken(t.Context(), secret); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after revoking: %v, want ErrNotFound", err)
	}
}

// Under concurrent lookups, a lookup that starts after a write to the
// application returned sees that write.
func TestOAuthAppCacheUnderConcurrentLookups(t *testing.T) {
	s, _, app, _ := oauthFixture(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.OAuthApp(t.Context(), app.ClientID); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range 200 {
		renamed := *app
		renamed.Name = fmt.Sprint("name ", i)
		if err := s.Update(t.Context(), func(tx *Tx) error { return tx.putJSON(oauthAppKey(app.ClientID), &renamed, 0) }); err != nil {
			t.Fatal(err)
		}
		got, err := s.OAuthApp(t.Context(), app.ClientID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != renamed.Name {
			t.Fatalf("after writing %q a lookup saw %q", renamed.Name, got.Name)
		}
	}
	close(stop)
	wg.Wait()
}

// The notifications of a commit's cached keys: deduplicated, split to fit
// kv.MaxPayload, or one "drop everything" when they are many or not plain
// ASCII; each starts with the sending node.
func TestCacheNotes(t *testing.T) {
	if got := cacheNotes("n1", []string{"member/id/1", "oauth/token/ab", "member/id/1"}); len(got) != 1 || got[0] != "n1\nmember/id/1\noauth/token/ab" {
		t.Fatalf("notes %q", got)
	}
	if got := cacheNotes("n1", nil); len(got) != 0 {
		t.Fatalf("notes without keys: %q", got)
	}
	var keys []string
	for i := range 300 { // 300 × 76 bytes: three notifications
		keys = append(keys, fmt.Sprintf("oauth/token/%064d", i))
	}
	got := cacheNotes("n1", keys)
	if len(got) != 3 {
		t.Fatalf("%d notes for 300 tokens", len(got))
	}
	var back []string
	for _, p := range got {
		if len(p) > kv.MaxPayload || !strings.HasPrefix(p, "n1\n") {
			t.Fatalf("note of %d bytes: %.20q…", len(p), p)
		}
		back = append(back, strings.Split(p, "\n")[1:]...)
	}
	if !slices.Equal(back, keys) {
		t.Fatal("the notes do not carry the keys")
	}
	for range 300 {
		keys = append(keys, keys[len(keys)-300]+"x")
	}
	if got := cacheNotes("n1", append(keys, keys...)); len(got) != 1 || got[0] != "n1\n*" {
		t.Fatalf("many keys: %d notes", len(got))
	}
	if got := cacheNotes("n1", []string{"oauth/app/é"}); len(got) != 1 || got[0] != "n1\n*" {
		t.Fatalf("a key that is not ASCII: %q", got)
	}
}
