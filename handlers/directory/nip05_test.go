package directory

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// nip05Domain is a local HTTPS server standing in for example.com (the
// name httptest's certificate is valid for): the fetcher dials it instead
// of resolving the name, so nothing leaves the machine.
type nip05Domain struct {
	srv      *httptest.Server
	mu       sync.Mutex
	names    map[string]string
	mode     string // "ok", "down" (503), "redirect", "gone" (404)
	requests atomic.Int32
	paths    []string
}

func newNIP05Domain(t *testing.T) *nip05Domain {
	d := &nip05Domain{names: map[string]string{}, mode: "ok"}
	d.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.requests.Add(1)
		d.mu.Lock()
		defer d.mu.Unlock()
		d.paths = append(d.paths, r.URL.RequestURI())
		switch {
		case r.URL.Path == "/verified":
			json.NewEncoder(w).Encode(map[string]any{"names": d.names})
			return
		case d.mode == "down":
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		case d.mode == "gone":
			http.NotFound(w, r)
			return
		case d.mode == "redirect":
			http.Redirect(w, r, "/verified", http.StatusFound)
			return
		case r.URL.Path != "/.well-known/nostr.json":
			http.NotFound(w, r)
			return
		}
		name := r.URL.Query().Get("name")
		names := map[string]string{}
		if pk, ok := d.names[name]; ok {
			names[name] = pk
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"names": names})
	}))
	t.Cleanup(d.srv.Close)
	return d
}

// nip05Env is a directory of opts that fetches NIP-05 identifiers from a
// new test domain.
func nip05Env(t *testing.T, opts Options) (*nip05Domain, *env) {
	t.Helper()
	dom := newNIP05Domain(t)
	opts.Fetcher = dom.fetcher()
	return dom, newEnv(t, opts)
}

// registerBot registers through e a new agent named bot, whose identifier
// bot@example.com d verifies.
func (d *nip05Domain) registerBot(t *testing.T, e *env) agentKey {
	t.Helper()
	a := newAgent(t)
	d.set("bot", a.pk)
	e.mustRegister(regEvent(t, a, e.now(), "bot", nostr.Tag{"nip05", "bot@example.com"}))
	return a
}

func (d *nip05Domain) set(name, pk string) {
	d.mu.Lock()
	d.names[name] = pk
	d.mu.Unlock()
}

func (d *nip05Domain) setMode(m string) {
	d.mu.Lock()
	d.mode = m
	d.mu.Unlock()
}

// fetcher trusts the server's certificate and dials it for any host; the
// private-address check is off, as a Caddyfile allowing private addresses
// would have it.
func (d *nip05Domain) fetcher() *safefetch.Fetcher {
	return safefetch.New(safefetch.Options{
		AllowPrivate: true,
		Timeout:      30 * time.Second, // a loaded machine under the race detector
		TLSConfig:    d.srv.Client().Transport.(*http.Transport).TLSClientConfig,
		DialAddress:  func(string) string { return d.srv.Listener.Addr().String() },
	})
}

func TestNIP05VerifiedAtRegistration(t *testing.T) {
	dom, e := nip05Env(t, Options{})
	a := newAgent(t)
	dom.set("bot", a.pk)
	en := e.mustRegister(regEvent(t, a, e.now(), "bot", nostr.Tag{"nip05", "Bot@Example.com"}))
	if en.Gates.NIP05 == nil || *en.Gates.NIP05 != "bot@example.com" || en.Level != 1 {
		t.Errorf("gates = %+v level %d", en.Gates, en.Level)
	}
	if len(dom.paths) != 1 || dom.paths[0] != "/.well-known/nostr.json?name=bot" {
		t.Errorf("requests = %v", dom.paths)
	}
}

func TestNIP05MismatchIsNotVerified(t *testing.T) {
	dom, e := nip05Env(t, Options{})
	a := newAgent(t)
	dom.set("bot", newAgent(t).pk)
	en := e.mustRegister(regEvent(t, a, e.now(), "bot", nostr.Tag{"nip05", "bot@example.com"}))
	if en.Gates.NIP05 != nil || en.Level != 0 {
		t.Errorf("another key's name verified: %+v", en.Gates)
	}
}

func TestNIP05UppercaseHexDoesNotMatch(t *testing.T) {
	dom, e := nip05Env(t, Options{})
	a := newAgent(t)
	dom.set("bot", strings.ToUpper(a.pk))
	if en := e.mustRegister(regEvent(t, a, e.now(), "bot", nostr.Tag{"nip05", "bot@example.com"})); en.Gates.NIP05 != nil {
		t.Errorf("uppercase hex accepted: %+v", en.Gates)
	}
}

func TestNIP05RedirectIsNotFollowed(t *testing.T) {
	dom := newNIP05Domain(t)
	dom.setMode("redirect")
	e := newEnv(t, Options{Fetcher: dom.fetcher()})
	a := newAgent(t)
	dom.set("bot", a.pk) // the redirect target would verify
	en := e.mustRegister(regEvent(t, a, e.now(), "bot", nostr.Tag{"nip05", "bot@example.com"}))
	if en.Gates.NIP05 != nil {
		t.Errorf("verified through a redirect: %+v", en.Gates)
	}
	for _, p := range dom.paths {
		if p == "/verified" {
			t.Error("the redirect was followed")
		}
	}
}

func TestNIP05PrivateAddressRefusedByDefault(t *testing.T) {
	dom := newNIP05Domain(t)
	u, _ := url.Parse(dom.srv.URL)
	port, _ := strconv.Atoi(u.Port())
	e := newEnvWithFetcher(t, openStore(t), Options{NIP05Port: port}) // no Fetcher: New builds one; AllowPrivate is false
	a := newAgent(t)
	dom.set("bot", a.pk)
	en := e.mustRegister(regEvent(t, a, e.now(), "bot", nostr.Tag{"nip05", "bot@" + u.Hostname()}))
	if en.Gates.NIP05 != nil {
		t.Errorf("loopback identifier verified: %+v", en.Gates)
	}
	if n := dom.requests.Load(); n != 0 {
		t.Errorf("the loopback server got %d requests", n)
	}
}

func TestNIP05RecheckMismatchClearsAtOnce(t *testing.T) {
	dom, e := nip05Env(t, Options{})
	a := dom.registerBot(t, e)

	dom.set("bot", newAgent(t).pk)
	e.clock.Advance(25 * time.Hour)
	if n, err := e.dir.CheckNIP05Now(t.Context()); err != nil || n != 1 {
		t.Fatalf("CheckNIP05Now = %d, %v", n, err)
	}
	if en := e.mustEntry(a.pk); en.Gates.NIP05 != nil || en.Level != 0 {
		t.Errorf("after a mismatch: %+v level %d", en.Gates, en.Level)
	}
}

func TestNIP05RecheckNotFoundClearsAtOnce(t *testing.T) {
	dom, e := nip05Env(t, Options{})
	a := dom.registerBot(t, e)
	dom.setMode("gone")
	e.clock.Advance(25 * time.Hour)
	e.dir.CheckNIP05Now(t.Context())
	if en := e.mustEntry(a.pk); en.Gates.NIP05 != nil {
		t.Errorf("after a 404: %+v", en.Gates)
	}
}

func TestNIP05FailureKeepsVerdictForTheGracePeriod(t *testing.T) {
	dom, e := nip05Env(t, Options{})
	a := dom.registerBot(t, e)

	dom.setMode("down")
	for _, h := range []int{25, 49, 72} { // hours since the last match
		e.clock.Set(t0.Add(time.Duration(h) * time.Hour))
		e.dir.CheckNIP05Now(t.Context())
		if en := e.mustEntry(a.pk); en.Gates.NIP05 == nil {
			t.Fatalf("%d h after the last match, failing checks cleared the verdict", h)
		}
	}
	e.clock.Set(t0.Add(97 * time.Hour))
	e.dir.CheckNIP05Now(t.Context())
	if en := e.mustEntry(a.pk); en.Gates.NIP05 != nil {
		t.Fatalf("97 h after the last match: still verified")
	}
	// The domain comes back: verified again at the next check.
	dom.setMode("ok")
	e.clock.Advance(25 * time.Hour)
	e.dir.CheckNIP05Now(t.Context())
	if en := e.mustEntry(a.pk); en.Gates.NIP05 == nil {
		t.Errorf("not verified again after the domain recovered")
	}
}

func TestNIP05FailureAtRegistrationIsNotVerified(t *testing.T) {
	dom := newNIP05Domain(t)
	dom.setMode("down")
	e := newEnv(t, Options{Fetcher: dom.fetcher()})
	a := newAgent(t)
	en := e.mustRegister(regEvent(t, a, e.now(), "bot", nostr.Tag{"nip05", "bot@example.com"}))
	if en.Gates.NIP05 != nil {
		t.Errorf("verified while the domain is down: %+v", en.Gates)
	}
}

func TestNIP05RecheckedOnSchedule(t *testing.T) {
	dom, e := nip05Env(t, Options{NIP05CheckEvery: 10 * time.Millisecond, RegenerateDelay: 10 * time.Millisecond})
	dom.registerBot(t, e)
	dom.set("bot", newAgent(t).pk)
	e.clock.Advance(25 * time.Hour)
	// No explicit check or rebuild: the schedules do both.
	storagetest.Eventually(t, "the background recheck clears the identifier", func() bool {
		doc := e.fetchDocument()
		return len(doc.Agents) == 1 && doc.Agents[0].Gates.NIP05 == nil
	})
}

func TestNIP05NotRecheckedBeforeDue(t *testing.T) {
	dom, e := nip05Env(t, Options{})
	dom.registerBot(t, e)
	e.clock.Advance(23 * time.Hour)
	if n, _ := e.dir.CheckNIP05Now(t.Context()); n != 0 {
		t.Errorf("%d checks 23 h after the last one (recheck is daily)", n)
	}
}

func TestLocalNIP05DomainServesWellKnown(t *testing.T) {
	e := newEnv(t, Options{NIP05Domain: "Agents.Test"})
	a := newAgent(t)
	e.mustRegister(regEvent(t, a, e.now(), "local", nostr.Tag{"nip05", "Local@agents.test"}))
	if _, err := e.dir.ApproveName(t.Context(), "local"); err != nil {
		t.Fatal(err)
	}
	if en := e.mustEntry(a.pk); en.Gates.NIP05 == nil || *en.Gates.NIP05 != "local@agents.test" || en.Level != 1 {
		t.Fatalf("gates = %+v level %d", en.Gates, en.Level)
	}
	r := e.do(http.MethodGet, WellKnownNIP05+"?name=local", nil, "Origin", "https://client.example")
	var body struct {
		Names map[string]string `json:"names"`
	}
	r.json(t, &body)
	if r.status != http.StatusOK || body.Names["local"] != a.pk || len(body.Names) != 1 {
		t.Errorf("well-known: %d %s", r.status, r.body)
	}
	if r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Error("well-known without CORS *")
	}
	for _, q := range []string{"?name=nobody", "", "?name=" + url.QueryEscape("<x>")} {
		r := e.do(http.MethodGet, WellKnownNIP05+q, nil)
		if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"names":{}}` {
			t.Errorf("well-known%s: %d %s", q, r.status, r.body)
		}
	}
}

func TestLocalNIP05NameIsHeldByItsFirstClaimant(t *testing.T) {
	e := newEnv(t, Options{NIP05Domain: "agents.test", NIP05OpenClaims: true})
	first, second := newAgent(t), newAgent(t)
	e.mustRegister(regEvent(t, first, e.now(), "first", nostr.Tag{"nip05", "taken@agents.test"}))
	r := e.register(regEvent(t, second, e.now(), "second", nostr.Tag{"nip05", "taken@agents.test"}))
	if r.status != http.StatusBadRequest || !hasPrefix(r.errorMessage(t), "invalid:") || !strings.Contains(r.errorMessage(t), "claimed") {
		t.Errorf("second claim: %d %s", r.status, r.body)
	}
	// The owner may register again with the same name, or give it up.
	e.clock.Advance(time.Minute)
	e.mustRegister(regEvent(t, first, e.now(), "first", nostr.Tag{"nip05", "taken@agents.test"}))
	e.clock.Advance(time.Minute)
	e.mustRegister(regEvent(t, first, e.now(), "first"))
	e.clock.Advance(time.Minute)
	if en := e.mustRegister(regEvent(t, second, e.now(), "second", nostr.Tag{"nip05", "taken@agents.test"})); en.Gates.NIP05 == nil {
		t.Errorf("released name not granted: %+v", en.Gates)
	}
}

func TestWellKnownNotServedWithoutNIP05Domain(t *testing.T) {
	e := newEnv(t, Options{})
	if r := e.do(http.MethodGet, WellKnownNIP05+"?name=x", nil); r.status != http.StatusNotFound {
		t.Errorf("status %d", r.status)
	}
}

// wellKnownNames is what a NIP-05 client reads for ?name=name.
func (e *env) wellKnownNames(name string) map[string]string {
	e.t.Helper()
	r := e.do(http.MethodGet, WellKnownNIP05+"?name="+url.QueryEscape(name), nil)
	var body struct {
		Names map[string]string `json:"names"`
	}
	r.json(e.t, &body)
	if r.status != http.StatusOK {
		e.t.Fatalf("well-known: %d %s", r.status, r.body)
	}
	return body.Names
}

func TestLocalNIP05ClaimIsForItsDomainAfterNIP05DomainChanges(t *testing.T) {
	store := openStore(t)
	before := newEnvOn(t, store, Options{NIP05Domain: "old.test", NIP05OpenClaims: true})
	x, y := newAgent(t), newAgent(t)
	before.mustRegister(regEvent(t, x, before.now(), "x", nostr.Tag{"nip05", "bob@old.test"}))
	before.srv.Close()
	before.dir.Close()

	// A reload with another nip05_domain: a new Directory on the same store.
	after := newEnvOn(t, store, Options{NIP05Domain: "new.test", NIP05OpenClaims: true})
	if names := after.wellKnownNames("bob"); len(names) != 0 {
		t.Errorf("bob@new.test answers with the claimant of bob@old.test: %v", names)
	}
	en := after.mustRegister(regEvent(t, y, after.now(), "y", nostr.Tag{"nip05", "bob@new.test"}))
	if en.Gates.NIP05 == nil || *en.Gates.NIP05 != "bob@new.test" {
		t.Errorf("bob@new.test not granted: %+v", en.Gates)
	}
	if names := after.wellKnownNames("bob"); len(names) != 1 || names["bob"] != y.pk {
		t.Errorf("well-known after the new claim: %v, want bob: %s", names, y.pk)
	}
	// The old claim is not lost: back on the old domain, it answers again.
	back := newEnvOn(t, store, Options{NIP05Domain: "old.test", NIP05OpenClaims: true})
	if names := back.wellKnownNames("bob"); names["bob"] != x.pk {
		t.Errorf("well-known back on old.test: %v, want bob: %s", names, x.pk)
	}
}

func TestLocalNIP05ClaimsOfTwoSitesOnOneStore(t *testing.T) {
	store := openStore(t)
	siteA := newEnvOn(t, store, Options{NIP05Domain: "a.test", NIP05OpenClaims: true})
	siteB := newEnvOn(t, store, Options{NIP05Domain: "b.test", NIP05OpenClaims: true})
	x, y := newAgent(t), newAgent(t)
	siteA.mustRegister(regEvent(t, x, siteA.now(), "x", nostr.Tag{"nip05", "bob@a.test"}))
	if names := siteB.wellKnownNames("bob"); len(names) != 0 {
		t.Errorf("b.test answers with the claimant of bob@a.test: %v", names)
	}
	r := siteB.register(regEvent(t, y, siteB.now(), "y", nostr.Tag{"nip05", "bob@b.test"}))
	if r.status != http.StatusCreated {
		t.Fatalf("bob@b.test refused: %d %s", r.status, r.body)
	}
	if names := siteA.wellKnownNames("bob"); names["bob"] != x.pk {
		t.Errorf("a.test: %v, want bob: %s", names, x.pk)
	}
	if names := siteB.wellKnownNames("bob"); names["bob"] != y.pk {
		t.Errorf("b.test: %v, want bob: %s", names, y.pk)
	}
	// Each claim stays first come on its own domain.
	if r := siteA.register(regEvent(t, newAgent(t), siteA.now(), "z", nostr.Tag{"nip05", "bob@a.test"})); r.status != http.StatusBadRequest {
		t.Errorf("second claim of bob@a.test: %d %s", r.status, r.body)
	}
	if en := siteA.mustEntry(x.pk); en.Gates.NIP05 == nil || *en.Gates.NIP05 != "bob@a.test" {
		t.Errorf("a.test's document: %+v", en.Gates)
	}
	// b.test checks bob@a.test as a remote identifier, and cannot reach
	// it past the grace period: a.test still vouches for its own claim.
	later := t0.Add(100 * time.Hour)
	siteA.clock.Set(later)
	siteB.clock.Set(later)
	if _, err := siteB.dir.CheckNIP05Now(t.Context()); err != nil {
		t.Fatal(err)
	}
	if en := siteA.mustEntry(x.pk); en.Gates.NIP05 == nil || en.Level != 1 {
		t.Errorf("a.test's document after b.test's failed checks: %+v level %d", en.Gates, en.Level)
	}
}

// TestNIP05RecheckedAtStart: identifiers that fell due while the server was
// down are checked when it starts, not an hour (one schedule tick) later.
func TestNIP05RecheckedAtStart(t *testing.T) {
	dom := newNIP05Domain(t)
	store := openStore(t)
	first := newEnvOn(t, store, Options{Fetcher: dom.fetcher()})
	a := newAgent(t)
	dom.set("bot", a.pk)
	first.mustRegister(regEvent(t, a, first.now(), "bot", nostr.Tag{"nip05", "bot@example.com"}))
	first.srv.Close()
	first.dir.Close()

	dom.set("bot", newAgent(t).pk)
	clock := newClock()
	clock.Advance(25 * time.Hour)
	second := newEnvOn(t, store, Options{Fetcher: dom.fetcher(), Now: clock.Now, NIP05CheckEvery: time.Hour, RegenerateDelay: 10 * time.Millisecond})
	storagetest.Eventually(t, "the identifier is rechecked at start and cleared", func() bool {
		doc := second.fetchDocument()
		return len(doc.Agents) == 1 && doc.Agents[0].Gates.NIP05 == nil
	})
}
