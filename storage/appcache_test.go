package storage

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// A cached application record gives way to every committed write to its
// key: a change, a deletion, a restore.
func TestOAuthAppCacheFollowsWrites(t *testing.T) {
	s, _, app, secret := oauthFixture(t)
	if _, err := s.AuthenticateOAuthClient(app.ClientID, secret); err != nil {
		t.Fatal(err)
	}
	if _, cached := s.apps.apps[app.ClientID]; !cached {
		t.Fatal("the application was not cached after a lookup")
	}
	got, err := s.OAuthApp(app.ClientID)
	if err != nil || got.Name != "Tooter" {
		t.Fatalf("cached lookup: %+v, %v", got, err)
	}
	got.Scopes = []string{"write"} // a caller's copy, not the cache's
	got.Name = "Changed by a caller"
	if again, _ := s.OAuthApp(app.ClientID); again.Name != "Tooter" {
		t.Fatalf("a caller changed the cached record: %q", again.Name)
	}

	renamed := *app
	renamed.Name = "Tooter 2"
	if err := s.Update(func(tx *Tx) error { return tx.putJSON(oauthAppKey(app.ClientID), &renamed, 0) }); err != nil {
		t.Fatal(err)
	}
	if got, err := s.OAuthApp(app.ClientID); err != nil || got.Name != "Tooter 2" {
		t.Fatalf("after a write: %+v, %v", got, err)
	}

	if err := s.Update(func(tx *Tx) error { return tx.delete(oauthAppKey(app.ClientID)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateOAuthClient(app.ClientID, secret); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after a delete: %v, want ErrNotFound", err)
	}

	// A backup from a busier store carries a newer version of the record
	// (Badger keeps the versions of a backup), so restoring it replaces
	// the cached one.
	other := openOAuthTestStore(t)
	for i := range 20 {
		busier := *app
		busier.Name = fmt.Sprint("Tooter from backup ", i)
		if err := other.Update(func(tx *Tx) error { return tx.putJSON(oauthAppKey(app.ClientID), &busier, 0) }); err != nil {
			t.Fatal(err)
		}
	}
	var backup bytes.Buffer
	if err := other.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *Tx) error { return tx.putJSON(oauthAppKey(app.ClientID), app, 0) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateOAuthClient(app.ClientID, secret); err != nil {
		t.Fatalf("after writing the record again: %v", err)
	}
	if err := s.Restore(&backup); err != nil {
		t.Fatal(err)
	}
	if got, err := s.OAuthApp(app.ClientID); err != nil || got.Name != "Tooter from backup 19" {
		t.Fatalf("after a restore: %+v, %v", got, err)
	}
}

// A lookup that read the record before a write committed must not cache
// what it read once the write has dropped the entry.
func TestOAuthAppCacheIgnoresReadsOlderThanADrop(t *testing.T) {
	c := newAppCache()
	app := &OAuthApp{ClientID: "c1", Name: "old"}
	_, gen := c.get("c1")
	c.drop([]string{"c1"}) // a write committed meanwhile
	c.add(gen, "c1", app)
	if got, _ := c.get("c1"); got != nil {
		t.Fatalf("a read older than the write was cached: %+v", got)
	}
	_, gen = c.get("c1")
	c.add(gen, "c1", app)
	if got, _ := c.get("c1"); got == nil || got.Name != "old" {
		t.Fatalf("a current read was not cached: %+v", got)
	}
}

func TestOAuthAppCacheIsBounded(t *testing.T) {
	c := newAppCache()
	for i := range appCacheSize + 10 {
		id := fmt.Sprint(i)
		_, gen := c.get(id)
		c.add(gen, id, &OAuthApp{ClientID: id})
	}
	if n := len(c.apps); n != appCacheSize {
		t.Fatalf("%d cached applications, want %d", n, appCacheSize)
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
				if _, err := s.OAuthApp(app.ClientID); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range 200 {
		renamed := *app
		renamed.Name = fmt.Sprint("name ", i)
		if err := s.Update(func(tx *Tx) error { return tx.putJSON(oauthAppKey(app.ClientID), &renamed, 0) }); err != nil {
			t.Fatal(err)
		}
		got, err := s.OAuthApp(app.ClientID)
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
