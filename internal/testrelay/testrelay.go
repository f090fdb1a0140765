// Package testrelay is what the tests' khatru relays (fiatjaf/khatru
// v0.19.1) share: an event store in memory, a publish that hands events
// to a relay the way khatru handles a client's EVENT without meeting
// khatru's unlocked broadcast, and new keys for the agents that sign them. Used by the tests of handlers/directory,
// caddymodule and interop/cluster; nothing else imports it.
package testrelay

import (
	"cmp"
	"context"
	"reflect"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
)

// NewKey makes a Nostr key pair: the secret key and its public key, both
// in hex.
func NewKey(t testing.TB) (sk, pk string) {
	t.Helper()
	sk = nostr.GeneratePrivateKey()
	pk, err := nostr.GetPublicKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return sk, pk
}

// Events is a relay's store in memory (its StoreEvent and QueryEvents),
// safe for concurrent use. fiatjaf/eventstore's slicestore is not, hence
// this.
type Events struct {
	// Cap, when positive, makes a filter answer at most its Cap newest
	// events (newest first), as relay stores commonly do: eventstore's
	// slicestore, lmdb and badger backends all default to MaxLimit 500
	// (eventstore v0.16.2 slicestore/lib.go).
	Cap int

	mu     sync.Mutex
	events []*nostr.Event
}

// Attach makes e the store of relay.
func (e *Events) Attach(relay *khatru.Relay) {
	relay.StoreEvent = append(relay.StoreEvent, func(_ context.Context, evt *nostr.Event) error {
		e.Add(evt)
		return nil
	})
	relay.QueryEvents = append(relay.QueryEvents, e.query)
}

// Add stores evt without broadcasting it: subscribers read it when they
// next query.
func (e *Events) Add(evt *nostr.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, evt)
}

func (e *Events) query(_ context.Context, f nostr.Filter) (chan *nostr.Event, error) {
	e.mu.Lock()
	var match []*nostr.Event
	for _, evt := range e.events {
		if f.Matches(evt) {
			match = append(match, evt)
		}
	}
	e.mu.Unlock()
	if e.Cap > 0 {
		slices.SortStableFunc(match, func(a, b *nostr.Event) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
		limit := e.Cap
		if f.Limit > 0 && f.Limit < limit {
			limit = f.Limit
		}
		match = match[:min(len(match), limit)]
	}
	ch := make(chan *nostr.Event, len(match))
	for _, evt := range match {
		ch <- evt
	}
	close(ch)
	return ch, nil
}

// Publish hands evts to relay as khatru does with a client's EVENT
// (handlers.go: AddEvent's pipeline of reject hooks, deletion check and
// store, then a broadcast to the live subscriptions), the broadcast under
// khatru's own listener lock.
//
// khatru v0.19.1 broadcasts by reading its listener list without that lock
// (listener.go notifyListeners), while a REQ, a CLOSE or a session's end
// changes the list under it (addListener, removeListenerId,
// removeClientAndListeners, each in its own goroutine per message);
// unchanged at fiatjaf/khatru 9f99b98. A test that publishes while a
// directory changes its subscriptions (a catch-up page closed, a restart, a
// lease handed over) met that race under -race (CI,
// TestRelayCatchUpPagesBackPastTheRelayCap), however long it waited first.
// The lock is unexported, hence reflect; a khatru without it fails here.
func Publish(t testing.TB, relay *khatru.Relay, evts ...*nostr.Event) {
	t.Helper()
	v := reflect.ValueOf(relay).Elem().FieldByName("clientsMutex")
	if !v.IsValid() || v.Type() != reflect.TypeFor[sync.Mutex]() {
		t.Fatal("khatru.Relay has no clientsMutex: testrelay.Publish needs updating for this khatru")
	}
	listeners := (*sync.Mutex)(unsafe.Pointer(v.UnsafeAddr()))
	for _, evt := range evts {
		if ok, err := evt.CheckSignature(); !ok {
			t.Fatalf("publish %s: bad signature (%v)", evt.ID, err)
		}
		if skip, err := relay.AddEvent(context.Background(), evt); err != nil || skip {
			t.Fatalf("relay refused %s: %v", evt.ID, err)
		}
		listeners.Lock()
		relay.BroadcastEvent(evt)
		listeners.Unlock()
	}
}
