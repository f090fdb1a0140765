package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/kv/kvtest"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// Several nodes are one site (the storage layer): two
// Stores opened on one PostgreSQL database with the same table prefix are
// two nodes. These tests run with either HEARTH_TEST_ENGINE: on Badger
// they start their own PostgreSQL server (pgtest, port
// clusterPostgresPort), on PostgreSQL they use the package's. They wait for
// the event (a refusal, a notification) and never assert a duration.

// siteOptions are the options of every node of a site in database dsn.
func siteOptions(dsn string) storage.Options {
	return storage.Options{Postgres: &storage.PostgresOptions{DSN: dsn, Prefix: "site"}}
}

// twoNodes opens two nodes of one site on a fresh database and waits until
// both listen for notifications.
func twoNodes(t *testing.T) (a, b *storage.Store, dsn string) {
	t.Helper()
	dsn = storage.ClusterServer(t).NewDatabase(t)
	a, b = openNode(t, siteOptions(dsn)), openNode(t, siteOptions(dsn))
	kvtest.Eventually(t, "both nodes listen", func() bool { return a.Live() && b.Live() })
	return a, b, dsn
}

func openNode(t *testing.T, opts storage.Options) *storage.Store {
	t.Helper()
	st, err := storage.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// memberToken makes a member with an OAuth app and an access token on st.
func memberToken(t *testing.T, st *storage.Store, username string) (m *members.Member, token string) {
	t.Helper()
	m, err := members.Of(st).CreateMember(t.Context(), username, "", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	app, _, err := grants.Of(st).CreateApp(t.Context(), "Tooter", "", []string{"https://app.example/cb"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	code, err := grants.Of(st).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, token, err = grants.Of(st).ExchangeCode(t.Context(), code, func(*grants.Code) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return m, token
}

// cachedOn checks that token is accepted on st and that st now holds it in
// its record cache (so a later acceptance comes from the cache).
func cachedOn(t *testing.T, st *storage.Store, token string) {
	t.Helper()
	if _, _, err := grants.Of(st).Token(t.Context(), token); err != nil {
		t.Fatalf("token refused: %v", err)
	}
	kvtest.Eventually(t, "the token is cached", func() bool {
		grants.Of(st).Token(t.Context(), token)
		return grants.Of(st).Cached(token)
	})
}

// stillRefused checks a few more times that st refuses token with want.
func stillRefused(t *testing.T, st *storage.Store, token string, want error) {
	t.Helper()
	for range 50 {
		if _, _, err := grants.Of(st).Token(t.Context(), token); !errors.Is(err, want) {
			t.Fatalf("accepted again or another error: %v, want %v", err, want)
		}
	}
}

// A token used on B (cached there), revoked on A: B refuses it once A's
// notification has arrived. Without the notification B's cache would serve
// it forever (the cache has no expiry).
func TestClusterRevokedTokenRefusedOnEveryNode(t *testing.T) {
	a, b, _ := twoNodes(t)
	m, token := memberToken(t, a, "alice")
	cachedOn(t, b, token)
	tok, _, err := grants.Of(b).Token(t.Context(), token)
	if err != nil {
		t.Fatal(err)
	}
	if err := grants.Of(a).RevokeToken(t.Context(), tok.ClientID, token); err != nil {
		t.Fatal(err)
	}
	if _, _, err := grants.Of(a).Token(t.Context(), token); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the revoking node accepts the token: %v", err)
	}
	kvtest.Eventually(t, "B refuses the revoked token", func() bool {
		_, _, err := grants.Of(b).Token(t.Context(), token)
		return errors.Is(err, storage.ErrNotFound)
	})
	stillRefused(t, b, token, storage.ErrNotFound)

	// A suspension on A: B refuses the member's (cached) token.
	_, token2 := memberToken(t, a, "bob")
	cachedOn(t, b, token2)
	if _, err := members.Of(a).SetSuspended(t.Context(), "bob", true); err != nil {
		t.Fatal(err)
	}
	kvtest.Eventually(t, "B refuses the suspended member's token", func() bool {
		_, _, err := grants.Of(b).Token(t.Context(), token2)
		return errors.Is(err, members.ErrSuspended)
	})
	stillRefused(t, b, token2, members.ErrSuspended)
	_ = m
}

// A session used on B (cached there), ended on A by a sign-out, and
// another by a password change: B refuses each once A's notification has
// arrived.
func TestClusterEndedSessionRefusedOnEveryNode(t *testing.T) {
	a, b, _ := twoNodes(t)
	m, err := members.Of(a).CreateMember(t.Context(), "carol", "", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	cached := func(sid string) {
		t.Helper()
		kvtest.Eventually(t, "B has the session cached", func() bool {
			_, err := members.Of(b).SessionMember(t.Context(), sid)
			return err == nil && members.Of(b).SessionCached(sid)
		})
	}
	refused := func(what, sid string) {
		t.Helper()
		kvtest.Eventually(t, "B refuses the session "+what, func() bool {
			_, err := members.Of(b).SessionMember(t.Context(), sid)
			return errors.Is(err, storage.ErrNotFound)
		})
		for range 50 {
			if _, err := members.Of(b).SessionMember(t.Context(), sid); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("the session %s is accepted again: %v", what, err)
			}
		}
	}
	sid, err := members.Of(a).CreateSession(t.Context(), m.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cached(sid)
	if err := members.Of(a).DeleteSession(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	refused("signed out on A", sid)

	sid, err = members.Of(a).CreateSession(t.Context(), m.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cached(sid)
	if err := members.Of(a).SetPassword(t.Context(), "carol", "another password entirely"); err != nil {
		t.Fatal(err)
	}
	refused("ended by a password change on A", sid)
}

// With B's listening connection broken (its backend terminated, as a
// database failover or a network cut does), a revocation on A meanwhile is
// missed by B's listener: B bypasses its caches while it is not listening
// and empties them when it listens again, so the revocation holds.
func TestClusterRevocationHoldsWhileListenerBroken(t *testing.T) {
	// The nodes log in as role node, which the test can stop from logging
	// in: the listeners cannot reconnect (the pools' open connections
	// still serve).
	dsn := storage.ClusterServer(t).NewDatabase(t)
	admin := adminConn(t, dsn)
	sqlExec(t, admin, `CREATE ROLE node LOGIN SUPERUSER`)
	t.Cleanup(func() { sqlExec(t, admin, `DROP OWNED BY node; DROP ROLE node`) })
	nodeDSN := dsn + " user=node"
	a, b := openNode(t, siteOptions(nodeDSN)), openNode(t, siteOptions(nodeDSN))
	kvtest.Eventually(t, "both nodes listen", func() bool { return a.Live() && b.Live() })
	_, token := memberToken(t, a, "alice")
	cachedOn(t, b, token)
	tok, _, _ := grants.Of(b).Token(t.Context(), token)
	epoch := b.LiveEpoch()

	sqlExec(t, admin, `ALTER ROLE node NOLOGIN`)
	terminateListeners(t, admin)
	if err := grants.Of(a).RevokeToken(t.Context(), tok.ClientID, token); err != nil {
		t.Fatal(err)
	}
	// B has missed the notification; once it knows its listener is down
	// it reads the store.
	kvtest.Eventually(t, "B refuses the revoked token", func() bool {
		_, _, err := grants.Of(b).Token(t.Context(), token)
		return errors.Is(err, storage.ErrNotFound)
	})
	if b.Live() {
		t.Fatal("B says it listens")
	}
	stillRefused(t, b, token, storage.ErrNotFound)
	sqlExec(t, admin, `ALTER ROLE node LOGIN`)
	kvtest.Eventually(t, "B listens again", b.Live)
	if e := b.LiveEpoch(); e == epoch {
		t.Fatalf("B's listener did not reconnect (epoch %d)", e)
	}
	stillRefused(t, b, token, storage.ErrNotFound)
	// And the caches work again: a new token is cached on B.
	_, token2 := memberToken(t, a, "bob")
	cachedOn(t, b, token2)
}

func adminConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func sqlExec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// terminateListeners ends every backend LISTENing on the site's channel
// (pg_terminate_backend, waiting until each has ended).
func terminateListeners(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	var n int
	err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %site_kv_notify%' AND pid <> pg_backend_pid()`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no listening backend found")
	}
}

// exchangeAtOnce exchanges codes[i] on nodes[i], all at the same instant.
func exchangeAtOnce(nodes []*storage.Store, codes []string) (tokens []string, errs []error) {
	tokens, errs = make([]string, len(nodes)), make([]error, len(nodes))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			<-start
			_, tokens[i], errs[i] = grants.Of(nodes[i]).ExchangeCode(context.Background(), codes[i], func(*grants.Code) error { return nil })
		})
	}
	close(start)
	wg.Wait()
	return tokens, errs
}

// One code exchanged on A and B at the same instant, many rounds: exactly
// one token per code, the other exchange is a replay (grants.ErrCodeUsed), and
// the replay revokes the token (RFC 6749 section 4.1.2), on both nodes.
// Two different codes of the same member and app exchanged at once on A
// and B both succeed: a conflict between them is not a replay.
func TestClusterCodeExchangedOnce(t *testing.T) {
	a, b, _ := twoNodes(t)
	m, err := members.Of(a).CreateMember(t.Context(), "alice", "", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	app, _, err := grants.Of(a).CreateApp(t.Context(), "Tooter", "", []string{"https://app.example/cb"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	newCode := func() string {
		code, err := grants.Of(a).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	nodes := []*storage.Store{a, b}
	for round := range 30 {
		code := newCode()
		tokens, errs := exchangeAtOnce(nodes, []string{code, code})
		won := -1
		for i, err := range errs {
			if err == nil {
				if won >= 0 {
					t.Fatalf("round %d: both exchanges of one code issued a token", round)
				}
				won = i
			} else if !errors.Is(err, grants.ErrCodeUsed) {
				t.Fatalf("round %d: exchange on node %d: %v, want a token or grants.ErrCodeUsed", round, i, err)
			}
		}
		if won < 0 {
			t.Fatalf("round %d: no exchange issued a token: %v", round, errs)
		}
		for _, st := range nodes {
			kvtest.Eventually(t, "the replayed code's token is refused", func() bool {
				_, _, err := grants.Of(st).Token(t.Context(), tokens[won])
				return errors.Is(err, storage.ErrNotFound)
			})
		}
	}
	for round := range 30 {
		tokens, errs := exchangeAtOnce(nodes, []string{newCode(), newCode()})
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: exchange of a fresh code on node %d: %v", round, i, err)
			}
			for _, st := range nodes {
				if _, _, err := grants.Of(st).Token(t.Context(), tokens[i]); err != nil {
					t.Fatalf("round %d: token from node %d refused: %v", round, i, err)
				}
			}
		}
	}
}

// Two nodes × 4 writers each create labels at once: every id is distinct
// and carries its node's slot, and no label overwrote another.
func TestClusterIDsDistinct(t *testing.T) {
	a, b, _ := twoNodes(t)
	const writers, each = 4, 60
	type made struct {
		node   int
		member string
		id     string
	}
	var (
		mu  sync.Mutex
		all []made
		wg  sync.WaitGroup
	)
	for n, st := range []*storage.Store{a, b} {
		for w := range writers {
			m, err := members.Of(st).CreateMember(t.Context(), fmt.Sprintf("n%dw%d", n, w), "", "correct horse battery")
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for i := range each {
					l, err := library.Of(st).CreateLabel(t.Context(), m.ID, fmt.Sprintf("l%d", i), "#000000")
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					all = append(all, made{n, m.ID, l.ID})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	slots := map[int]uint64{}
	seen := map[string]bool{}
	for _, x := range all {
		if seen[x.id] {
			t.Fatalf("id %s made twice", x.id)
		}
		seen[x.id] = true
		v, err := strconv.ParseUint(x.id, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		slot := v >> storage.IDSeqBits & (1<<storage.IDSlotBits - 1)
		if s, ok := slots[x.node]; ok && s != slot {
			t.Fatalf("node %d made ids in slots %d and %d", x.node, s, slot)
		}
		slots[x.node] = slot
	}
	if slots[0] == slots[1] {
		t.Fatalf("both nodes use slot %d", slots[0])
	}
	per := map[string]int{}
	for _, x := range all {
		per[x.member]++
	}
	for member, n := range per {
		labels, err := library.Of(b).Labels(t.Context(), member)
		if err != nil || len(labels) != n {
			t.Fatalf("member %s has %d labels (%v), %d were made", member, len(labels), err, n)
		}
	}
}

// A node that cannot prove it holds an id slot (every slot's lease taken
// by others: its renewal failed) refuses creations with
// storage.ErrEngineUnavailable and changes nothing; once a slot is free it
// creates again.
func TestClusterNoIDsWithoutSlot(t *testing.T) {
	dsn := storage.ClusterServer(t).NewDatabase(t)
	opts := siteOptions(dsn)
	opts.Postgres.LeaseTTL = 1500 * time.Millisecond
	st := openNode(t, opts)
	m, err := members.Of(st).CreateMember(t.Context(), "alice", "", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	admin := adminConn(t, dsn)
	sqlExec(t, admin, `INSERT INTO site_lease (name, holder, expires_at)
		SELECT 'kv:idslot:' || i, 'another node', now() + interval '1 hour' FROM generate_series(0, 63) i
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at`)
	n := 0
	kvtest.Eventually(t, "creations are refused", func() bool {
		_, err := library.Of(st).CreateLabel(t.Context(), m.ID, fmt.Sprintf("l%d", n), "#000000")
		if err == nil {
			n++
			return false
		}
		if !errors.Is(err, storage.ErrEngineUnavailable) {
			t.Fatalf("creation without a slot: %v, want storage.ErrEngineUnavailable", err)
		}
		return true
	})
	if labels, _ := library.Of(st).Labels(t.Context(), m.ID); len(labels) != n {
		t.Fatalf("%d labels after %d creations succeeded", len(labels), n)
	}
	sqlExec(t, admin, `DELETE FROM site_lease WHERE holder = 'another node' AND name <> 'kv:idslot:5'`)
	l, err := library.Of(st).CreateLabel(t.Context(), m.ID, "after", "#000000")
	if err != nil {
		t.Fatalf("creation once slots are free: %v", err)
	}
	if v, _ := strconv.ParseUint(l.ID, 10, 64); v>>storage.IDSeqBits&(1<<storage.IDSlotBits-1) == 5 {
		t.Fatal("an id in a slot another node holds")
	}
}

// pauseRestore makes the next restore of st stop once it has saved the current
// records and started the import (restoreHook), run during() there
// once, and go on when release is called (at the latest when the test
// ends). paused is closed when it stops.
func pauseRestore(t *testing.T, st *storage.Store, during func()) (paused chan struct{}, release func()) {
	paused, resume := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(resume) })
	var first atomic.Bool
	st.SetRestoreHook(func(n int) error {
		if n == 1 && first.CompareAndSwap(false, true) { // the first restore only
			if during != nil {
				during()
			}
			close(paused)
			<-resume
		}
		return nil
	})
	t.Cleanup(func() {
		release()
		st.SetRestoreHook(nil)
	})
	return paused, release
}

// A restore on A is exclusive on every node: B's gets storage.ErrRestoreRunning
// while A's runs, and B's cached records are dropped when A's commits.
func TestClusterRestoreExclusiveAndDropsCaches(t *testing.T) {
	a, b, _ := twoNodes(t)
	if _, err := members.Of(a).CreateMember(t.Context(), "before", "", "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	backup := storagetest.Backup(t, a)
	_, token := memberToken(t, a, "alice") // not in the backup
	cachedOn(t, b, token)

	paused, release := pauseRestore(t, a, nil)
	done := make(chan error, 1)
	go func() {
		_, err := a.Replace(bytes.NewReader(backup))
		done <- err
	}()
	<-paused
	if _, err := b.Replace(bytes.NewReader(backup)); !errors.Is(err, storage.ErrRestoreRunning) {
		t.Fatalf("a restore on B while A's runs: %v, want storage.ErrRestoreRunning", err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("restore on A: %v", err)
	}
	kvtest.Eventually(t, "B refuses the token the restore removed", func() bool {
		_, _, err := grants.Of(b).Token(t.Context(), token)
		return errors.Is(err, storage.ErrNotFound)
	})
	stillRefused(t, b, token, storage.ErrNotFound)
	if _, err := members.Of(b).Member(t.Context(), "alice"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("B still has the member the restore removed: %v", err)
	}
	// After it, a restore on B runs.
	if _, err := b.Replace(bytes.NewReader(backup)); err != nil {
		t.Fatalf("restore on B after A's: %v", err)
	}
}

// Writes acknowledged on B while A's restore runs (after A saved the
// previous records, before its import committed) are not lost: each is in
// the previous records A saved or in the store afterwards. One changes a
// record the restore replaces (the restore runs again), one creates a
// record (it stays).
func TestClusterRestoreLosesNoWriteOfAnotherNode(t *testing.T) {
	a, b, _ := twoNodes(t)
	for i := range 20 {
		if _, err := members.Of(a).CreateMember(t.Context(), fmt.Sprint("restored", i), "", "correct horse battery"); err != nil {
			t.Fatal(err)
		}
	}
	backup := storagetest.Backup(t, a)
	bob, err := members.Of(a).CreateMember(t.Context(), "bob", "", "correct horse battery") // not in the backup
	if err != nil {
		t.Fatal(err)
	}
	var changeErr, createErr error
	paused, release := pauseRestore(t, a, func() {
		_, changeErr = members.Of(b).SetDisplayName(t.Context(), bob.ID, "Bob changed on B")
		_, createErr = members.Of(b).CreateMember(t.Context(), "carol", "", "correct horse battery")
	})
	done := make(chan error, 1)
	var previous string
	go func() {
		var err error
		previous, err = a.Replace(bytes.NewReader(backup))
		done <- err
	}()
	<-paused
	release()
	if err := <-done; err != nil {
		t.Fatalf("restore on A: %v", err)
	}
	if changeErr != nil || createErr != nil {
		t.Fatalf("writes on B during the restore: %v, %v", changeErr, createErr)
	}
	if previous == "" {
		t.Fatal("no previous records saved")
	}
	f, err := os.Open(previous)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := storagetest.Open(t)
	if _, err := saved.Replace(f); err != nil {
		t.Fatal(err)
	}
	found := func(username string) (*members.Member, bool) {
		for _, st := range []*storage.Store{saved, a, b} {
			if m, err := members.Of(st).Member(t.Context(), username); err == nil {
				return m, true
			}
		}
		return nil, false
	}
	if m, ok := found("bob"); !ok || m.DisplayName != "Bob changed on B" {
		t.Fatalf("the change acknowledged on B is lost: %+v", m)
	}
	if _, ok := found("carol"); !ok {
		t.Fatal("the member created on B is lost")
	}
	if _, err := members.Of(b).Member(t.Context(), "restored7"); err != nil {
		t.Fatalf("B does not see the restored records: %v", err)
	}
}
