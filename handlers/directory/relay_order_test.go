package directory

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// The notes of an agent dated at or after its registration count whatever
// the order in which registration, subscription restarts and publication
// happen, with another agent keeping the relay's cursor at the present.
func TestRelayCountsNotesWhateverTheOrder(t *testing.T) {
	tr := startRelay(t)
	e := relayEnv(t, openStore(t), tr)
	busy := newAgent(t)
	e.registerLive(regEvent(t, busy, time.Now(), "busy"))
	tr.publish(note(t, busy, time.Now(), "now"))
	storagetest.Eventually(t, "the busy agent's note", func() bool { return postsOf(t, e.dir, busy.pk) == 1 })

	reg := time.Now().Add(-14 * time.Minute) // inside the registration window
	// Publish, then register.
	early := newAgent(t)
	for i := range 5 {
		tr.publish(note(t, early, reg.Add(time.Duration(i+1)*time.Second), fmt.Sprintf("before the registration reached us %d", i)))
	}
	e.mustRegister(regEvent(t, early, reg, "early"))
	// Register, then publish at once (the subscription restarts meanwhile)
	// 31 notes within 3 minutes, dated in the past but after the
	// registration: the burst flag.
	late := newAgent(t)
	e.mustRegister(regEvent(t, late, reg, "late"))
	for i := range 31 {
		tr.publish(note(t, late, reg.Add(time.Duration(i)*5*time.Second), fmt.Sprintf("burst %d", i)))
	}
	storagetest.Eventually(t, "every note of both agents", func() bool {
		return postsOf(t, e.dir, early.pk) == 5 && postsOf(t, e.dir, late.pk) == 31
	})
	if en := e.mustEntry(late.pk); !slices.Contains(en.Flags, FlagBurst) {
		t.Errorf("31 notes in 3 minutes: flags %v, want burst", en.Flags)
	}
}

// registerMany registers n agents through Register (no HTTP rate limit) and
// returns them in registration order.
func registerMany(t *testing.T, e *env, n int, at time.Time) []agentKey {
	t.Helper()
	keys := make([]agentKey, n)
	for i := range keys {
		keys[i] = newAgent(t)
		if _, _, err := e.dir.Register(t.Context(), mustJSON(t, regEvent(t, keys[i], at, fmt.Sprintf("agent %d", i)))); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// With more registered agents than one filter carries, every agent's notes
// are read: the first's, the last's, one registered later.
func TestRelayReadsEveryAuthorOfManyFilters(t *testing.T) {
	tr := startRelay(t)
	e := relayEnv(t, openStore(t), tr)
	keys := registerMany(t, e, 1100, time.Now())
	storagetest.Eventually(t, "the subscription for 1,100 authors", func() bool { return e.dir.relayLive.Load() > 0 })
	first, last := keys[0], keys[len(keys)-1]
	newcomer := newAgent(t)
	e.mustRegister(regEvent(t, newcomer, time.Now(), "newcomer"))
	tr.publish(note(t, first, time.Now(), "first"), note(t, last, time.Now(), "last"), note(t, newcomer, time.Now(), "newcomer"))
	storagetest.Eventually(t, "the notes of the first, the last and a later agent", func() bool {
		return postsOf(t, e.dir, first.pk) == 1 && postsOf(t, e.dir, last.pk) == 1 && postsOf(t, e.dir, newcomer.pk) == 1
	})
}

// After downtime each filter pages back to the registration, however many
// newer events the relay holds for another filter: with 1,100 agents
// (three filters), a busy agent's 600 notes and a quiet one's single note,
// on a relay answering at most 500 events per filter. The directory's clock
// runs three hours ahead, so the last note read before the downtime is
// dated three hours after the notes published during it (which a catch-up
// from the last date read, less any overlap under three hours, misses).
func TestRelayCatchUpPerFilterAfterDowntime(t *testing.T) {
	tr := startCappedRelay(t)
	store := openStore(t)
	var clk offsetClock
	first := relayEnvAt(t, store, tr, clk.Now)
	// A minute back, so that 1,100 registrations stay inside the
	// registration window however slowly they run (-race).
	reg := time.Now().Add(-time.Minute)
	keys := registerMany(t, first, 1100, reg)
	storagetest.Eventually(t, "the subscription for 1,100 authors", func() bool { return first.dir.relayLive.Load() > 0 })
	clk.off.Store(int64(3 * time.Hour))
	tr.publish(note(t, keys[0], clk.Now(), "read before the downtime"))
	storagetest.Eventually(t, "the first note", func() bool { return postsOf(t, first.dir, keys[0].pk) == 1 })
	first.dir.Close()
	first.srv.Close()

	sorted := slices.Clone(keys[1:])
	slices.SortFunc(sorted, func(a, b agentKey) int { return stringsCompare(a.pk, b.pk) })
	quiet, busy := sorted[0], sorted[len(sorted)-1]
	down := []*nostr.Event{note(t, quiet, reg.Add(2*time.Second), "the quiet agent's only post")}
	for i := range 600 {
		down = append(down, note(t, busy, reg.Add(time.Duration(3+i)*time.Second), fmt.Sprintf("busy post %d", i)))
	}
	// Others in every filter keep the relay busy with newer notes.
	for i, k := range sorted[1 : len(sorted)-1] {
		if i%5 == 0 {
			down = append(down, note(t, k, clk.Now(), "newer"))
		}
	}
	tr.publish(down...)
	second := relayEnvAt(t, store, tr, clk.Now)
	storagetest.Eventually(t, "every note made during the downtime", func() bool {
		return postsOf(t, second.dir, busy.pk) == 600 && postsOf(t, second.dir, quiet.pk) == 1
	})
	if n := postsOf(t, second.dir, keys[0].pk); n != 1 {
		t.Errorf("the note read before the downtime counts %d times after the catch-up, want 1", n)
	}
}

// A note published while the subscriptions move to a new set of authors
// (here: while the relay takes the request that names the newcomer), by an
// agent followed all along and dated hours before the last note read, is
// counted: the agents already followed keep a live subscription until the
// new one is in place.
func TestRelayNoteOfAFollowedAgentWhileTheAuthorsChange(t *testing.T) {
	tr := newTestRelay(t)
	var newcomer atomic.Value // string: the pubkey that triggers the publication
	newcomer.Store("")
	var published atomic.Bool
	var backdated *nostr.Event
	// OverwriteFilter: khatru v0.19.1 (responding.go) calls it for every
	// filter of a REQ, live ones (limit 0) included, before it registers
	// the subscription.
	tr.relay.OverwriteFilter = append(tr.relay.OverwriteFilter, func(_ context.Context, f *nostr.Filter) {
		if pk := newcomer.Load().(string); pk != "" && slices.Contains(f.Authors, pk) && published.CompareAndSwap(false, true) {
			tr.publish(backdated)
		}
	})
	tr.serve()
	var clk offsetClock
	e := relayEnvAt(t, openStore(t), tr, clk.Now)
	old := newAgent(t)
	reg := time.Now()
	e.registerLive(regEvent(t, old, reg, "followed all along"))
	clk.off.Store(int64(3 * time.Hour))
	tr.publish(note(t, old, clk.Now(), "read"))
	storagetest.Eventually(t, "the first note", func() bool { return postsOf(t, e.dir, old.pk) == 1 })

	backdated = note(t, old, reg.Add(time.Minute), "dated long ago, sent while the authors change")
	n := newAgent(t)
	newcomer.Store(n.pk)
	e.mustRegister(regEvent(t, n, clk.Now(), "newcomer"))
	storagetest.Eventually(t, "the relay was asked for the newcomer", published.Load)
	storagetest.Eventually(t, "the note sent meanwhile", func() bool { return postsOf(t, e.dir, old.pk) == 2 })
}

// A note published while Hearth is down, dated after its agent's
// registration but hours before the last note read from the relay, is
// counted after the restart.
func TestRelayBackdatedNotePublishedDuringDowntimeIsCounted(t *testing.T) {
	tr := startRelay(t)
	store := openStore(t)
	var clk offsetClock
	first := relayEnvAt(t, store, tr, clk.Now)
	a := newAgent(t)
	reg := time.Now()
	first.registerLive(regEvent(t, a, reg, "patient"))
	clk.off.Store(int64(3 * time.Hour))
	tr.publish(note(t, a, clk.Now(), "read before the downtime"))
	storagetest.Eventually(t, "the first note", func() bool { return postsOf(t, first.dir, a.pk) == 1 })
	first.dir.Close()
	first.srv.Close()

	tr.publish(note(t, a, reg.Add(time.Minute), "dated long ago, sent while hearth was down"))
	second := relayEnvAt(t, store, tr, clk.Now)
	storagetest.Eventually(t, "the note sent during the downtime", func() bool { return postsOf(t, second.dir, a.pk) == 2 })
	if en := second.mustEntry(a.pk); en.ActiveDays < 1 {
		t.Errorf("active_days = %d", en.ActiveDays)
	}
}

// The same note read from two relays and sent over HTTP counts once.
func TestDuplicatesAcrossRelaysAndHTTPCountOnce(t *testing.T) {
	r1, r2 := startRelay(t), startRelay(t)
	e := newEnvOn(t, openStore(t), Options{
		Relays:        []string{r1.url(), r2.url()},
		AllowPrivate:  true,
		RelayRetryMin: 20 * time.Millisecond,
		RelayRetryMax: 200 * time.Millisecond,
		Now:           time.Now,
	})
	a := newAgent(t)
	live := e.dir.relayLive.Load()
	e.mustRegister(regEvent(t, a, time.Now(), "twice"))
	storagetest.Eventually(t, "both relays live", func() bool { return e.dir.relayLive.Load() >= live+2 })
	n1, n2 := note(t, a, time.Now(), "one"), note(t, a, time.Now(), "two")
	r1.publish(n1, n2)
	r2.publish(n2, n1)
	e.post(n1)
	storagetest.Eventually(t, "both notes", func() bool { return postsOf(t, e.dir, a.pk) == 2 })
	// A third copy of either, later, is a duplicate.
	if res := e.post(n2); !res[0].OK || res[0].Message != msgDuplicate {
		t.Errorf("n2 again over HTTP: %+v", res[0])
	}
	if n := postsOf(t, e.dir, a.pk); n != 2 {
		t.Errorf("posts = %d, want 2", n)
	}
}

// A note that reaches the relay while it answers the directory's request
// (after the relay read its stored events, before it registered the
// subscription for new ones: khatru v0.19.1 handlers.go queries, then
// addListener) is counted all the same.
func TestRelayNoteStoredWhileTheSubscriptionOpensIsCounted(t *testing.T) {
	tr := startRelay(t)
	a := newAgent(t)
	var published atomic.Int32
	// After the store's own query (startRelay attached it; nothing asks the
	// relay yet).
	tr.relay.QueryEvents = append(tr.relay.QueryEvents, func(_ context.Context, f nostr.Filter) (chan *nostr.Event, error) {
		// Runs after the store's own query took its snapshot; a request
		// for the newest notes (no until) gets one more of them.
		if slices.Contains(f.Authors, a.pk) && f.Until == nil && published.Load() < 5 {
			n := published.Add(1)
			tr.publish(note(t, a, time.Now(), fmt.Sprintf("while the request is answered %d", n)))
		}
		ch := make(chan *nostr.Event) // khatru reads from it (adding.go), so not nil
		close(ch)
		return ch, nil
	})
	e := relayEnv(t, openStore(t), tr)
	e.registerLive(regEvent(t, a, time.Now().Add(-time.Minute), "racer"))
	storagetest.Eventually(t, "every note published while requests were answered", func() bool {
		n := published.Load()
		return n > 0 && postsOf(t, e.dir, a.pk) == int64(n)
	})
}

// offsetClock is the real clock moved forward by a settable offset.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

// A note dated after its agent's registration but published long after it
// (a backdated note, or one the agent's relay forwarded late) is counted:
// the subscription does not ask only for notes newer than when it began.
func TestRelayCountsALateNoteDatedLongAgo(t *testing.T) {
	tr := startRelay(t)
	var clk offsetClock
	e := newEnvOn(t, openStore(t), Options{
		Relays: []string{tr.url()}, AllowPrivate: true,
		RelayRetryMin: 20 * time.Millisecond, RelayRetryMax: 200 * time.Millisecond,
		Now: clk.Now,
	})
	a := newAgent(t)
	regAt := time.Now()
	e.registerLive(regEvent(t, a, regAt, "patient"))
	// Three hours later a new registration restarts the subscription.
	clk.off.Store(int64(3 * time.Hour))
	e.registerLive(regEvent(t, newAgent(t), clk.Now(), "newcomer"))
	tr.publish(note(t, a, regAt.Add(time.Minute), "written long ago, sent now"))
	storagetest.Eventually(t, "the late note is counted", func() bool { return postsOf(t, e.dir, a.pk) == 1 })
}

// A relay that takes at most 100 authors per filter still gets asked for
// every author: the filters are split further when it refuses them.
func TestRelaySplitsFiltersAsTheRelayRequires(t *testing.T) {
	tr := newTestRelay(t)
	tr.relay.RejectFilter = append(tr.relay.RejectFilter, func(_ context.Context, f nostr.Filter) (bool, string) {
		return len(f.Authors) > 100, "too many authors in one filter (at most 100)"
	})
	tr.serve()
	e := relayEnv(t, openStore(t), tr)
	keys := registerMany(t, e, 250, time.Now())
	tr.publish(note(t, keys[0], time.Now(), "first"), note(t, keys[249], time.Now(), "last"))
	storagetest.Eventually(t, "the notes of the first and the last agent", func() bool {
		return postsOf(t, e.dir, keys[0].pk) == 1 && postsOf(t, e.dir, keys[249].pk) == 1
	})
}

func stringsCompare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
