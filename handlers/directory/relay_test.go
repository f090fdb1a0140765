package directory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"

	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/internal/testrelay"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// testRelay is a khatru relay on loopback that can go down and come back
// on the same address.
type testRelay struct {
	t        *testing.T
	relay    *khatru.Relay
	addr     string
	connects atomic.Int32
	// sessions is the number of websocket sessions khatru saw begin;
	// open holds those it has not seen end (its disconnect hook can run
	// twice for one session).
	sessions atomic.Int32
	open     sync.Map
	store    testrelay.Events // what the relay stores

	mu    sync.Mutex
	srv   *httptest.Server
	conns []net.Conn
}

func startRelay(t *testing.T) *testRelay {
	tr := newTestRelay(t)
	tr.serve()
	return tr
}

func (tr *testRelay) serve() {
	tr.store.Attach(tr.relay)
	tr.listen("127.0.0.1:0")
	tr.t.Cleanup(tr.stop)
}

func newTestRelay(t *testing.T) *testRelay {
	tr := &testRelay{t: t, relay: khatru.NewRelay()}
	tr.relay.OnConnect = append(tr.relay.OnConnect, func(ctx context.Context) {
		tr.sessions.Add(1)
		tr.open.Store(khatru.GetConnection(ctx), true)
	})
	tr.relay.OnDisconnect = append(tr.relay.OnDisconnect, func(ctx context.Context) { tr.open.Delete(khatru.GetConnection(ctx)) })
	return tr
}

// startCappedRelay is a khatru relay whose store answers a filter with at
// most its 500 newest events (newest first), as relay stores commonly do
// (testrelay.Events.Cap).
func startCappedRelay(t *testing.T) *testRelay {
	tr := newTestRelay(t)
	tr.store.Cap = 500
	tr.serve()
	return tr
}

// trackingListener records connections so stop can cut websockets too
// (http.Server.Close leaves hijacked connections open).
type trackingListener struct {
	net.Listener
	tr *testRelay
}

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.tr.connects.Add(1)
		l.tr.mu.Lock()
		l.tr.conns = append(l.tr.conns, c)
		l.tr.mu.Unlock()
	}
	return c, err
}

func (tr *testRelay) listen(addr string) {
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the old socket may linger an instant
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		tr.t.Fatalf("listen %s: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(tr.relay)
	srv.Listener.Close()
	srv.Listener = trackingListener{ln, tr}
	srv.Start()
	tr.mu.Lock()
	tr.srv, tr.addr = srv, ln.Addr().String()
	tr.mu.Unlock()
}

func (tr *testRelay) url() string { return "ws://" + tr.addr }

// stop takes the relay down: listener and every connection.
func (tr *testRelay) stop() {
	tr.mu.Lock()
	srv, conns := tr.srv, tr.conns
	tr.srv, tr.conns = nil, nil
	tr.mu.Unlock()
	if srv == nil {
		return
	}
	for _, c := range conns {
		c.Close()
	}
	srv.Close()
}

func (tr *testRelay) restart() { tr.listen(tr.addr) }

// publish hands events to the relay as a client's EVENT reaches it
// (testrelay.Publish: khatru's own pipeline, the broadcast race-free).
func (tr *testRelay) publish(evts ...*nostr.Event) {
	tr.t.Helper()
	testrelay.Publish(tr.t, tr.relay, evts...)
}

// relayEnv is a Directory reading tr, on the real clock (relay events carry
// real times).
func relayEnv(t *testing.T, store *storage.Store, tr *testRelay) *env {
	return relayEnvAt(t, store, tr, time.Now)
}

// relayEnvAt is relayEnv on the clock now.
func relayEnvAt(t *testing.T, store *storage.Store, tr *testRelay, now func() time.Time) *env {
	return newEnvOn(t, store, Options{
		Relays:        []string{tr.url()},
		AllowPrivate:  true,
		RelayRetryMin: 20 * time.Millisecond,
		RelayRetryMax: 200 * time.Millisecond,
		Now:           now,
	})
}

// waitLive waits until a relay subscription of e's directory went live
// after the count was `after`.
func waitLive(t testing.TB, e *env, after int64) {
	t.Helper()
	storagetest.Eventually(t, "the relay subscription is live", func() bool { return e.dir.relayLive.Load() > after })
}

// registerLive registers evt through e and waits until e's relay
// subscription, restarted with the new author, is live.
func (e *env) registerLive(evt *nostr.Event) {
	e.t.Helper()
	live := e.dir.relayLive.Load()
	e.mustRegister(evt)
	waitLive(e.t, e, live)
}

func postsOf(t *testing.T, d *Directory, pk string) int64 {
	list, err := d.Agents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Pubkey == pk {
			return s.Posts
		}
	}
	return -1
}

func TestRelayPostsOfRegisteredAgentsAreCounted(t *testing.T) {
	tr := startRelay(t)
	e := relayEnv(t, openStore(t), tr)
	a, b := newAgent(t), newAgent(t)

	// Registered after the directory started: the subscription restarts
	// with the new author.
	e.registerLive(regEvent(t, a, time.Now(), "listener"))
	tr.publish(note(t, a, time.Now(), "on the relay"))
	storagetest.Eventually(t, "the relay post is counted", func() bool { return postsOf(t, e.dir, a.pk) == 1 })
	if en := e.mustEntry(a.pk); en.ActiveDays != 1 {
		t.Errorf("active_days = %d", en.ActiveDays)
	}

	// A second agent, and a post published before it registered but dated
	// after: read from the relay's stored events.
	regB := regEvent(t, b, time.Now().Add(-time.Second), "second")
	tr.publish(note(t, b, time.Now(), "stored before the subscription"))
	e.mustRegister(regB)
	storagetest.Eventually(t, "the second agent's post is counted", func() bool { return postsOf(t, e.dir, b.pk) == 1 })
}

func TestRelayResumesFromItsCursorAfterARestart(t *testing.T) {
	tr := startRelay(t)
	store := openStore(t)
	first := relayEnv(t, store, tr)
	a := newAgent(t)
	first.registerLive(regEvent(t, a, time.Now(), "persistent"))
	p1 := note(t, a, time.Now(), "before the restart")
	tr.publish(p1)
	storagetest.Eventually(t, "the first post is counted", func() bool { return postsOf(t, first.dir, a.pk) == 1 })
	first.dir.Close()
	first.srv.Close()

	// Published while Hearth was down.
	tr.publish(note(t, a, time.Now(), "while hearth was down"))
	second := relayEnv(t, store, tr)
	storagetest.Eventually(t, "the missed post is counted", func() bool { return postsOf(t, second.dir, a.pk) == 2 })
}

func TestRelayReconnectsAfterTheRelayGoesDown(t *testing.T) {
	tr := startRelay(t)
	e := relayEnv(t, openStore(t), tr)
	a := newAgent(t)
	e.registerLive(regEvent(t, a, time.Now(), "patient"))
	tr.publish(note(t, a, time.Now(), "first"))
	storagetest.Eventually(t, "the first post is counted", func() bool { return postsOf(t, e.dir, a.pk) == 1 })

	live := e.dir.relayLive.Load()
	tr.stop()
	tr.restart()
	waitLive(t, e, live)
	tr.publish(note(t, a, time.Now(), "after the outage"))
	storagetest.Eventually(t, "the post after the outage is counted", func() bool { return postsOf(t, e.dir, a.pk) == 2 })
	// The directory connected before the outage and again after it.
	if n := tr.connects.Load(); n < 2 {
		t.Fatalf("the relay saw %d connections, want the directory's two", n)
	}
}

func TestRelayOnPrivateAddressRefusedByDefault(t *testing.T) {
	tr := startRelay(t)
	e := newEnv(t, Options{}) // AllowPrivate false, no relays started
	e.mustRegister(regEvent(t, newAgent(t), e.now(), "someone"))
	_, err := e.dir.subscribeRelay(context.Background(), nostr.NormalizeURL(tr.url()), make(chan struct{}), relayAuthorsPerFilter)
	if !errors.Is(err, safefetch.ErrBlockedAddress) {
		t.Errorf("err = %v, want a blocked address", err)
	}
	if n := tr.connects.Load(); n != 0 {
		t.Errorf("the loopback relay got %d connections", n)
	}
}

func TestCloseStopsRelaySubscriptions(t *testing.T) {
	tr := startRelay(t)
	e := relayEnv(t, openStore(t), tr)
	e.mustRegister(regEvent(t, newAgent(t), time.Now(), "closer"))
	storagetest.Eventually(t, "the directory connects", func() bool { return tr.connects.Load() > 0 })
	done := make(chan struct{})
	go func() { e.dir.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Close did not return")
	}
	storagetest.Eventually(t, "the relay sees every connection closed", func() bool {
		open := 0
		for range tr.open.Range {
			open++
		}
		return tr.sessions.Load() > 0 && open == 0
	})
}

func TestCheckRelayURL(t *testing.T) {
	for _, ok := range []string{"wss://relay.example", "ws://127.0.0.1:7777", "wss://relay.example/path"} {
		if err := checkRelayURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"https://relay.example", "relay.example", "wss://", "wss://u@relay.example", "wss://relay.example/#x", "wss://" + strings.Repeat("a", 3000)} {
		if err := checkRelayURL(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestRelayCatchUpPagesBackPastTheRelayCap: while Hearth is down, a busy
// agent posts 600 notes and a quiet one 1, before them. The relay answers a
// filter with its 500 newest events; catch-up pages back with until to the
// cursor, so neither the quiet agent's post nor the busy agent's oldest
// 100 are lost (before: the quiet agent kept 0, the busy one 500 of 600).
func TestRelayCatchUpPagesBackPastTheRelayCap(t *testing.T) {
	tr := startCappedRelay(t)
	store := openStore(t)
	first := relayEnv(t, store, tr)
	busy, quiet := newAgent(t), newAgent(t)
	reg := time.Now().Add(-14 * time.Minute) // inside the registration window
	first.mustRegister(regEvent(t, busy, reg, "busy"))
	first.registerLive(regEvent(t, quiet, reg, "quiet"))
	tr.publish(note(t, busy, reg.Add(time.Second), "seen before the downtime"))
	storagetest.Eventually(t, "the first post is counted", func() bool { return postsOf(t, first.dir, busy.pk) == 1 })
	first.dir.Close()
	first.srv.Close()

	// While Hearth is down.
	down := []*nostr.Event{note(t, quiet, reg.Add(2*time.Second), "the quiet agent's only post")}
	for i := range 600 {
		down = append(down, note(t, busy, reg.Add(time.Duration(3+i)*time.Second), fmt.Sprintf("busy post %d", i)))
	}
	tr.publish(down...)

	second := relayEnv(t, store, tr)
	storagetest.Eventually(t, "every post made during the downtime is counted", func() bool {
		return postsOf(t, second.dir, busy.pk) == 601 && postsOf(t, second.dir, quiet.pk) == 1
	})
	// Live posts still arrive after the catch-up.
	waitLive(t, second, 0)
	tr.publish(note(t, quiet, time.Now(), "live"))
	storagetest.Eventually(t, "a live post after the catch-up is counted", func() bool { return postsOf(t, second.dir, quiet.pk) == 2 })
}
