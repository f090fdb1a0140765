//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nbd-wtf/go-nostr"
)

// The scenarios of the design study §7.3 that need more than the nodes:
// PostgreSQL's own view (5, 14), the relay and the NIP-05 server (9–11),
// backups and restores (12, 13). TestTwoNodes runs them in order.

// oauthToken signs username in on n, authorizes a for it and exchanges the
// code on n.
func oauthToken(t *testing.T, n *node, a app, username, password string) string {
	t.Helper()
	cookie := signIn(t, n, username, password)
	r, err := exchange(n, a, authorize(t, n, cookie, a))
	if err != nil {
		t.Fatal(err)
	}
	return accessToken(t, r)
}

func revoke(t *testing.T, n *node, a app, token string) {
	t.Helper()
	r := postForm(t, n.base()+"/oauth/revoke", url.Values{"client_id": {a.id}, "client_secret": {a.secret}, "token": {token}}, nil)
	if r.status != http.StatusOK {
		t.Fatalf("revoke on %s: %d %s", n.name, r.status, r.body)
	}
}

// scenario5: B's LISTEN connection is killed by the database
// (pg_terminate_backend), and new connections are refused meanwhile so B
// cannot listen again at once; a token B has cached is revoked on A. B
// must refuse it from then on, although the notification never reached
// it: it does not trust its cache while it is not listening.
func scenario5(t *testing.T, c *cluster, oauthApp app, password string) {
	a, b := c.a, c.b
	tok := oauthToken(t, a, oauthApp, "alice", password)
	for range 3 {
		if st := verifyCredentials(t, b, tok); st != http.StatusOK {
			t.Fatalf("verify_credentials on B before: %d", st)
		}
	}
	pc := pgAdmin(t)
	ctx := context.Background()
	db := dbName(c.dsn)
	old := listenerPID(t, pc, db, b)
	if old == 0 {
		t.Fatal("node B has no LISTEN connection")
	}
	// datallowconn is checked for superusers too: no node opens a new
	// connection until it is back; the pools' open ones keep working.
	if _, err := pc.Exec(ctx, `ALTER DATABASE `+db+` ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	reopened := false
	reopen := func() {
		if !reopened {
			reopened = true
			if _, err := pc.Exec(ctx, `ALTER DATABASE `+db+` ALLOW_CONNECTIONS true`); err != nil {
				t.Error(err)
			}
		}
	}
	defer reopen()
	var ok bool
	if err := pc.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, old).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d): %v %v", old, ok, err)
	}
	waitEvery(t, "B's LISTEN backend has ended", 5*time.Millisecond, func() bool { return !backendAlive(t, pc, old) })
	revoke(t, a, oauthApp, tok)
	// From the revocation's answer on, every check on B refuses the token.
	checks := 0
	for range 40 {
		checks++
		if st := verifyCredentials(t, b, tok); st != http.StatusUnauthorized {
			t.Fatalf("check %d on B after the revocation on A, B not listening: %d; want 401", checks, st)
		}
	}
	if pid := listenerPID(t, pc, db, b); pid != 0 {
		t.Fatalf("B listens again (backend %d) while the database refuses connections", pid)
	}
	reopen()
	var relisten int32
	lag := waitEvery(t, "B listens again", 10*time.Millisecond, func() bool {
		checks++
		if st := verifyCredentials(t, b, tok); st != http.StatusUnauthorized {
			t.Fatalf("check %d on B while it connects again: %d; want 401", checks, st)
		}
		relisten = listenerPID(t, pc, db, b)
		return relisten != 0
	})
	for range 5 {
		checks++
		if st := verifyCredentials(t, b, tok); st != http.StatusUnauthorized {
			t.Fatalf("check %d on B after it listens again: %d; want 401", checks, st)
		}
	}
	t.Logf("B listened again (backend %d, was %d) %v after connections were allowed; %d checks on B, all 401", relisten, old, lag, checks)

	// The cache works again and is invalidated again: a new token, cached
	// on B, revoked on A.
	tok2 := oauthToken(t, a, oauthApp, "alice", password)
	for range 3 {
		if st := verifyCredentials(t, b, tok2); st != http.StatusOK {
			t.Fatalf("verify_credentials on B with a new token: %d", st)
		}
	}
	revoke(t, a, oauthApp, tok2)
	lag = waitFor(t, "B refuses the next token revoked on A", func() bool { return verifyCredentials(t, b, tok2) == http.StatusUnauthorized })
	t.Logf("after B listened again, a revocation on A was refused on B after %v", lag)
}

// scenario9: an agent registered on A is listed by B's document, and both
// nodes serve the same document (ETag, generated_at).
func scenario9(t *testing.T, c *cluster) {
	a, b := c.a, c.b
	ag := newAgent(t)
	register(t, a, ag, "nine")
	lag := waitEvery(t, "B's document lists the agent registered on A", 5*time.Millisecond, func() bool {
		d, _ := document(t, b)
		return d.lists(ag.pk)
	})
	var da, db dirDoc
	var ea, eb string
	waitEvery(t, "A and B serve one document", 5*time.Millisecond, func() bool {
		da, ea = document(t, a)
		db, eb = document(t, b)
		return da.lists(ag.pk) && db.lists(ag.pk) && ea == eb && da.GeneratedAt == db.GeneratedAt
	})
	t.Logf("B's document listed the agent registered on A after %v (regenerate_delay 1s); ETag %s, generated_at %d on both", lag, ea, da.GeneratedAt)
	// A conditional GET with A's ETag is 304 on B.
	if r := do(t, http.MethodGet, b.base()+"/directory.json", nil, map[string]string{"If-None-Match": ea}); r.status != http.StatusNotModified {
		t.Errorf("If-None-Match with A's ETag on B: %d; want 304", r.status)
	}
}

// scenario10and11: one node (the directory's leader) subscribes to the
// relay; kill -9 of it makes the other subscribe, and no post is counted
// twice. The NIP-05 identifier of an agent is fetched once at its
// registration, then once per recheck pass cluster-wide: with
// nip05_recheck 1s it is due at every pass, and the schedule passes when a
// node takes the lease, then every minute (max(nip05_recheck/24, 1m), no
// shorter option) — so the test waits one pass period of the new leader.
func scenario10and11(t *testing.T, c *cluster) {
	a, b := c.a, c.b
	tr, ns := c.relay, c.nip05
	ag := newAgent(t)
	ns.set("bot", ag.pk)
	reqs := tr.reqCount()
	tr.resetMax()
	register(t, b, ag, "relayed", nostr.Tag{"nip05", "bot@" + nip05Host})
	if f := ns.fetchesOf("bot"); len(f) != 1 || f[0].node != "B" {
		t.Fatalf("NIP-05 fetches for the registration on B: %v; want one, by B", f)
	}
	var leaderAddr string
	lag := waitEvery(t, "a node subscribes to the relay for the new agent", 5*time.Millisecond, func() bool {
		leaderAddr = tr.subscribedFor(ag.pk, reqs)
		return leaderAddr != ""
	})
	leader := ownerOf(leaderAddr, a, b)
	if leader == nil {
		t.Fatalf("the relay's subscriber %s is neither node", leaderAddr)
	}
	follower := map[*node]*node{a: b, b: a}[leader]
	t.Logf("node %s subscribed for the new agent %v after its registration on B", leader.name, lag)
	if open := tr.openConns(); len(open) != 1 {
		t.Fatalf("%d directory connections to the relay: %v; want 1", len(open), open)
	}

	tr.publish(t, ag.sign(t, &nostr.Event{Kind: nostr.KindTextNote, CreatedAt: nostr.Now(), Content: "first post"}))
	for _, n := range []*node{a, b} {
		waitEvery(t, "node "+n.name+" counts the first post", 10*time.Millisecond, func() bool { return postsCounted(t, n, ag.pk) == 1 })
	}

	// kill -9 of the leader: the other node takes the lease once it
	// expires, subscribes, and re-checks the due identifier once.
	before := len(ns.fetchesOf("bot"))
	reqs = tr.reqCount()
	leader.kill9(t)
	defer func() {
		if leader.exited() {
			leader.start(t)
		}
	}()
	killed := time.Now()
	lag = waitEvery(t, "node "+follower.name+" subscribes after the leader was killed", 10*time.Millisecond, func() bool {
		r := tr.subscribedFor(ag.pk, reqs)
		return r != "" && ownerOf(r, a, b) == follower
	})
	t.Logf("node %s subscribed %v after node %s was killed (the lease lasts 10 s unrenewed)", follower.name, lag, leader.name)
	waitEvery(t, "the new leader re-checks the identifier when it takes the lease", 10*time.Millisecond, func() bool {
		return len(ns.fetchesOf("bot")) > before
	})
	takeover := ns.fetchesOf("bot")[before]
	if takeover.node != follower.name {
		t.Fatalf("the NIP-05 re-check after the kill came from node %s; want %s, the new leader", takeover.node, follower.name)
	}
	t.Logf("NIP-05 re-check by the new leader %v after the kill", takeover.at.Sub(killed))

	// The killed node comes back as a follower: it neither subscribes nor
	// re-checks (a node that did would fetch at once: the identifier is
	// due after 1 s).
	leader.start(t)
	tr.publish(t, ag.sign(t, &nostr.Event{Kind: nostr.KindTextNote, CreatedAt: nostr.Now(), Content: "second post"}))
	for _, n := range []*node{a, b} {
		waitEvery(t, "node "+n.name+" counts the second post", 10*time.Millisecond, func() bool {
			p := postsCounted(t, n, ag.pk)
			if p > 2 {
				t.Fatalf("node %s counts %d posts; 2 were published (the new leader's catch-up counted one twice?)", n.name, p)
			}
			return p == 2
		})
	}

	// One pass period of the new leader: its next pass fetches once more,
	// and every fetch since the kill is the new leader's (the NIP-05
	// server tells the nodes apart by their connections).
	start := time.Now()
	deadline := eventDeadline + 2*time.Minute
	for len(ns.fetchesOf("bot")) < before+2 {
		if time.Since(start) > deadline {
			t.Fatalf("the new leader did not re-check the identifier again within %v: fetches at %v", deadline, ns.fetchesOf("bot"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	f := ns.fetchesOf("bot")
	for _, x := range f[before:] {
		if x.node != follower.name {
			t.Fatalf("NIP-05 fetches after the kill: %v; want only node %s's, the new leader", f[before:], follower.name)
		}
	}
	if len(f) != before+2 {
		t.Fatalf("%d NIP-05 fetches (%v); want %d: the registration, one per pass of one leader", len(f), f, before+2)
	}
	t.Logf("NIP-05 fetches of the identifier: %d, the last two %v apart (one pass period of node %s)", len(f), f[len(f)-1].at.Sub(f[len(f)-2].at), follower.name)
	for _, n := range []*node{a, b} {
		if p := postsCounted(t, n, ag.pk); p != 2 {
			t.Errorf("node %s counts %d posts after the pass period; want 2", n.name, p)
		}
	}
	if open := tr.openConns(); len(open) != 1 || ownerOf(open[0], a, b) != follower {
		t.Errorf("directory connections to the relay at the end: %v; want one, of node %s", open, follower.name)
	}
	if m := tr.most(); m != 1 {
		t.Errorf("%d directory connections to the relay at once; want 1", m)
	}
}

// ---- saved items read back through the GraphQL API ----

var sortFields = []string{"createdAt", "updatedAt", "title", "wordCount", "readingProgress"}

// listIDs pages through every saved item of the token's member on n in
// the order of one sort field (each its own index, storage/library/itemkeys.go).
func listIDs(t *testing.T, n *node, token, field string) []string {
	t.Helper()
	var ids []string
	after := ""
	for page := 0; ; page++ {
		vars := map[string]any{"q": "in:inbox", "sort": map[string]any{"field": field, "direction": "desc"}}
		if after != "" {
			vars["after"] = after
		}
		g := gql(t, n, token, `query($q: String, $after: String, $sort: EntrySort) {
			entries(query: {first: 100, q: $q, after: $after, sort: $sort}) {
				edges { node { id } } pageInfo { endCursor hasNextPage } } }`, vars)
		if len(g.Errors) > 0 {
			t.Fatalf("entries by %s on %s: %+v", field, n.name, g.Errors)
		}
		var v struct {
			Entries struct {
				Edges []struct {
					Node struct{ ID string }
				}
				PageInfo struct {
					EndCursor   string
					HasNextPage bool
				}
			}
		}
		if err := json.Unmarshal(g.Data, &v); err != nil {
			t.Fatal(err)
		}
		for _, e := range v.Entries.Edges {
			ids = append(ids, e.Node.ID)
		}
		if !v.Entries.PageInfo.HasNextPage {
			return ids
		}
		after = v.Entries.PageInfo.EndCursor
		if page > 1000 {
			t.Fatalf("entries by %s on %s: more than 1000 pages", field, n.name)
		}
	}
}

// itemText is the readable text of item id on n, and its url ("" when the
// item is absent).
func itemText(t *testing.T, n *node, token, id string) (u, text string) {
	t.Helper()
	g := gql(t, n, token, `query($id: String!) { savedItem(query: {id: $id}) { originalUrl article { contentText } } }`, map[string]any{"id": id})
	if len(g.Errors) > 0 {
		t.Fatalf("savedItem %s on %s: %+v", id, n.name, g.Errors)
	}
	var v struct {
		SavedItem *struct {
			OriginalURL string
			Article     *struct{ ContentText string }
		}
	}
	if err := json.Unmarshal(g.Data, &v); err != nil {
		t.Fatal(err)
	}
	if v.SavedItem == nil {
		return "", ""
	}
	if v.SavedItem.Article == nil {
		return v.SavedItem.OriginalURL, ""
	}
	return v.SavedItem.OriginalURL, v.SavedItem.Article.ContentText
}

// scenario12: a backup from A (`caddy hearth backup`) while B saves items,
// restored (`caddy hearth restore`, Caddy stopped) into a fresh database
// that a third node serves: every item there has its content and its five
// index entries, and each writer's items are a prefix of what it wrote
// (one snapshot).
func scenario12(t *testing.T, c *cluster, password string) {
	a, b := c.a, c.b
	createMember(t, a, "hank", password)
	tok := apiToken(t, a, "hank")
	type saved struct{ id, url string }
	// Items before the backup, saved on A.
	var early []saved
	for i := range 40 {
		u := fmt.Sprintf("https://example.org/backup/early/%d", i)
		id, err := saveItem(a, tok, u)
		if err != nil {
			t.Fatal(err)
		}
		early = append(early, saved{id, u})
	}
	// Two writers on B, each saving one item after another.
	const writers = 2
	var mu sync.Mutex
	acked := make([][]saved, writers)
	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				u := fmt.Sprintf("https://example.org/backup/during/%d/%d", w, i)
				id, err := saveItem(b, tok, u)
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				acked[w] = append(acked[w], saved{id, u})
				mu.Unlock()
			}
		}()
	}
	count := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range acked {
			n += len(l)
		}
		return n
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	waitEvery(t, "B's writers save items", 5*time.Millisecond, func() bool { return count() >= 20 })
	mu.Lock()
	before := make([]int, writers) // acknowledged before the backup began
	for w := range writers {
		before[w] = len(acked[w])
	}
	mu.Unlock()
	file := filepath.Join(c.root, "during-writes.backup")
	if out, err := a.caddy("hearth", "backup", "--config", a.caddyfile(), "--output", file); err != nil {
		t.Fatalf("caddy hearth backup from A: %v\n%s", err, out)
	}
	during := count() - before[0] - before[1]
	waitEvery(t, "B's writers save items after the backup", 5*time.Millisecond, func() bool { return count() >= during+before[0]+before[1]+10 })
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("a writer on B: %v", err)
	}
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backup from A: %d bytes; B's writers acknowledged %d items before it began, %d while it ran", st.Size(), before[0]+before[1], during)

	// A third node on a fresh database of its own, restored with Caddy
	// stopped (the command writes into the database directly).
	nc := c.newNode(t, "C", nodeCPort, nodeCAdmin, pg.NewDatabase(t))
	if out, err := nc.caddy("hearth", "restore", "--config", nc.caddyfile(), "--input", file); err != nil {
		t.Fatalf("caddy hearth restore into a fresh database: %v\n%s", err, out)
	}
	nc.start(t)
	defer func() {
		nc.stop()
		if t.Failed() {
			t.Log(nc.logTail())
		}
	}()

	present := map[string]bool{}
	check := func(s saved) bool {
		u, text := itemText(t, nc, tok, s.id)
		switch {
		case u == "":
			return false
		case u != s.url:
			t.Fatalf("item %s on C: url %q; want %q", s.id, u, s.url)
		case !strings.Contains(text, "Saved on two nodes sharing one database."):
			t.Fatalf("item %s (%s) on C has no content: %q", s.id, s.url, text)
		}
		present[s.id] = true
		return true
	}
	for _, s := range early {
		if !check(s) {
			t.Fatalf("item %s saved before the backup is missing on C", s.url)
		}
	}
	restored := 0
	for w := range writers {
		// One snapshot: each writer's items on C are a prefix of what it
		// wrote, and at least those acknowledged before the backup began.
		n := 0
		for n < len(acked[w]) && check(acked[w][n]) {
			n++
		}
		for _, s := range acked[w][n:] {
			if check(s) {
				t.Fatalf("writer %d: item %s is on C but the writer's item %s, saved before it, is not", w, s.url, acked[w][n].url)
			}
		}
		if n < before[w] {
			t.Fatalf("writer %d: %d of its items on C; %d were acknowledged before the backup began", w, n, before[w])
		}
		restored += n
	}
	// Every item present has its entry in each of the five indexes, and
	// the indexes hold nothing else.
	for _, f := range sortFields {
		ids := listIDs(t, nc, tok, f)
		seen := map[string]bool{}
		for _, id := range ids {
			if !present[id] {
				t.Fatalf("entries by %s on C list %s, which is not a saved item there", f, id)
			}
			if seen[id] {
				t.Fatalf("entries by %s on C list %s twice", f, id)
			}
			seen[id] = true
		}
		if len(seen) != len(present) {
			t.Fatalf("entries by %s on C: %d items; %d are there", f, len(seen), len(present))
		}
	}
	// The URL index: saving a restored item's URL again updates it.
	for _, s := range []saved{early[0], acked[0][0]} {
		id, err := saveItem(nc, tok, s.url)
		if err != nil || id != s.id {
			t.Fatalf("saving %s again on C: id %q, %v; want the restored item %s", s.url, id, err, s.id)
		}
	}
	t.Logf("on the restored node: %d items (%d saved before the backup on A, %d of B's writers), each with content and 5 index entries", len(present), len(early), restored)
}

// scenario13: a restore through A's admin API while B serves: B drops its
// caches and serves the restored state; a restore sent to B meanwhile is
// refused as "restore running".
func scenario13(t *testing.T, c *cluster, oauthApp app, password string) {
	a, b := c.a, c.b
	tok := oauthToken(t, a, oauthApp, "alice", password)
	if st := verifyCredentials(t, b, tok); st != http.StatusOK {
		t.Fatalf("verify_credentials on B before the backup: %d", st)
	}
	file := filepath.Join(c.root, "before-changes.backup")
	if out, err := a.caddy("hearth", "backup", "--config", a.caddyfile(), "--output", file); err != nil {
		t.Fatalf("caddy hearth backup from A: %v\n%s", err, out)
	}
	// After the backup: the token revoked, a member and an agent added;
	// B serves all of it (and caches what it checks).
	revoke(t, a, oauthApp, tok)
	waitFor(t, "B refuses the token revoked on A", func() bool { return verifyCredentials(t, b, tok) == http.StatusUnauthorized })
	createMember(t, a, "jack", password)
	jackTok := apiToken(t, a, "jack")
	jackCookie := signIn(t, b, "jack", password)
	if g := gql(t, b, jackTok, `{ me { username } }`, nil); len(g.Errors) > 0 {
		t.Fatalf("me on B for the member created after the backup: %+v", g.Errors)
	}
	if st, _ := settingsStatus(t, b, jackCookie); st != http.StatusOK {
		t.Fatalf("settings on B for the member created after the backup: %d", st)
	}
	ag := newAgent(t)
	register(t, a, ag, "after-the-backup")
	waitEvery(t, "B's document lists the agent registered after the backup", 5*time.Millisecond, func() bool {
		d, _ := document(t, b)
		return d.lists(ag.pk)
	})

	// The restore through A; a restore sent to B meanwhile is refused. A
	// replaces the records in one transaction under the database's restore
	// lock (pgkv ReplaceAll); it is kept running here by a transaction of
	// the test that holds one record's row lock (as a slow write of
	// another node would), so B's restore comes while A's runs whatever
	// the size of the database: A's waits for the row when it deletes the
	// old records.
	ctx := context.Background()
	db := dbName(c.dsn)
	pc := pgAdmin(t)
	blocker, err := pgx.Connect(ctx, c.dsn+" application_name=cluster-test")
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close(ctx)
	btx, err := blocker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			if err := btx.Rollback(ctx); err != nil {
				t.Error(err)
			}
		}
	}
	defer release()
	var key []byte
	if err := btx.QueryRow(ctx, `SELECT k FROM hearth_kv ORDER BY k LIMIT 1 FOR UPDATE`).Scan(&key); err != nil {
		t.Fatal(err)
	}
	var outA string
	var errA error
	done := make(chan struct{})
	go func() {
		defer close(done)
		outA, errA = a.caddy("hearth", "restore", "--config", a.caddyfile(), "--input", file)
	}()
	waitEvery(t, "A's restore runs (holds the restore lock, waits for the row)", 5*time.Millisecond, func() bool {
		if isDone(done) {
			t.Fatalf("A's restore ended while a row it replaces was locked: %v\n%s", errA, outA)
		}
		// pgkv's lock: pg_try_advisory_xact_lock(hashtext('<prefix>_replace')),
		// a bigint key whose low 32 bits are objid (objsubid 1).
		var running bool
		if err := pc.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database
				WHERE l.locktype = 'advisory' AND l.granted AND d.datname = $1 AND l.objsubid = 1
				AND l.objid::bigint = (hashtext('hearth_replace')::bigint & 4294967295))
			AND EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND application_name = 'hearth-A' AND wait_event_type = 'Lock')`,
			db).Scan(&running); err != nil {
			t.Fatal(err)
		}
		return running
	})
	outB, errB := b.caddy("hearth", "restore", "--config", b.caddyfile(), "--input", file)
	if errB == nil || !strings.Contains(outB, "another restore is running") || !strings.Contains(outB, "409") {
		t.Fatalf("caddy hearth restore through B during A's: %v\n%s\nwant HTTP 409, another restore is running", errB, outB)
	}
	t.Logf("B's restore during A's: %s", lastLine(outB))
	release()
	<-done
	if errA != nil {
		t.Fatalf("caddy hearth restore through A: %v\n%s", errA, outA)
	}

	// B serves the restored state: the token valid in the backup works
	// again, the member created after it is gone, and so is the agent.
	lag := waitFor(t, "B accepts the token the restore brought back", func() bool { return verifyCredentials(t, b, tok) == http.StatusOK })
	t.Logf("B accepted the restored token %v after the restore", lag)
	waitFor(t, "B refuses the API token of the member the restore removed", func() bool {
		return gql(t, b, jackTok, `{ me { username } }`, nil).code() == "UNAUTHORIZED"
	})
	waitFor(t, "B refuses the session of the member the restore removed", func() bool {
		st, loc := settingsStatus(t, b, jackCookie)
		return st != http.StatusOK && strings.Contains(loc, "/auth/sign_in")
	})
	r := postForm(t, b.base()+"/auth/sign_in", url.Values{"username": {"jack"}, "password": {password}}, nil)
	if r.status != http.StatusUnauthorized {
		t.Fatalf("sign-in on B of the member the restore removed: %d; want 401", r.status)
	}
	waitEvery(t, "A and B serve one document without the agent the restore removed", 10*time.Millisecond, func() bool {
		da, ea := document(t, a)
		db, eb := document(t, b)
		return !da.lists(ag.pk) && !db.lists(ag.pk) && ea == eb
	})
	if st := verifyCredentials(t, a, tok); st != http.StatusOK {
		t.Fatalf("the restored token on A: %d", st)
	}
}

// lastLine is the last line of a command's output (its message, after
// Caddy's log lines).
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// scenario14: `caddy reload` of A, three times, while clients of A and B
// read, write and check tokens: no client sees an error, A keeps its one
// store (the status endpoint's store_opens, its LISTEN backend) and never
// has more connections than its pool's max_conns (10) and the listener.
func scenario14(t *testing.T, c *cluster, oauthApp app, password string) {
	a, b := c.a, c.b
	createMember(t, a, "kim", password)
	gtok := apiToken(t, a, "kim")
	otok := oauthToken(t, a, oauthApp, "kim", password)
	pc := pgAdmin(t)
	db := dbName(c.dsn)
	status := func() (opens int64) {
		r := do(t, http.MethodGet, a.adminURL()+"/hearth/status", nil, nil)
		var v struct {
			StoreOpens int64 `json:"store_opens"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &v) != nil {
			t.Fatalf("status of A: %d %s", r.status, r.body)
		}
		return v.StoreOpens
	}
	opens := status()
	lis := listenerPID(t, pc, db, a)
	if lis == 0 {
		t.Fatal("A has no LISTEN connection")
	}

	var stop atomic.Bool
	var requests, resets atomic.Int64
	retriedResets.Store(&resets)
	defer retriedResets.Store(nil)
	var mu sync.Mutex
	var failures []string
	fail := func(s string) {
		mu.Lock()
		if len(failures) < 20 {
			failures = append(failures, s)
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, n := range []*node{a, b} {
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					switch i % 3 {
					case 0:
						g, err := tryGQL(n.base(), "", gtok, `{ labels { id } }`, nil)
						if err != nil || len(g.Errors) > 0 {
							fail(fmt.Sprintf("node %s: GraphQL read: %v %+v", n.name, err, g.Errors))
						}
					case 1:
						r, err := tryDo(http.MethodGet, n.base()+"/api/v1/accounts/verify_credentials", nil, map[string]string{"Authorization": "Bearer " + otok})
						if err != nil || r.status != http.StatusOK {
							fail(fmt.Sprintf("node %s: verify_credentials: %v %d", n.name, err, r.status))
						}
					case 2:
						if _, err := saveItem(n, gtok, fmt.Sprintf("https://example.org/reload/%s/%d/%d", n.name, w, i)); err != nil {
							fail(fmt.Sprintf("node %s: save: %v", n.name, err))
						}
					}
					requests.Add(1)
				}
			}()
		}
	}
	var most atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if n, err := connections(pc, db, a); err == nil && int64(n) > most.Load() {
				most.Store(int64(n))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	progress := func(what string) {
		from := requests.Load()
		waitEvery(t, what, 5*time.Millisecond, func() bool { return requests.Load() >= from+60 })
	}
	progress("the clients make requests")
	for i := range 3 {
		if out, err := a.caddy("reload", "--config", a.caddyfile(), "--adapter", "caddyfile", "--force"); err != nil {
			t.Fatalf("caddy reload %d of A: %v\n%s", i+1, err, out)
		}
		progress(fmt.Sprintf("the clients make requests after reload %d", i+1))
	}
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("clients saw errors during the reloads of A:\n%s", strings.Join(failures, "\n"))
	}
	if o := status(); o != opens {
		t.Errorf("A opened its store %d times before the reloads and %d after; want no new opening", opens, o)
	}
	if p := listenerPID(t, pc, db, a); p != lis {
		t.Errorf("A's LISTEN backend was %d before the reloads and %d after; want the same connection", lis, p)
	}
	if m := most.Load(); m > 11 {
		t.Errorf("A had %d connections to the database at once; want at most max_conns 10 and the listener", m)
	}
	t.Logf("3 reloads of A under %d requests from clients of A and B, no error (%d requests sent again after their connection was reset before an answer); at most %d connections of A (max_conns 10 + listener)", requests.Load(), resets.Load(), most.Load())
}
