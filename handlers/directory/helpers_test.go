package directory

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip13"

	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/internal/testrelay"
	"github.com/hearthkit/caddy-hearth/storage"
)

// t0 is the test clock's start: a Tuesday, 12:00 UTC.
var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func openStore(t testing.TB) *storage.Store {
	t.Helper()
	sync := false
	s, err := storage.Open(t.TempDir(), storage.Options{GCInterval: -1, SyncWrites: &sync})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// env is a Directory served over real HTTP.
type env struct {
	t     testing.TB
	store *storage.Store
	clock *clock
	dir   *Directory
	srv   *httptest.Server
}

// newEnv builds a Directory on a fresh store with the test clock. Options
// left zero take the package defaults, except that the schedule is slow
// (tests call Rebuild) and the debounce fast.
func newEnv(t testing.TB, opts Options) *env {
	t.Helper()
	return newEnvOn(t, openStore(t), opts)
}

func newEnvOn(t testing.TB, store *storage.Store, opts Options) *env {
	t.Helper()
	if opts.Fetcher == nil {
		opts.Fetcher = offlineFetcher()
	}
	return newEnvWithFetcher(t, store, opts)
}

// offlineFetcher sends every NIP-05 fetch to a closed loopback port, so an
// identifier a test does not serve fails at once and no name is resolved.
func offlineFetcher() *safefetch.Fetcher {
	return safefetch.New(safefetch.Options{
		AllowPrivate: true,
		Timeout:      5 * time.Second,
		DialAddress:  func(string) string { return "127.0.0.1:1" },
	})
}

// newEnvWithFetcher keeps opts.Fetcher as given (nil: New builds its own).
func newEnvWithFetcher(t testing.TB, store *storage.Store, opts Options) *env {
	t.Helper()
	e := &env{t: t, store: store}
	if opts.Now == nil {
		e.clock = newClock()
		opts.Now = e.clock.Now
	}
	if opts.RegenerateEvery == 0 {
		opts.RegenerateEvery = time.Hour
	}
	if opts.RegenerateDelay == 0 {
		opts.RegenerateDelay = 5 * time.Millisecond
	}
	if opts.PowMinBits == 0 {
		opts.PowMinBits = 8
	}
	d, err := New(store, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.dir = d
	e.srv = httptest.NewServer(d)
	t.Cleanup(func() {
		e.srv.Close()
		d.Close()
	})
	return e
}

func (e *env) now() time.Time {
	if e.clock != nil {
		return e.clock.Now()
	}
	return time.Now()
}

// agentKey is an agent's Nostr key pair.
type agentKey struct{ sk, pk string }

// envWithAgent is a directory of opts with one agent, registered now
// under name with tags.
func envWithAgent(t *testing.T, opts Options, name string, tags ...nostr.Tag) (*env, agentKey) {
	t.Helper()
	e := newEnv(t, opts)
	a := newAgent(t)
	e.mustRegister(regEvent(t, a, e.now(), name, tags...))
	return e, a
}

// postOnTwoDays posts a's notes first, an hour from now, and second, a day
// later.
func (e *env) postOnTwoDays(a agentKey, first, second string) {
	e.t.Helper()
	e.clock.Advance(time.Hour)
	e.mustPost(note(e.t, a, e.now(), first))
	e.clock.Advance(24 * time.Hour)
	e.mustPost(note(e.t, a, e.now(), second))
}

func newAgent(t testing.TB) agentKey {
	t.Helper()
	sk, pk := testrelay.NewKey(t)
	return agentKey{sk, pk}
}

func (a agentKey) npub() string { return Npub(a.pk) }

func sign(t testing.TB, a agentKey, evt *nostr.Event) *nostr.Event {
	t.Helper()
	evt.PubKey = a.pk
	if evt.Tags == nil {
		evt.Tags = nostr.Tags{}
	}
	if err := evt.Sign(a.sk); err != nil {
		t.Fatalf("sign: %v", err)
	}
	return evt
}

// regEvent builds a signed kind-31339 registration at `at` with a d
// tag, a name tag and the extra tags.
func regEvent(t testing.TB, a agentKey, at time.Time, name string, extra ...nostr.Tag) *nostr.Event {
	t.Helper()
	tags := nostr.Tags{{"d", "agent"}, {"name", name}}
	tags = append(tags, extra...)
	return sign(t, a, &nostr.Event{Kind: DefaultKind, CreatedAt: nostr.Timestamp(at.Unix()), Tags: tags})
}

// minedRegistration is a registration with NIP-13 proof of work committed
// to target bits, mined with go-nostr's nip13.
func minedRegistration(t testing.TB, a agentKey, at time.Time, name string, target int, extra ...nostr.Tag) *nostr.Event {
	t.Helper()
	tags := nostr.Tags{{"d", "agent"}, {"name", name}}
	tags = append(tags, extra...)
	evt := nostr.Event{PubKey: a.pk, Kind: DefaultKind, CreatedAt: nostr.Timestamp(at.Unix()), Tags: tags}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nonce, err := nip13.DoWork(ctx, evt, target)
	if err != nil {
		t.Fatalf("mine: %v", err)
	}
	evt.Tags = append(evt.Tags, nonce)
	return sign(t, a, &evt)
}

// overMinedRegistration commits to `committed` bits but keeps mining until
// the id has at least `atLeast` leading zero bits.
func overMinedRegistration(t testing.TB, a agentKey, at time.Time, committed, atLeast int) *nostr.Event {
	t.Helper()
	for n := 0; ; n++ {
		evt := nostr.Event{PubKey: a.pk, Kind: DefaultKind, CreatedAt: nostr.Timestamp(at.Unix()),
			Tags: nostr.Tags{{"d", "agent"}, {"name", "over-miner"}, {"nonce", strconv.Itoa(n), strconv.Itoa(committed)}}}
		if nip13.Difficulty(evt.GetID()) >= atLeast {
			return sign(t, a, &evt)
		}
	}
}

// note is a signed kind-1 post.
func note(t testing.TB, a agentKey, at time.Time, content string) *nostr.Event {
	t.Helper()
	return sign(t, a, &nostr.Event{Kind: nostr.KindTextNote, CreatedAt: nostr.Timestamp(at.Unix()), Content: content})
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// response is what a client got.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r response) errorMessage(t testing.TB) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	r.json(t, &e)
	return e.Error
}

func (e *env) do(method, path string, body []byte, header ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

// register POSTs evt to the registration endpoint.
func (e *env) register(evt *nostr.Event) response {
	e.t.Helper()
	return e.do(http.MethodPost, RegisterPath, mustJSON(e.t, evt))
}

// mustRegister registers evt and fails the test unless it is accepted.
func (e *env) mustRegister(evt *nostr.Event) Entry {
	e.t.Helper()
	r := e.register(evt)
	if r.status != http.StatusCreated && r.status != http.StatusOK {
		e.t.Fatalf("register: %d %s", r.status, r.body)
	}
	var entry Entry
	r.json(e.t, &entry)
	return entry
}

// post sends events to the events endpoint and returns the OK results.
func (e *env) post(evts ...*nostr.Event) []OKResult {
	e.t.Helper()
	if evts == nil {
		evts = []*nostr.Event{}
	}
	r := e.do(http.MethodPost, EventsPath, mustJSON(e.t, evts))
	if r.status != http.StatusOK {
		e.t.Fatalf("post events: %d %s", r.status, r.body)
	}
	var res []OKResult
	r.json(e.t, &res)
	if len(res) != len(evts) {
		e.t.Fatalf("got %d OK results for %d events", len(res), len(evts))
	}
	return res
}

// mustPost sends events and fails unless each is accepted.
func (e *env) mustPost(evts ...*nostr.Event) {
	e.t.Helper()
	for i, r := range e.post(evts...) {
		if !r.OK || r.Message != "" {
			e.t.Fatalf("event %d refused: %q", i, r.Message)
		}
	}
}

// document rebuilds now and fetches the document.
func (e *env) document() Document {
	e.t.Helper()
	if err := e.dir.Rebuild(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return e.fetchDocument()
}

// fetchDocument fetches the document as it is served, without rebuilding.
func (e *env) fetchDocument() Document {
	e.t.Helper()
	doc, _, _ := e.servedDocument()
	return doc
}

// servedDocument is the document as a client gets it from e, with its ETag
// and bytes.
func (e *env) servedDocument() (Document, string, []byte) {
	e.t.Helper()
	r := e.do(http.MethodGet, DefaultPath, nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("GET document: %d %s", r.status, r.body)
	}
	var doc Document
	r.json(e.t, &doc)
	return doc, r.header.Get("ETag"), r.body
}

// entry returns pk's entry of the freshly rebuilt document.
func (e *env) entry(pk string) (Entry, bool) {
	e.t.Helper()
	for _, a := range e.document().Agents {
		if a.Pubkey == pk {
			return a, true
		}
	}
	return Entry{}, false
}

func (e *env) mustEntry(pk string) Entry {
	e.t.Helper()
	en, ok := e.entry(pk)
	if !ok {
		e.t.Fatalf("agent %s is not in the document", pk)
	}
	return en
}

func hasPrefix(s, p string) bool { return strings.HasPrefix(s, p) }

func nostrTag(k, v string) nostr.Tag { return nostr.Tag{k, v} }

func asRefusal(err error, rf **refusal) bool {
	r, ok := err.(*refusal)
	*rf = r
	return ok
}
