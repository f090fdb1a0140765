package directory

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"

	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/storage/agents"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// Several nodes on one PostgreSQL database (docs/several-nodes.md): two stores on one database stand for two Caddy
// processes, each with its own Directory of the same configuration.

// pgNodes is this package's PostgreSQL server for two nodes of one site
// (each package its own port, so packages may run at once).
var pgNodes = storagetest.NewPostgres(15437)

// twoNodes runs a Directory of one configuration on each store and
// returns them once one leads, the leader first.
func twoNodes(t *testing.T, opts Options) (leader, follower *env) {
	t.Helper()
	sa, sb := pgNodes.TwoNodes(t)
	return leaderOf(t, newEnvOn(t, sa, opts), newEnvOn(t, sb, opts))
}

// leaderOf waits until exactly one of the nodes leads and returns it first.
func leaderOf(t *testing.T, a, b *env) (leader, follower *env) {
	t.Helper()
	storagetest.Eventually(t, "one node leads", func() bool { return a.dir.leading.Load() != b.dir.leading.Load() })
	if a.dir.leading.Load() {
		return a, b
	}
	return b, a
}

// bothServeAlike waits until a and b serve the same document (one ETag),
// which lists the agent pk or not (listed).
func bothServeAlike(t *testing.T, a, b *env, what, pk string, listed bool) {
	t.Helper()
	storagetest.Eventually(t, what, func() bool {
		dA, etagA, _ := a.servedDocument()
		dB, etagB, _ := b.servedDocument()
		return listsAgent(dA, pk) == listed && listsAgent(dB, pk) == listed && etagA == etagB
	})
}

// failOver stops the leader and waits until the follower leads.
func failOver(t *testing.T, leader, follower *env) {
	t.Helper()
	leader.dir.Close()
	storagetest.Eventually(t, "the other node leads", func() bool { return follower.dir.leading.Load() })
}

// waitListed waits until the document e serves lists the agent pk.
func (e *env) waitListed(what, pk string) {
	e.t.Helper()
	storagetest.Eventually(e.t, what, func() bool {
		doc, _, _ := e.servedDocument()
		return listsAgent(doc, pk)
	})
}

func listsAgent(doc Document, pk string) bool {
	for _, a := range doc.Agents {
		if a.Pubkey == pk {
			return true
		}
	}
	return false
}

// An agent registered through the node that does not lead appears in the
// leader's document, and both nodes serve the same bytes and ETag
// (scenario 9). The schedule is an hour: only the published change and
// the published document can bring it there.
func TestTwoNodesServeOneDocument(t *testing.T) {
	c := newClock()
	leader, follower := twoNodes(t, Options{Now: c.Now})
	agent := newAgent(t)
	follower.mustRegister(regEvent(t, agent, c.Now(), "via-the-follower"))

	leader.waitListed("the leader's document lists the agent", agent.pk)
	storagetest.Eventually(t, "both nodes serve the same document", func() bool {
		_, etagL, bodyL := leader.servedDocument()
		docF, etagF, bodyF := follower.servedDocument()
		return listsAgent(docF, agent.pk) && etagL == etagF && bytes.Equal(bodyL, bodyF)
	})
	docL, etag, _ := leader.servedDocument()
	docF, _, _ := follower.servedDocument()
	if docL.GeneratedAt != docF.GeneratedAt {
		t.Errorf("generated_at %d on the leader, %d on the other node", docL.GeneratedAt, docF.GeneratedAt)
	}
	// A conditional GET with the leader's ETag is 304 on the other node.
	if r := follower.do(http.MethodGet, DefaultPath, nil, "If-None-Match", etag); r.status != http.StatusNotModified {
		t.Errorf("If-None-Match with the leader's ETag on the other node: %d", r.status)
	}
	if n := follower.dir.leads.Load(); n != 0 {
		t.Errorf("the other node led %d times", n)
	}

	// A ban through the other node leaves both documents without it.
	if _, err := follower.dir.Ban(t.Context(), agent.npub(), "test"); err != nil {
		t.Fatal(err)
	}
	bothServeAlike(t, leader, follower, "the ban reaches both documents alike", agent.pk, false)
}

// When the leader stops, the other node takes the lease and builds the
// document itself (a registration made meanwhile included).
func TestDirectoryLeaseFailsOver(t *testing.T) {
	c := newClock()
	leader, follower := twoNodes(t, Options{Now: c.Now})
	failOver(t, leader, follower)
	agent := newAgent(t)
	follower.mustRegister(regEvent(t, agent, c.Now(), "after-failover"))
	follower.waitListed("the new leader's document lists the agent", agent.pk)
}

// When the other node takes the lead, it builds the document again from
// the store: an unchanged directory keeps its bytes, ETag and generated_at,
// so consumers download nothing again.
func TestLeaderChangeKeepsETagAndGeneratedAt(t *testing.T) {
	c := newClock()
	leader, follower := twoNodes(t, Options{Now: c.Now})
	agent := newAgent(t)
	leader.mustRegister(regEvent(t, agent, c.Now(), "steady"))
	leader.waitListed("the leader's document lists the agent", agent.pk)
	doc1, etag1, body1 := leader.servedDocument()
	storagetest.Eventually(t, "the other node serves the leader's document", func() bool {
		_, etag, _ := follower.servedDocument()
		return etag == etag1
	})
	c.Advance(time.Hour)
	builds := follower.dir.leads.Load()
	leader.dir.Close()
	storagetest.Eventually(t, "the other node leads", func() bool { return follower.dir.leads.Load() > builds })
	if err := follower.dir.Rebuild(t.Context()); err != nil { // its own build, from the store
		t.Fatal(err)
	}
	doc2, etag2, body2 := follower.servedDocument()
	if doc2.GeneratedAt != doc1.GeneratedAt || etag2 != etag1 || !bytes.Equal(body1, body2) {
		t.Errorf("after the leader changed: generated_at %d -> %d, ETag %s -> %s", doc1.GeneratedAt, doc2.GeneratedAt, etag1, etag2)
	}
}

// subscriberRelay is a test relay that counts the directories' connections
// (by their User-Agent) open at once.
type subscriberRelay struct {
	*testRelay
	subs    sync.Map // *khatru.WebSocket of a directory
	maxSubs atomic.Int32
	dials   atomic.Int32
}

func startSubscriberRelay(t *testing.T) *subscriberRelay {
	sr := &subscriberRelay{testRelay: newTestRelay(t)}
	sr.relay.OnConnect = append(sr.relay.OnConnect, func(ctx context.Context) {
		ws := khatru.GetConnection(ctx)
		if ws.Request == nil || ws.Request.Header.Get("User-Agent") != safefetch.DefaultUserAgent {
			return // not a directory
		}
		sr.dials.Add(1)
		sr.subs.Store(ws, true)
		n := int32(0)
		for range sr.subs.Range {
			n++
		}
		for {
			m := sr.maxSubs.Load()
			if n <= m || sr.maxSubs.CompareAndSwap(m, n) {
				break
			}
		}
	})
	sr.relay.OnDisconnect = append(sr.relay.OnDisconnect, func(ctx context.Context) { sr.subs.Delete(khatru.GetConnection(ctx)) })
	sr.serve()
	return sr
}

// One node subscribes to the relay; when it stops, the other subscribes,
// reads the relay again from the registration, and counts no post twice
// (scenario 10).
func TestOneNodeSubscribesToRelays(t *testing.T) {
	tr := startSubscriberRelay(t)
	opts := Options{
		Relays:        []string{tr.url()},
		AllowPrivate:  true,
		RelayRetryMin: 20 * time.Millisecond,
		RelayRetryMax: 200 * time.Millisecond,
		Now:           time.Now,
	}
	leader, follower := twoNodes(t, opts)
	agent := newAgent(t)
	live := leader.dir.relayLive.Load()
	follower.mustRegister(regEvent(t, agent, time.Now().Add(-time.Minute), "relayed"))
	waitLive(t, leader, live)
	tr.publish(note(t, agent, time.Now(), "first"))
	storagetest.Eventually(t, "the post is counted", func() bool { return postsOf(t, leader.dir, agent.pk) == 1 })
	if m := tr.maxSubs.Load(); m != 1 {
		t.Errorf("%d directory connections to the relay at once, want 1", m)
	}
	if n := follower.dir.relayLive.Load(); n != 0 {
		t.Errorf("the other node's subscription went live %d times", n)
	}

	dials := tr.dials.Load()
	failOver(t, leader, follower)
	waitLive(t, follower, 0)
	if tr.dials.Load() <= dials {
		t.Fatal("the new leader went live without connecting")
	}
	// Its catch-up read the first post again (from the registration):
	// counted once.
	if n := postsOf(t, follower.dir, agent.pk); n != 1 {
		t.Fatalf("posts after the new leader's catch-up = %d, want 1", n)
	}
	tr.publish(note(t, agent, time.Now(), "second"))
	storagetest.Eventually(t, "the new leader counts the next post", func() bool { return postsOf(t, follower.dir, agent.pk) == 2 })
	if m := tr.maxSubs.Load(); m != 1 {
		t.Errorf("%d directory connections to the relay at once, want 1", m)
	}
}

// A due NIP-05 identifier is fetched once across the nodes, by the leader;
// after a fail-over, by the new leader, once again (scenario 11).
func TestNIP05RecheckedOnceAcrossNodes(t *testing.T) {
	dom := newNIP05Domain(t)
	c := newClock()
	opts := Options{Fetcher: dom.fetcher(), NIP05CheckEvery: 10 * time.Millisecond, Now: c.Now}
	leader, follower := twoNodes(t, opts)
	agent := newAgent(t)
	dom.set("bot", agent.pk)
	follower.mustRegister(regEvent(t, agent, c.Now(), "bot", nostr.Tag{"nip05", "bot@example.com"}))
	if n := dom.requests.Load(); n != 1 {
		t.Fatalf("%d requests for the registration, want 1", n)
	}
	c.Advance(25 * time.Hour) // due on both nodes' clock
	passes := leader.dir.nip05Passes.Load()
	storagetest.Eventually(t, "the leader re-checks", func() bool { return dom.requests.Load() >= 2 })
	// Passes that began after the check: had the other node checked too,
	// it would have by now.
	after := leader.dir.nip05Passes.Load()
	storagetest.Eventually(t, "the leader makes further passes", func() bool { return leader.dir.nip05Passes.Load() >= max(after, passes)+3 })
	if n := dom.requests.Load(); n != 2 {
		t.Errorf("%d requests after one recheck period, want 2", n)
	}
	if n := follower.dir.nip05Passes.Load(); n != 0 {
		t.Errorf("the other node made %d recheck passes", n)
	}

	failOver(t, leader, follower)
	storagetest.Eventually(t, "the new leader makes a pass", func() bool { return follower.dir.nip05Passes.Load() > 0 })
	if n := dom.requests.Load(); n != 2 {
		t.Errorf("%d requests before the next recheck period, want 2", n)
	}
	c.Advance(25 * time.Hour)
	storagetest.Eventually(t, "the new leader re-checks", func() bool { return dom.requests.Load() >= 3 })
	after = follower.dir.nip05Passes.Load()
	storagetest.Eventually(t, "the new leader makes further passes", func() bool { return follower.dir.nip05Passes.Load() >= after+3 })
	if n := dom.requests.Load(); n != 3 {
		t.Errorf("%d requests after the second recheck period, want 3", n)
	}
}

// A restore changes the records under the directories and may bring back a
// published document of another time: StoreChanged, as the admin restore
// calls it on one node, makes the leader rebuild and publish again, and
// every node serves the leader's document (scenario 13).
func TestStoreChangedReachesEveryNode(t *testing.T) {
	c := newClock()
	leader, follower := twoNodes(t, Options{Now: c.Now})
	agent := newAgent(t)
	leader.mustRegister(regEvent(t, agent, c.Now(), "restored-away"))
	bothServeAlike(t, leader, follower, "both nodes list the agent", agent.pk, true)

	// A restore of the same agents that brings back the published
	// document of another time: the leader's content is unchanged, and
	// it publishes again all the same.
	old := []byte(`{"version":2,"generated_at":1,"agents":[]}` + "\n")
	if _, err := agents.Of(follower.store).PublishDocument(t.Context(), follower.dir.id, &agents.PublishedDirectory{ETag: `"old"`, GeneratedAt: 1, Body: old}); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, "the other node serves the old document", func() bool {
		_, etag, _ := follower.servedDocument()
		return etag == `"old"`
	})
	if err := StoreChanged(t.Context(), follower.store); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, "both nodes serve the leader's document again", func() bool {
		dL, etagL, _ := leader.servedDocument()
		dF, etagF, _ := follower.servedDocument()
		return listsAgent(dF, agent.pk) && etagL == etagF && dF.GeneratedAt == dL.GeneratedAt
	})

	// A restore that changes the agents (here: one banned in the records
	// behind the directories' backs).
	if err := agents.Of(follower.store).Ban(t.Context(), agent.pk, "restored", c.Now()); err != nil {
		t.Fatal(err)
	}
	if err := StoreChanged(t.Context(), follower.store); err != nil {
		t.Fatal(err)
	}
	bothServeAlike(t, leader, follower, "both nodes serve the leader's new document", agent.pk, false)
}

// On Badger, two handlers of one configuration in one process (a reload's
// old and new config, two sites) share the leader's document in memory: an
// agent registered through the one that does not lead is served by both
// with one ETag.
func TestOneProcessSharesTheDocument(t *testing.T) {
	c := newClock()
	store := openStore(t)
	a := newEnvOn(t, store, Options{Now: c.Now})
	b := newEnvOn(t, store, Options{Now: c.Now})
	leader, follower := leaderOf(t, a, b)
	agent := newAgent(t)
	follower.mustRegister(regEvent(t, agent, c.Now(), "in-process"))
	storagetest.Eventually(t, "both handlers serve the document with the agent", func() bool {
		dL, etagL, bodyL := leader.servedDocument()
		dF, etagF, bodyF := follower.servedDocument()
		return listsAgent(dL, agent.pk) && listsAgent(dF, agent.pk) && etagL == etagF && bytes.Equal(bodyL, bodyF)
	})
	if v, err := agents.Of(store).PublishedVersion(t.Context(), leader.dir.id); err != nil || v != "" {
		t.Errorf("the document was written to the Badger store: version %q, %v", v, err)
	}
	// The leader closes (the old config of a reload): the other takes over.
	leader.dir.Close()
	storagetest.Eventually(t, "the other handler leads", func() bool { return follower.dir.leading.Load() })
	other := newAgent(t)
	follower.mustRegister(regEvent(t, other, c.Now(), "after-reload"))
	follower.waitListed("the new leader's document lists the agent", other.pk)
}
