package directory

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

func TestEventsAnswerOneOKResultPerEventInOrder(t *testing.T) {
	e := newEnv(t, Options{})
	a, stranger := newAgent(t), newAgent(t)
	e.mustRegister(regEvent(t, a, e.now(), "poster"))
	e.clock.Advance(time.Minute)

	good := note(t, a, e.now(), "hello")
	badSig := note(t, a, e.now(), "forged")
	badSig.Sig = strings.Repeat("1", 128)
	reaction := sign(t, a, &nostr.Event{Kind: 7, CreatedAt: nostr.Timestamp(e.now().Unix()), Content: "+"})
	unregistered := note(t, stranger, e.now(), "who am I")
	future := note(t, a, e.now().Add(16*time.Minute), "from the future")
	early := note(t, a, t0.Add(-time.Hour), "before registering")

	body := mustJSON(t, []any{good, good, badSig, reaction, unregistered, future, early, map[string]any{"id": 5}})
	r := e.do(http.MethodPost, EventsPath, body)
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var res []OKResult
	r.json(t, &res)
	want := []struct {
		id     string
		ok     bool
		prefix string
	}{
		{good.ID, true, ""},
		{good.ID, true, "duplicate:"},
		{badSig.ID, false, "invalid:"},
		{reaction.ID, false, "invalid:"},
		{unregistered.ID, false, "restricted:"},
		{future.ID, false, "invalid:"},
		{early.ID, false, "invalid:"},
		{"", false, "invalid:"},
	}
	if len(res) != len(want) {
		t.Fatalf("%d results for %d events: %s", len(res), len(want), r.body)
	}
	for i, w := range want {
		if res[i].ID != w.id || res[i].OK != w.ok || !hasPrefix(res[i].Message, w.prefix) || (w.prefix == "" && res[i].Message != "") {
			t.Errorf("result %d = %+v; want id %.8s ok %v prefix %q", i, res[i], w.id, w.ok, w.prefix)
		}
	}
	// The wire form is NIP-01's OK message.
	if !strings.HasPrefix(string(r.body), `[["OK","`+good.ID+`",true,""],`) {
		t.Errorf("body = %.120s", r.body)
	}
	if en := e.mustEntry(a.pk); en.ActiveDays != 1 {
		t.Errorf("active_days = %d, want 1 (only the good post counts)", en.ActiveDays)
	}
}

func TestEventsCountEachPostOnce(t *testing.T) {
	e, a := envWithAgent(t, Options{}, "repeater")
	p := note(t, a, e.now(), "only once")
	e.mustPost(p)
	if res := e.post(p); !res[0].OK || !hasPrefix(res[0].Message, "duplicate:") {
		t.Errorf("second time: %+v", res[0])
	}
	list, err := e.dir.Agents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if list[0].Posts != 1 {
		t.Errorf("posts = %d, want 1", list[0].Posts)
	}
}

func TestEventsPostsUpTo15MinutesAheadCount(t *testing.T) {
	e, a := envWithAgent(t, Options{}, "skewed")
	e.mustPost(note(t, a, e.now().Add(15*time.Minute), "slightly ahead"))
}

func TestEventsRefuseBodiesThatAreNotAnArray(t *testing.T) {
	e := newEnv(t, Options{MaxBatch: 2})
	a := newAgent(t)
	for name, body := range map[string][]byte{
		"object":    []byte(`{"id":"x"}`),
		"not JSON":  []byte(`[{`),
		"null":      []byte(`null`),
		"too many":  mustJSON(t, []*nostr.Event{note(t, a, e.now(), "1"), note(t, a, e.now(), "2"), note(t, a, e.now(), "3")}),
		"too large": []byte("[" + strings.Repeat(" ", MaxEventsBodyBytes) + "]"),
	} {
		r := e.do(http.MethodPost, EventsPath, body)
		if r.status != http.StatusBadRequest || !hasPrefix(r.errorMessage(t), "invalid:") {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	if r := e.do(http.MethodPost, EventsPath, []byte(`[]`)); r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("empty array: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, EventsPath, nil); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", r.status)
	}
}

func TestEventsRateLimitedPerAddress(t *testing.T) {
	e := newEnv(t, Options{EventsLimitIP: Limit{1, time.Minute}})
	e.post()
	r := e.do(http.MethodPost, EventsPath, []byte(`[]`))
	if r.status != http.StatusTooManyRequests || !hasPrefix(r.errorMessage(t), "rate-limited:") || r.header.Get("Retry-After") == "" {
		t.Errorf("second request: %d %s", r.status, r.body)
	}
}

func TestEventsRateLimitedPerPubkey(t *testing.T) {
	e := newEnv(t, Options{EventsLimitPubkey: Limit{2, time.Hour}})
	a, b := newAgent(t), newAgent(t)
	e.mustRegister(regEvent(t, a, e.now(), "chatty"))
	e.mustRegister(regEvent(t, b, e.now(), "quiet"))
	res := e.post(note(t, a, e.now(), "1"), note(t, a, e.now(), "2"), note(t, a, e.now(), "3"), note(t, b, e.now(), "b"))
	if !res[0].OK || !res[1].OK || res[2].OK || !hasPrefix(res[2].Message, "rate-limited:") || !res[3].OK {
		t.Errorf("results = %+v", res)
	}
}

func TestBurstFlagOnAndOff(t *testing.T) {
	e := newEnv(t, Options{BurstMaxPosts: 3, BurstWindow: 10 * time.Minute})
	a := newAgent(t)
	e.mustRegister(minedRegistration(t, a, e.now(), "burster", 8))
	e.clock.Advance(time.Hour)
	start := e.now()
	// Four posts 4 minutes apart: never more than 3 in one 10-minute window.
	for i := 0; i < 4; i++ {
		e.mustPost(note(t, a, start.Add(time.Duration(i)*4*time.Minute), "spaced "+strings.Repeat("a", i)))
	}
	e.clock.Set(start.Add(13 * time.Minute))
	if en := e.mustEntry(a.pk); len(en.Flags) != 0 {
		t.Fatalf("spaced posts flagged: %v", en.Flags)
	}
	// A fifth post 1 minute after the fourth makes 4 within 10 minutes.
	e.mustPost(note(t, a, e.now(), "rushed"))
	en := e.mustEntry(a.pk)
	if !slices.Equal(en.Flags, []string{FlagBurst}) || en.Level != 0 {
		t.Fatalf("after the burst: flags %v level %d", en.Flags, en.Level)
	}
	// Still flagged 23 hours later; cleared once the burst is over 24 h old.
	e.clock.Advance(23 * time.Hour)
	if en := e.mustEntry(a.pk); !slices.Equal(en.Flags, []string{FlagBurst}) {
		t.Errorf("23 h later: flags %v", en.Flags)
	}
	e.clock.Advance(2 * time.Hour)
	if en := e.mustEntry(a.pk); len(en.Flags) != 0 || en.Level != 1 {
		t.Errorf("25 h later: flags %v level %d", en.Flags, en.Level)
	}
}

// A rebuild keeps an entry whose records did not change until the next
// time-driven change of it: each flag still clears at its second, after
// rebuilds that kept the entry.
func TestFlagsClearAtTheirSecondAfterRebuildsThatKeptTheEntry(t *testing.T) {
	e := newEnv(t, Options{BurstMaxPosts: 2, BurstWindow: 10 * time.Minute})
	burster, templater := newAgent(t), newAgent(t)
	e.mustRegister(minedRegistration(t, burster, e.now(), "burster", 8))
	e.mustRegister(minedRegistration(t, templater, e.now(), "templater", 8))
	e.clock.Advance(time.Hour)
	start := e.now()
	e.mustPost(note(t, burster, start, "one"), note(t, burster, start.Add(time.Minute), "two"),
		note(t, burster, start.Add(2*time.Minute), "three"))
	burstAt := start.Add(2 * time.Minute) // the third post within 10 minutes
	// Five alike posts a minute apart, each a different text: template.
	for i := range 5 {
		e.mustPost(note(t, templater, start.Add(time.Duration(i)*time.Minute), "price report number "+strconv.Itoa(100+i)))
	}
	oldest := start // leaves the 7-day sample one second after 7 days

	check := func(at time.Time, pk, what string, want []string) {
		t.Helper()
		e.clock.Set(at)
		if en := e.mustEntry(pk); !slices.Equal(en.Flags, want) {
			t.Errorf("%s: flags %v, want %v", what, en.Flags, want)
		}
	}
	check(start.Add(3*time.Minute), burster.pk, "after the burst", []string{FlagBurst})
	check(burstAt.Add(burstHorizon-30*time.Minute), burster.pk, "23.5 h after the burst", []string{FlagBurst})
	check(burstAt.Add(burstHorizon-time.Second), burster.pk, "a second before 24 h", []string{FlagBurst})
	check(burstAt.Add(burstHorizon), burster.pk, "24 h after the burst", []string{})
	check(oldest.Add(templateSpan-30*time.Minute), templater.pk, "half an hour before 7 days", []string{FlagTemplate})
	check(oldest.Add(templateSpan), templater.pk, "7 days after the oldest post", []string{FlagTemplate})
	check(oldest.Add(templateSpan+time.Second), templater.pk, "a second later, 4 alike left", []string{})
}

func TestBurstCountsPostsByCreatedAtWhateverTheOrderOfArrival(t *testing.T) {
	e, a := envWithAgent(t, Options{BurstMaxPosts: 2, BurstWindow: 10 * time.Minute}, "late sender")
	e.clock.Advance(time.Hour)
	now := e.now()
	e.mustPost(note(t, a, now, "x"))
	e.mustPost(note(t, a, now.Add(-8*time.Minute), "y"))
	e.mustPost(note(t, a, now.Add(-4*time.Minute), "z"))
	if en := e.mustEntry(a.pk); !slices.Equal(en.Flags, []string{FlagBurst}) {
		t.Errorf("flags = %v", en.Flags)
	}
}

func TestTemplateFlagOnAndOff(t *testing.T) {
	e, a := envWithAgent(t, Options{}, "templater")
	e.clock.Advance(time.Hour)
	// Five posts with one skeleton: numbers, URLs, mentions and hex differ.
	texts := []string{
		"BTC is at 64000 USD https://prices.example/1 @alice",
		"btc is   at 64010 usd https://prices.example/2 @bob",
		"BTC is at 63990 USD http://mirror.example/x?y=3 @carol deadbeefcafe",
		"BTC IS AT 64005 USD www.prices.example/4 nostr:npub1abc",
		"BTC is at 1 USD https://prices.example/5",
	}
	for _, s := range texts[:4] {
		e.clock.Advance(time.Hour)
		e.mustPost(note(t, a, e.now(), s))
	}
	if en := e.mustEntry(a.pk); len(en.Flags) != 0 {
		t.Fatalf("4 alike posts flagged: %v", en.Flags)
	}
	e.mustPost(note(t, a, e.now(), texts[4]))
	if en := e.mustEntry(a.pk); !slices.Equal(en.Flags, []string{FlagTemplate}) || en.Level != 0 {
		t.Fatalf("5 alike posts: flags %v level %d", en.Flags, en.Level)
	}
	// Four different posts: 5 of 9 alike is under 60 %.
	for i, s := range []string{"good morning", "reading a paper on relays", "lunch break", "shipping a fix"} {
		e.mustPost(note(t, a, e.now().Add(time.Duration(i+1)*time.Minute), s))
	}
	e.clock.Advance(10 * time.Minute)
	if en := e.mustEntry(a.pk); len(en.Flags) != 0 {
		t.Errorf("5 alike of 9: flags %v", en.Flags)
	}
}

func TestTemplateFlagLooksAtTheLast7Days(t *testing.T) {
	e, a := envWithAgent(t, Options{}, "weekly")
	e.clock.Advance(time.Hour)
	for i := 0; i < 5; i++ {
		e.mustPost(note(t, a, e.now().Add(time.Duration(i)*time.Minute), "daily report number "+string(rune('0'+i))))
	}
	e.clock.Advance(10 * time.Minute)
	if en := e.mustEntry(a.pk); !slices.Equal(en.Flags, []string{FlagTemplate}) {
		t.Fatalf("flags = %v", en.Flags)
	}
	e.clock.Advance(7*24*time.Hour + time.Hour)
	if en := e.mustEntry(a.pk); len(en.Flags) != 0 {
		t.Errorf("a week later: flags %v", en.Flags)
	}
}

func TestTemplateThresholdsAreConfigurable(t *testing.T) {
	e, a := envWithAgent(t, Options{TemplateMinPosts: 2, TemplateRatio: 0.5, TemplateSample: 4}, "tuned")
	e.clock.Advance(time.Hour)
	e.mustPost(note(t, a, e.now(), "ping 1"), note(t, a, e.now().Add(time.Second), "ping 2"))
	if en := e.mustEntry(a.pk); !slices.Equal(en.Flags, []string{FlagTemplate}) {
		t.Errorf("2 alike with min 2: flags %v", en.Flags)
	}
}

func TestBothFlagsInDocumentOrder(t *testing.T) {
	e, a := envWithAgent(t, Options{BurstMaxPosts: 4}, "both")
	e.clock.Advance(time.Hour)
	var evts []*nostr.Event
	for i := 0; i < 5; i++ {
		evts = append(evts, note(t, a, e.now().Add(time.Duration(i)*time.Second), "same text "+string(rune('0'+i))))
	}
	e.mustPost(evts...)
	if en := e.mustEntry(a.pk); !slices.Equal(en.Flags, []string{FlagTemplate, FlagBurst}) {
		t.Errorf("flags = %v", en.Flags)
	}
}

func TestSkeleton(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"Hello   World", "hello world"},
		{"price 42 at https://x.example/a?b=1", "price 7 at http://y.example"},
		{"hi @alice", "hi @bob"},
		{"id deadbeef00 done", "id 0123456789abcdef done"},
		{"see nostr:note1xyz now", "see nostr:npub1abc now"},
		{"line\n\tbreak", "line break"},
	} {
		if Skeleton(c.a) != Skeleton(c.b) {
			t.Errorf("Skeleton(%q) = %q, Skeleton(%q) = %q", c.a, Skeleton(c.a), c.b, Skeleton(c.b))
		}
	}
	if Skeleton("good morning") == Skeleton("good evening") {
		t.Error("different words share a skeleton")
	}
}

func TestIngestCountsPostsWithoutRateLimit(t *testing.T) {
	e, a := envWithAgent(t, Options{EventsLimitPubkey: Limit{1, time.Hour}}, "tool")
	res, err := e.dir.Ingest(t.Context(), []*nostr.Event{note(t, a, e.now(), "one"), note(t, a, e.now(), "two"), nil})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].OK || !res[1].OK || res[2].OK {
		t.Errorf("results = %+v", res)
	}
}

// Signatures of a batch are checked on all cores; each verdict must still
// land on its own event.
func TestEventsCheckEverySignatureOfALargeBatch(t *testing.T) {
	e, a := envWithAgent(t, Options{}, "poster")
	e.clock.Advance(time.Minute)
	evts := make([]*nostr.Event, 60)
	for i := range evts {
		evts[i] = note(t, a, e.now().Add(-time.Duration(i)*time.Second), "post "+strconv.Itoa(i))
		if i%7 == 3 {
			evts[i].Sig = strings.Repeat("1", 128)
		}
	}
	for i, r := range e.post(evts...) {
		if forged := i%7 == 3; r.OK == forged || forged != hasPrefix(r.Message, "invalid: signature") {
			t.Errorf("event %d (forged %v): %+v", i, forged, r)
		}
	}
}

// A large request is checked and written in turns; when nothing of its
// last turn is to be written, it is still answered once the turns before
// are written, each post with its own result.
func TestEventsAnswerALargeBatchWhoseLastTurnIsRefused(t *testing.T) {
	e, a := envWithAgent(t, Options{}, "poster")
	e.clock.Advance(10 * time.Minute)
	var evts []*nostr.Event
	for i := range 2*ingestChunk + 3 {
		n := note(t, a, e.now().Add(-time.Duration(i)*time.Second), "post "+strconv.Itoa(i))
		if i >= 2*ingestChunk {
			n.Sig = strings.Repeat("1", 128)
		}
		evts = append(evts, n)
	}
	for i, r := range e.post(evts...) {
		if refused := i >= 2*ingestChunk; r.OK == refused || refused != hasPrefix(r.Message, "invalid: signature") {
			t.Errorf("event %d: %+v", i, r)
		}
	}
	if n := postsOf(t, e.dir, a.pk); n != 2*ingestChunk {
		t.Errorf("posts = %d, want %d", n, 2*ingestChunk)
	}
}

// The checks keep each pubkey's parsed point once seen: a signature still
// counts only for its own key and its own event, and a pubkey off the curve
// is refused, before and after the genuine posts of the same keys.
func TestEventsRefuseSignaturesOfAnotherKeyOrEvent(t *testing.T) {
	e := newEnv(t, Options{})
	a, b := newAgent(t), newAgent(t)
	e.mustRegister(regEvent(t, a, e.now(), "a"))
	e.mustRegister(regEvent(t, b, e.now(), "b"))
	e.clock.Advance(time.Minute)
	at := e.now().Add(-time.Second)
	forged := func() []*nostr.Event {
		// b's note carrying a's signature of the same text.
		byA, asB := note(t, a, at, "same text"), note(t, b, at, "same text")
		asB.Sig = byA.Sig
		// a's note carrying a's signature of another note.
		other, moved := note(t, a, at, "first"), note(t, a, at, "second")
		moved.Sig = other.Sig
		// A pubkey that is no point on the curve, its id computed.
		off := note(t, a, at, "off the curve")
		for x := 0; ; x++ {
			off.PubKey = fmt.Sprintf("%064x", x)
			if !nostr.IsValidPublicKey(off.PubKey) {
				break
			}
		}
		off.ID = off.GetID()
		return []*nostr.Event{asB, moved, off}
	}
	for round := range 2 {
		evts := append(forged(), note(t, a, at, fmt.Sprintf("genuine %d", round)), note(t, b, at, fmt.Sprintf("genuine %d", round)))
		res := e.post(evts...)
		for i, r := range res[:3] {
			if r.OK || !hasPrefix(r.Message, "invalid: signature") {
				t.Errorf("round %d, forged event %d: %+v", round, i, r)
			}
		}
		for i, r := range res[3:] {
			if !r.OK || r.Message != "" {
				t.Errorf("round %d, genuine event %d: %+v", round, i, r)
			}
		}
	}
	if pa, pb := postsOf(t, e.dir, a.pk), postsOf(t, e.dir, b.pk); pa != 2 || pb != 2 {
		t.Errorf("posts = %d, %d; want 2 each", pa, pb)
	}
}

// Concurrent requests are written together (group commit): each post is
// counted once, whichever request carried it first, and each request gets
// its own results in order.
func TestConcurrentPostsAreCountedOnce(t *testing.T) {
	e := newEnv(t, Options{})
	a, b := newAgent(t), newAgent(t)
	e.mustRegister(regEvent(t, a, e.now(), "a"))
	e.mustRegister(regEvent(t, b, e.now(), "b"))
	var notes []*nostr.Event
	for i := range 20 {
		notes = append(notes, note(t, a, e.now(), fmt.Sprintf("note %d", i)), note(t, b, e.now(), fmt.Sprintf("note %d", i)))
	}
	const clients = 16
	results := make([][]OKResult, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			res, err := e.dir.Ingest(t.Context(), notes)
			if err != nil {
				t.Error(err)
			}
			results[c] = res
		})
	}
	wg.Wait()
	for i, n := range notes {
		firsts := 0
		for c := range clients {
			r := results[c][i]
			switch {
			case r.ID != n.ID || !r.OK:
				t.Fatalf("client %d, note %d: %+v", c, i, r)
			case r.Message == "":
				firsts++
			case r.Message != msgDuplicate:
				t.Fatalf("client %d, note %d: %+v", c, i, r)
			}
		}
		if firsts != 1 {
			t.Errorf("note %d counted by %d requests", i, firsts)
		}
	}
	if pa, pb := postsOf(t, e.dir, a.pk), postsOf(t, e.dir, b.pk); pa != 20 || pb != 20 {
		t.Errorf("posts = %d, %d; want 20 each", pa, pb)
	}
}
