package grants

// Revocation at any number of tokens (revocation.go): the revoking
// transaction is bounded, every revoked token is refused at once, and the
// sweep deletes the records afterwards, a bounded batch a transaction.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/internal/testchild"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv/kvtest"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// manyTokens issues n tokens of m to app (IssueMany).
func manyTokens(tb testing.TB, s *storage.Store, app *App, m *members.Member, n int) []string {
	tb.Helper()
	toks, err := Of(s).IssueMany(tb.Context(), app.ClientID, m.ID, []string{"read"}, n)
	if err != nil {
		tb.Fatal(err)
	}
	return toks
}

// refused fails the test unless every token of toks is refused as unknown.
func refused(t *testing.T, s *storage.Store, what string, toks ...string) {
	t.Helper()
	for _, tok := range toks {
		if _, _, err := Of(s).Token(t.Context(), tok); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("%s: a revoked token answers %v, want storage.ErrNotFound", what, err)
		}
	}
}

// sample is the first, a middle and the last of toks.
func sample(toks []string) []string { return []string{toks[0], toks[len(toks)/2], toks[len(toks)-1]} }

// oauthRecords counts the records the sweep deletes: the member's refs,
// the access and refresh tokens, the refresh families, the sweep's queue.
func oauthRecords(t *testing.T, s *storage.Store, memberID string) (refs, tokens, queued int) {
	t.Helper()
	count := func(tx *storage.Tx, prefix []byte) int {
		n := 0
		if err := tx.Scan(prefix, nil, false, true, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	err := s.View(t.Context(), func(tx *storage.Tx) error {
		refs = count(tx, grantsPrefix(memberID))
		tokens = count(tx, tokenKey("")) + count(tx, refreshKey(""))
		queued = count(tx, sweepKey(""))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return refs, tokens, queued
}

// swept waits until the sweep has left only want refs and tokens.
func swept(t *testing.T, s *storage.Store, memberID string, want int) {
	t.Helper()
	kvtest.Eventually(t, "the sweep deletes the revoked records", func() bool {
		refs, tokens, queued := oauthRecords(t, s, memberID)
		return refs == want && tokens == want && queued == 0
	})
}

// TestRevokeMemberAccessAtManyTokens: a member's access ends in one
// bounded transaction at 10,000 and 50,000 tokens (one transaction
// deleting them fails: kv: transaction too big): every token is refused at
// once, the apps are counted, the list is empty, a code granted before is
// refused, a new grant works, and the sweep deletes the records.
func TestRevokeMemberAccessAtManyTokens(t *testing.T) {
	for _, n := range []int{10000, 50000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			if n > 10000 && testing.Short() {
				t.Skip("-short")
			}
			s, m, app, _ := oauthFixture(t)
			other, _, err := Of(s).CreateApp(t.Context(), "Other", "", []string{"https://other.example/cb"}, []string{"read"})
			if err != nil {
				t.Fatal(err)
			}
			_, otherTok := issueToken(t, s, other, m, "https://other.example/cb", "read")
			toks := manyTokens(t, s, app, m, n)
			for _, tok := range append(sample(toks), otherTok) {
				if _, _, err := Of(s).Token(t.Context(), tok); err != nil { // cached now
					t.Fatal(err)
				}
			}
			code, err := Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
			if err != nil {
				t.Fatal(err)
			}

			tokens, apps, err := members.Of(s).RevokeMemberAccess(t.Context(), m.ID)
			if err != nil {
				t.Fatalf("revoke at %d tokens: %v", n, err)
			}
			if tokens != 0 || apps != 2 {
				t.Fatalf("revoked %d API tokens and %d apps, want 0 and 2", tokens, apps)
			}
			refused(t, s, "after the member's revocation", append(sample(toks), otherTok)...)
			if got, err := Of(s).AuthorizedApps(t.Context(), m.ID); err != nil || len(got) != 0 {
				t.Fatalf("authorized apps after the revocation: %d, %v", len(got), err)
			}
			if _, _, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil }); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("a code granted before the revocation: %v, want storage.ErrNotFound", err)
			}
			// A second revocation counts nothing left.
			if _, apps, err := members.Of(s).RevokeMemberAccess(t.Context(), m.ID); err != nil || apps != 0 {
				t.Fatalf("second revocation: %d apps, %v", apps, err)
			}

			m, _ = members.Of(s).MemberByID(t.Context(), m.ID)
			_, fresh := issueToken(t, s, app, m, "https://app.example/cb", "read")
			if _, _, err := Of(s).Token(t.Context(), fresh); err != nil {
				t.Fatalf("a token granted after the revocation: %v", err)
			}
			if got, _ := Of(s).AuthorizedApps(t.Context(), m.ID); len(got) != 1 || got[0].App.ClientID != app.ClientID {
				t.Fatalf("authorized apps after a new grant: %+v", got)
			}
			swept(t, s, m.ID, 1)
			if _, _, err := Of(s).Token(t.Context(), fresh); err != nil {
				t.Fatalf("the sweep took a live token: %v", err)
			}
		})
	}
}

// TestRevokeAppAtManyTokens: one app's grant ends in one bounded
// transaction at 10,000 tokens; the member's other apps keep theirs.
func TestRevokeAppAtManyTokens(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	other, _, err := Of(s).CreateApp(t.Context(), "Other", "", []string{"https://other.example/cb"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	_, otherTok := issueToken(t, s, other, m, "https://other.example/cb", "read")
	toks := manyTokens(t, s, app, m, 10000)
	for _, tok := range sample(toks) {
		if _, _, err := Of(s).Token(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if err := Of(s).RevokeAppForMember(t.Context(), m.ID, app.ClientID); err != nil {
		t.Fatalf("revoke the app at 10000 tokens: %v", err)
	}
	refused(t, s, "after the app's revocation", sample(toks)...)
	if _, _, err := Of(s).Token(t.Context(), otherTok); err != nil {
		t.Fatalf("another app's token: %v", err)
	}
	if got, _ := Of(s).AuthorizedApps(t.Context(), m.ID); len(got) != 1 || got[0].App.ClientID != other.ClientID {
		t.Fatalf("authorized apps: %+v, want only Other", got)
	}
	if ok, _ := Of(s).Covers(t.Context(), m.ID, app.ClientID, []string{"read"}); ok {
		t.Fatal("a revoked grant still skips the consent page")
	}
	swept(t, s, m.ID, 1)
}

// TestSweepDeletesInBoundedBatches: one transaction of the sweep deletes
// at most sweepBatch refs with their tokens, and the next goes on from
// there.
func TestSweepDeletesInBoundedBatches(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	w := sweepKind.Of(s)
	w.Hold() // the test runs the batches itself
	defer w.Release()
	n := 2*sweepBatch + 10
	manyTokens(t, s, app, m, n)
	if err := Of(s).RevokeAppForMember(t.Context(), m.ID, app.ClientID); err != nil {
		t.Fatal(err)
	}
	var from []byte
	for i, want := range []int{n - sweepBatch, n - 2*sweepBatch, 0} {
		err := s.Update(t.Context(), func(tx *storage.Tx) error {
			cur, err := members.ByID(tx, m.ID)
			if err != nil {
				return err
			}
			from, err = sweepRefs(tx, cur, from)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if refs, tokens, _ := oauthRecords(t, s, m.ID); refs != want || tokens != want {
			t.Fatalf("after batch %d: %d refs and %d tokens, want %d", i+1, refs, tokens, want)
		}
		if (from == nil) != (want == 0) {
			t.Fatalf("after batch %d: resume at %q", i+1, from)
		}
	}
}

// TestSweepResumesAfterAKill: a process killed after a revocation
// committed, before its sweep ran, leaves the queue; the next opening of
// the store sweeps.
func TestSweepResumesAfterAKill(t *testing.T) {
	if storagetest.OnPostgres() {
		t.Skip("kills a process holding a Badger store")
	}
	dir := t.TempDir()
	child := testchild.Start(t, "TestSweepKillHelper", "HEARTH_SWEEP_DIR="+dir)
	if !child.Lines.Scan() || child.Lines.Text() != "revoked" {
		t.Fatalf("child: %q", child.Lines.Text())
	}
	child.Kill(t)
	child.WaitKilled(t)

	s := storage.Prepare(dir, storage.Options{GCInterval: -1})
	w := sweepKind.Of(s)
	w.Hold() // to see what the killed process left
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := members.Of(s).Member(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if refs, tokens, queued := oauthRecords(t, s, m.ID); refs != 2000 || tokens != 2000 || queued != 1 {
		t.Fatalf("the killed process left %d refs, %d tokens, %d queued; want 2000, 2000, 1", refs, tokens, queued)
	}
	w.Release()
	swept(t, s, m.ID, 0)
}

// TestSweepKillHelper is TestSweepResumesAfterAKill's child: it revokes a
// member's 2,000 tokens with the sweep held, says so, and waits to be
// killed.
func TestSweepKillHelper(t *testing.T) {
	dir := os.Getenv("HEARTH_SWEEP_DIR")
	if dir == "" {
		t.Skip("run by TestSweepResumesAfterAKill")
	}
	s, err := storage.Open(dir, storage.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := members.Of(s).CreateMember(t.Context(), "alice", "Alice", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	app, _, err := Of(s).CreateApp(t.Context(), "Tooter", "", []string{"https://app.example/cb"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	manyTokens(t, s, app, m, 2000)
	sweepKind.Of(s).Hold()
	if _, _, err := members.Of(s).RevokeMemberAccess(t.Context(), m.ID); err != nil {
		t.Fatal(err)
	}
	fmt.Println("revoked")
	time.Sleep(time.Minute)
}

// Two nodes of one site on PostgreSQL (storagetest.Postgres).
var grantNodes = storagetest.NewPostgres(15468)

// TestRevocationOnTwoNodes: a member's access revoked on node A at 10,000
// tokens is refused by node B, which had the tokens, the member and the
// grant cached; an app revoked on A likewise. A's sweep is stopped: B's
// sweep deletes the records.
func TestRevocationOnTwoNodes(t *testing.T) {
	a, b := grantNodes.TwoNodes(t)
	kvtest.Eventually(t, "both nodes listen", func() bool { return a.Live() && b.Live() })
	wa := sweepKind.Of(a)
	wa.cancel()
	<-wa.done
	m, err := members.Of(a).CreateMember(t.Context(), "alice", "Alice", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	app, _, err := Of(a).CreateApp(t.Context(), "Tooter", "", []string{"https://app.example/cb"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := Of(a).CreateApp(t.Context(), "Other", "", []string{"https://other.example/cb"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	toks := manyTokens(t, a, app, m, 10000)
	otherToks := manyTokens(t, a, other, m, 3)
	// B reads them until they stay in its caches (A's writes of the
	// tokens drop B's caches as their notifications arrive).
	kvtest.Eventually(t, "B has the tokens cached", func() bool {
		for _, tok := range append(sample(toks), otherToks...) {
			if _, _, err := Of(b).Token(t.Context(), tok); err != nil {
				t.Fatal(err)
			}
		}
		for _, tok := range append(sample(toks), otherToks...) {
			if !Of(b).Cached(tok) {
				return false
			}
		}
		return true
	})

	if err := Of(a).RevokeAppForMember(t.Context(), m.ID, other.ClientID); err != nil {
		t.Fatal(err)
	}
	refused(t, a, "the revoking node, app", otherToks...)
	kvtest.Eventually(t, "B refuses the revoked app's tokens", func() bool {
		_, _, err := Of(b).Token(t.Context(), otherToks[0])
		return errors.Is(err, storage.ErrNotFound)
	})
	refused(t, b, "B, app", otherToks...)
	if _, _, err := Of(b).Token(t.Context(), toks[0]); err != nil {
		t.Fatalf("B refuses another app's token: %v", err)
	}

	if _, apps, err := members.Of(a).RevokeMemberAccess(t.Context(), m.ID); err != nil || apps != 1 {
		t.Fatalf("revoke at 10000 tokens: %d apps, %v", apps, err)
	}
	refused(t, a, "the revoking node", sample(toks)...)
	kvtest.Eventually(t, "B refuses the revoked member's tokens", func() bool {
		_, _, err := Of(b).Token(t.Context(), toks[0])
		return errors.Is(err, storage.ErrNotFound)
	})
	refused(t, b, "B", sample(toks)...)
	swept(t, b, m.ID, 0)
}

// TestGrantsKeptBeforeGenerations: the refs a store kept before
// generations move to generation zero when it opens; their tokens keep
// working and are listed until revoked, then are refused and swept.
func TestGrantsKeptBeforeGenerations(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	toks := manyTokens(t, s, app, m, 600)
	// The layout of before: each ref under u/<member>/oauth/tok/, no
	// generation anywhere, the store not yet migrated.
	err := s.Update(t.Context(), func(tx *storage.Tx) error {
		zone := zonePrefix(m.ID, 0)
		var keys [][]byte
		err := tx.Scan(zone, nil, false, true, func(k, _ []byte) (bool, error) {
			keys = append(keys, append([]byte{}, k...))
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			parts := strings.Split(string(k[len(zone):]), "/")
			v, err := tx.Get(k)
			if err != nil {
				return err
			}
			if err := tx.Put(legacyRefKey(m.ID, parts[0], parts[2]), v, 0); err != nil {
				return err
			}
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := Of(s).AuthorizedApps(t.Context(), m.ID); len(got) != 0 {
		t.Fatalf("the old layout is listed before its move: %+v", got)
	}
	if err := migrateLegacyRefs(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if got, _ := Of(s).AuthorizedApps(t.Context(), m.ID); len(got) != 1 || got[0].App.ClientID != app.ClientID {
		t.Fatalf("authorized apps after the move: %+v", got)
	}
	if _, _, err := Of(s).Token(t.Context(), toks[0]); err != nil {
		t.Fatalf("a token of before: %v", err)
	}
	if err := Of(s).RevokeToken(t.Context(), app.ClientID, toks[1]); err != nil {
		t.Fatal(err)
	}
	refused(t, s, "one token revoked", toks[1])
	if _, apps, err := members.Of(s).RevokeMemberAccess(t.Context(), m.ID); err != nil || apps != 1 {
		t.Fatalf("revocation: %d apps, %v", apps, err)
	}
	refused(t, s, "after the revocation", sample(toks)...)
	swept(t, s, m.ID, 0)
	err = s.View(t.Context(), func(tx *storage.Tx) error {
		left, err := tx.Suffixes(legacyRefsPrefix(m.ID))
		if len(left) != 0 {
			t.Errorf("%d refs left in the old layout", len(left))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeleteMemberAtManyTokens: a member holding 50,000 tokens is deleted
// (one transaction deleting them fails as too big): its tokens are
// refused, and their records are gone once DeleteMember returns.
func TestDeleteMemberAtManyTokens(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	toks := manyTokens(t, s, app, m, 50000)
	if err := Of(s).RevokeAppForMember(t.Context(), m.ID, app.ClientID); err != nil {
		t.Fatal(err)
	}
	if err := members.Of(s).DeleteMember(t.Context(), m.Username); err != nil {
		t.Fatalf("delete at 50000 tokens: %v", err)
	}
	refused(t, s, "after the deletion", sample(toks)...)
	refs, tokens, _ := oauthRecords(t, s, m.ID)
	var pairs []string
	err := s.View(t.Context(), func(tx *storage.Tx) error {
		var err error
		pairs, err = tx.Suffixes(pairKey(m.ID, ""))
		return err
	})
	if err != nil || refs != 0 || tokens != 0 || len(pairs) != 0 {
		t.Fatalf("after the deletion: %d refs, %d tokens, %d grants' generations, %v", refs, tokens, len(pairs), err)
	}
	swept(t, s, m.ID, 0)
}

// pairsOf counts memberID's pairs (one per app it granted a code or
// revoked).
func pairsOf(t *testing.T, s *storage.Store, memberID string) int {
	t.Helper()
	n := 0
	if err := s.View(t.Context(), func(tx *storage.Tx) error {
		return tx.Scan(pairKey(memberID, ""), nil, false, true, func(_, _ []byte) (bool, error) { n++; return true, nil })
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// Anyone can make apps: revoking one the member never authorized succeeds
// and writes nothing the member's deletion would have to delete, while an
// app the member granted a code, exchanged or not, is revoked.
func TestRevokingAnAppNeverAuthorizedWritesNothing(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	for i := range 50 {
		other, _, err := Of(s).CreateApp(t.Context(), fmt.Sprintf("Stranger %d", i), "", []string{"https://stranger.example/cb"}, []string{"read"})
		if err != nil {
			t.Fatal(err)
		}
		if err := Of(s).RevokeAppForMember(t.Context(), m.ID, other.ClientID); err != nil {
			t.Fatalf("revoking an app never authorized: %v", err)
		}
	}
	if n := pairsOf(t, s, m.ID); n != 0 {
		t.Fatalf("%d records after revoking apps never authorized, want none", n)
	}
	_, tok := issueToken(t, s, app, m, "https://app.example/cb", "read")
	pending, err := Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := Of(s).RevokeAppForMember(t.Context(), m.ID, app.ClientID); err != nil {
		t.Fatal(err)
	}
	refused(t, s, "the authorized app's token", tok)
	if _, _, err := Of(s).ExchangeCode(t.Context(), pending, func(*Code) error { return nil }); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the authorized app's code after the revocation: %v, want storage.ErrNotFound", err)
	}
}

// A code granted by a version that wrote no pair at consent, revoked after
// the upgrade: the revocation finds no pair and no live token and writes
// nothing, so the code is refused at its exchange rather than bringing the
// revoked app back (the member authorizes again).
func TestACodeGrantedWithoutAPairIsRefused(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	code, err := Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
	if err != nil {
		t.Fatal(err)
	}
	// As the version before pairs wrote it: the code alone.
	if err := s.Update(t.Context(), func(tx *storage.Tx) error { return tx.Delete(pairKey(m.ID, app.ClientID)) }); err != nil {
		t.Fatal(err)
	}
	if err := Of(s).RevokeAppForMember(t.Context(), m.ID, app.ClientID); err != nil {
		t.Fatal(err)
	}
	if _, tok, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil }); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("exchanging a code without a pair after the app's revocation: %v, want storage.ErrNotFound", err)
	} else if tok != "" {
		refused(t, s, "the token of a code granted before the revocation", tok)
	}
	again, err := Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(s).ExchangeCode(t.Context(), again, func(*Code) error { return nil }); err != nil {
		t.Fatalf("a code granted after the revocation: %v", err)
	}
}

// A member whose store holds a pair for each of 20,000 apps (revocations
// of apps never authorized wrote one each before they wrote none; codes
// granted to as many apps write as many) is deleted, pairs included: more
// than one transaction deletes.
func TestDeletingAMemberWithPairsForManyApps(t *testing.T) {
	s, m, _, _ := oauthFixture(t)
	const apps = 20000
	for i := 0; i < apps; i += 1000 {
		if err := s.Update(t.Context(), func(tx *storage.Tx) error {
			for j := i; j < i+1000; j++ {
				if err := tx.PutJSON(pairKey(m.ID, fmt.Sprintf("client%05d", j)), pairState{Gen: 1}, 0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := members.Of(s).DeleteMember(t.Context(), m.Username); err != nil {
		t.Fatalf("deleting the member: %v", err)
	}
	if n := pairsOf(t, s, m.ID); n != 0 {
		t.Fatalf("%d of the deleted member's pairs left", n)
	}
}
