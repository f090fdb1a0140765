package directory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip19"

	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

func TestDocumentHasEveryFieldOfTheSpecWithItsType(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	reg := regEvent(t, a, e.now(), "Scout", nostr.Tag{"purpose", "finds things"},
		nostr.Tag{"capability", "search"}, nostr.Tag{"capability", "summarize"})
	e.mustRegister(reg)
	if err := e.dir.Rebuild(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := e.do(http.MethodGet, DefaultPath, nil)
	if r.status != http.StatusOK {
		t.Fatalf("status %d", r.status)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q", ct)
	}
	var doc map[string]any
	r.json(t, &doc)
	if keys := sortedKeys(doc); !slices.Equal(keys, []string{"agents", "generated_at", "version"}) {
		t.Fatalf("document keys = %v", keys)
	}
	if doc["version"] != float64(2) {
		t.Errorf("version = %v, want 2", doc["version"])
	}
	if doc["generated_at"] != float64(e.now().Unix()) {
		t.Errorf("generated_at = %v, want %d (Unix seconds)", doc["generated_at"], e.now().Unix())
	}
	agents := doc["agents"].([]any)
	if len(agents) != 1 {
		t.Fatalf("%d agents", len(agents))
	}
	got := agents[0].(map[string]any)
	want := []string{"active_days", "capabilities", "credit_score", "first_registered_at", "flags", "gates", "level",
		"maintainer", "name", "npub", "operator", "profile_url", "pubkey", "purpose", "registration_event"}
	if keys := sortedKeys(got); !slices.Equal(keys, want) {
		t.Fatalf("entry keys = %v, want %v", keys, want)
	}
	if got["pubkey"] != a.pk {
		t.Errorf("pubkey = %v", got["pubkey"])
	}
	if prefix, v, err := nip19.Decode(got["npub"].(string)); err != nil || prefix != "npub" || v != a.pk {
		t.Errorf("npub %v does not encode the pubkey", got["npub"])
	}
	if got["name"] != "Scout" || got["purpose"] != "finds things" {
		t.Errorf("name/purpose = %v/%v", got["name"], got["purpose"])
	}
	if caps := got["capabilities"].([]any); len(caps) != 2 || caps[0] != "search" || caps[1] != "summarize" {
		t.Errorf("capabilities = %v", caps)
	}
	if got["operator"] != nil {
		t.Errorf("operator = %v, want null when not stated", got["operator"])
	}
	if got["level"] != float64(0) {
		t.Errorf("level = %v", got["level"])
	}
	gates := got["gates"].(map[string]any)
	if keys := sortedKeys(gates); !slices.Equal(keys, []string{"nip05", "pow_bits", "pow_ok"}) {
		t.Errorf("gates keys = %v", keys)
	}
	if gates["pow_bits"] != float64(0) || gates["pow_ok"] != false || gates["nip05"] != nil {
		t.Errorf("gates = %v", gates)
	}
	if flags, ok := got["flags"].([]any); !ok || len(flags) != 0 {
		t.Errorf("flags = %#v, want []", got["flags"])
	}
	if got["first_registered_at"] != float64(reg.CreatedAt) {
		t.Errorf("first_registered_at = %v, want %d", got["first_registered_at"], reg.CreatedAt)
	}
	if got["active_days"] != float64(0) || got["maintainer"] != false {
		t.Errorf("active_days/maintainer = %v/%v", got["active_days"], got["maintainer"])
	}
	if v, ok := got["credit_score"]; !ok || v != nil {
		t.Errorf("credit_score = %v, want null", v)
	}
	if got["registration_event"] != reg.ID {
		t.Errorf("registration_event = %v, want %s", got["registration_event"], reg.ID)
	}
	if got["profile_url"] != "/agents/"+a.npub() {
		t.Errorf("profile_url = %v", got["profile_url"])
	}
}

func TestDocumentOperatorIsAStringWhenStated(t *testing.T) {
	e := newEnv(t, Options{BaseURL: "https://hearth.example/"})
	a := newAgent(t)
	e.mustRegister(regEvent(t, a, e.now(), "Op", nostr.Tag{"operator", "ACME Labs"}))
	en := e.mustEntry(a.pk)
	if en.Operator == nil || *en.Operator != "ACME Labs" {
		t.Errorf("operator = %v", en.Operator)
	}
	if en.ProfileURL != "https://hearth.example/agents/"+a.npub() {
		t.Errorf("profile_url = %q", en.ProfileURL)
	}
}

func TestDocumentEmptyListsNoAgents(t *testing.T) {
	e := newEnv(t, Options{})
	r := e.do(http.MethodGet, DefaultPath, nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"agents":[]`) {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestDocumentServedAtConfiguredPath(t *testing.T) {
	e := newEnv(t, Options{Path: "/agents.json"})
	if r := e.do(http.MethodGet, "/agents.json", nil); r.status != http.StatusOK {
		t.Errorf("configured path: %d", r.status)
	}
	if e.dir.Handles(httpRequest(DefaultPath)) {
		t.Error("default path still handled")
	}
}

func TestDocumentETagAndNotModified(t *testing.T) {
	e := newEnv(t, Options{})
	r := e.do(http.MethodGet, DefaultPath, nil)
	etag := r.header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || strings.HasPrefix(etag, "W/") {
		t.Fatalf("ETag %q is not a strong validator", etag)
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		r := e.do(http.MethodGet, DefaultPath, nil, "If-None-Match", inm)
		if r.status != http.StatusNotModified || len(r.body) != 0 {
			t.Errorf("If-None-Match %s: %d with %d bytes, want 304 and no body", inm, r.status, len(r.body))
		}
		if r.header.Get("ETag") != etag {
			t.Errorf("304 without the ETag")
		}
	}
	if r := e.do(http.MethodGet, DefaultPath, nil, "If-None-Match", `"stale"`); r.status != http.StatusOK {
		t.Errorf("stale If-None-Match: %d, want 200", r.status)
	}

	// A change gives a new ETag; the old one no longer matches.
	e.mustRegister(regEvent(t, newAgent(t), e.now(), "New"))
	e.dir.Rebuild(t.Context())
	r2 := e.do(http.MethodGet, DefaultPath, nil, "If-None-Match", etag)
	if r2.status != http.StatusOK || r2.header.Get("ETag") == etag {
		t.Errorf("after a change: %d ETag %s", r2.status, r2.header.Get("ETag"))
	}
}

func TestDocumentUnchangedKeepsETagAndGeneratedAt(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustRegister(regEvent(t, newAgent(t), e.now(), "Same"))
	d1 := e.document()
	etag := e.do(http.MethodGet, DefaultPath, nil).header.Get("ETag")
	e.clock.Advance(time.Minute)
	d2 := e.document()
	if d2.GeneratedAt != d1.GeneratedAt || e.do(http.MethodGet, DefaultPath, nil).header.Get("ETag") != etag {
		t.Errorf("a rebuild without changes moved generated_at or the ETag")
	}
}

func TestDocumentKeepsETagAndGeneratedAtAcrossRestarts(t *testing.T) {
	store := openStore(t)
	first := newEnvOn(t, store, Options{})
	first.mustRegister(regEvent(t, newAgent(t), first.now(), "Steady"))
	d1 := first.document()
	r1 := first.do(http.MethodGet, DefaultPath, nil)
	first.srv.Close()
	first.dir.Close()

	// A restart (or a reload) an hour later: a new Directory on the store.
	c := newClock()
	c.Advance(time.Hour)
	second := newEnvOn(t, store, Options{Now: c.Now})
	r2 := second.do(http.MethodGet, DefaultPath, nil)
	var d2 Document
	r2.json(t, &d2)
	if d2.GeneratedAt != d1.GeneratedAt || r2.header.Get("ETag") != r1.header.Get("ETag") ||
		r2.header.Get("Last-Modified") != r1.header.Get("Last-Modified") {
		t.Errorf("after a restart without changes: generated_at %d -> %d, ETag %s -> %s, Last-Modified %s -> %s",
			d1.GeneratedAt, d2.GeneratedAt, r1.header.Get("ETag"), r2.header.Get("ETag"),
			r1.header.Get("Last-Modified"), r2.header.Get("Last-Modified"))
	}
	if r := second.do(http.MethodGet, DefaultPath, nil, "If-None-Match", r1.header.Get("ETag")); r.status != http.StatusNotModified {
		t.Errorf("the ETag from before the restart: %d, want 304", r.status)
	}
	// A change after the restart moves them.
	second.mustRegister(regEvent(t, newAgent(t), c.Now(), "New"))
	if d3 := second.document(); d3.GeneratedAt != c.Now().Unix() {
		t.Errorf("after a change: generated_at %d, want %d", d3.GeneratedAt, c.Now().Unix())
	}
}

func TestDocumentCacheHeaders(t *testing.T) {
	e := newEnv(t, Options{MaxAge: 2 * time.Minute})
	r := e.do(http.MethodGet, DefaultPath, nil)
	if got := r.header.Get("Cache-Control"); got != "public, max-age=120" {
		t.Errorf("Cache-Control = %q", got)
	}
	if r.header.Get("Last-Modified") == "" {
		t.Error("no Last-Modified")
	}
	h := e.do(http.MethodHead, DefaultPath, nil)
	if h.status != http.StatusOK || len(h.body) != 0 || h.header.Get("ETag") == "" {
		t.Errorf("HEAD: %d, %d bytes", h.status, len(h.body))
	}
}

func TestDocumentCORS(t *testing.T) {
	e := newEnv(t, Options{})
	r := e.do(http.MethodGet, DefaultPath, nil, "Origin", "https://elsewhere.example")
	if r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("GET: Access-Control-Allow-Origin = %q", r.header.Get("Access-Control-Allow-Origin"))
	}
	p := e.do(http.MethodOptions, DefaultPath, nil, "Origin", "https://elsewhere.example", "Access-Control-Request-Method", "GET")
	if p.status != http.StatusNoContent || p.header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(p.header.Get("Access-Control-Allow-Methods"), "GET") {
		t.Errorf("preflight: %d %v", p.status, p.header)
	}
}

func TestDocumentRefusesOtherMethods(t *testing.T) {
	e := newEnv(t, Options{})
	r := e.do(http.MethodPost, DefaultPath, []byte(`{}`))
	if r.status != http.StatusMethodNotAllowed || !hasPrefix(r.errorMessage(t), "invalid:") || r.header.Get("Allow") == "" {
		t.Errorf("POST: %d %s", r.status, r.body)
	}
}

func TestDocumentOrderIsLevelThenFirstRegisteredThenPubkey(t *testing.T) {
	e := newEnv(t, Options{})
	// Two level-0 agents registered at the same second, one earlier, and
	// a level-1 agent registered last.
	early := newAgent(t)
	e.mustRegister(regEvent(t, early, e.now().Add(-10*time.Minute), "early"))
	x, y := newAgent(t), newAgent(t)
	e.mustRegister(regEvent(t, x, e.now(), "x"))
	e.mustRegister(regEvent(t, y, e.now(), "y"))
	pow := newAgent(t)
	e.mustRegister(minedRegistration(t, pow, e.now().Add(time.Minute), "pow", 8))

	tied := []string{x.pk, y.pk}
	slices.Sort(tied)
	want := []string{pow.pk, early.pk, tied[0], tied[1]}
	var got []string
	for _, a := range e.document().Agents {
		got = append(got, a.Pubkey)
	}
	if !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

func TestDocumentRegeneratedShortlyAfterAChange(t *testing.T) {
	e, a := envWithAgent(t, Options{RegenerateDelay: 20 * time.Millisecond}, "Debounced")
	// No Rebuild call: the debounced rebuild publishes the agent.
	storagetest.Eventually(t, "the new agent appears in the served document", func() bool {
		doc := e.fetchDocument()
		return len(doc.Agents) == 1 && doc.Agents[0].Pubkey == a.pk
	})
}

func TestDocumentRegeneratedOnScheduleForTimeDrivenChanges(t *testing.T) {
	e := newEnv(t, Options{RegenerateEvery: 20 * time.Millisecond, BurstMaxPosts: 2})
	a := newAgent(t)
	e.mustRegister(minedRegistration(t, a, e.now(), "bursty", 8))
	e.clock.Advance(time.Minute)
	e.mustPost(note(t, a, e.now(), "a"), note(t, a, e.now(), "b"), note(t, a, e.now(), "c"))
	storagetest.Eventually(t, "the burst flag appears", func() bool {
		doc := e.fetchDocument()
		return len(doc.Agents) == 1 && slices.Equal(doc.Agents[0].Flags, []string{FlagBurst})
	})
	// Time passes and nothing else happens: the schedule clears the flag.
	e.clock.Advance(25 * time.Hour)
	storagetest.Eventually(t, "the burst flag clears without new events", func() bool {
		doc := e.fetchDocument()
		return len(doc.Agents) == 1 && len(doc.Agents[0].Flags) == 0 && doc.Agents[0].Level == 1
	})
}

func TestMaintainerIsMarked(t *testing.T) {
	m1, m2, other := newAgent(t), newAgent(t), newAgent(t)
	e := newEnv(t, Options{Maintainers: []string{m1.npub(), strings.ToUpper(m2.pk)}})
	for _, a := range []agentKey{m1, m2, other} {
		e.mustRegister(regEvent(t, a, e.now(), "agent"))
	}
	for _, c := range []struct {
		a    agentKey
		want bool
	}{{m1, true}, {m2, true}, {other, false}} {
		if got := e.mustEntry(c.a.pk).Maintainer; got != c.want {
			t.Errorf("maintainer of %s = %v, want %v", c.a.pk[:8], got, c.want)
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	store := openStore(t)
	for name, o := range map[string]Options{
		"http relay":         {Relays: []string{"http://relay.example"}},
		"relay without host": {Relays: []string{"wss://"}},
		"relay credentials":  {Relays: []string{"wss://u:p@relay.example"}},
		"bad maintainer":     {Maintainers: []string{"npub1nope"}},
		"relative path":      {Path: "directory.json"},
		"bad nip05 domain":   {NIP05Domain: "not a domain"},
		"template ratio":     {TemplateRatio: 1.5},
		"kind":               {Kind: 70000},
	} {
		if d, err := New(store, o); err == nil {
			d.Close()
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	e := newEnv(t, Options{})
	o := Options{}.withDefaults()
	if o.Path != "/directory.json" || o.Kind != 31339 || o.PowMinBits != 20 || o.NIP05Recheck != 24*time.Hour ||
		o.NIP05Grace != 72*time.Hour || o.BurstMaxPosts != 30 || o.BurstWindow != 10*time.Minute ||
		o.TemplateMinPosts != 5 || o.TemplateRatio != 0.6 || o.TemplateSample != 20 {
		t.Errorf("defaults: %+v", o)
	}
	if e.dir.Options().Path != DefaultPath {
		t.Errorf("Options() = %+v", e.dir.Options())
	}
}

func TestHandles(t *testing.T) {
	e := newEnv(t, Options{NIP05Domain: "agents.test"})
	plain := newEnv(t, Options{})
	for _, c := range []struct {
		path       string
		want, ours bool // with and without nip05_domain
	}{
		{"/directory.json", true, true},
		{RegisterPath, true, true},
		{EventsPath, true, true},
		{"/agents/npub1xyz", true, true},
		{"/agents/", false, false},
		{"/agents/npub1xyz/extra", false, false},
		{"/.well-known/nostr.json", true, false},
		{"/other", false, false},
	} {
		if got := e.dir.Handles(httpRequest(c.path)); got != c.want {
			t.Errorf("with nip05_domain, Handles(%s) = %v", c.path, got)
		}
		if got := plain.dir.Handles(httpRequest(c.path)); got != c.ours {
			t.Errorf("without nip05_domain, Handles(%s) = %v", c.path, got)
		}
	}
}

func httpRequest(path string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://hearth.example"+path, nil)
	return r
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestDocumentIfModifiedSince: the Last-Modified sent is honoured as a
// validator (RFC 9110 13.1.3), and browsers on another origin may read both
// validators (Access-Control-Expose-Headers), also from a 304.
func TestDocumentIfModifiedSince(t *testing.T) {
	e := newEnv(t, Options{})
	r := e.do(http.MethodGet, DefaultPath, nil, "Origin", "https://elsewhere.example")
	lm := r.header.Get("Last-Modified")
	lmTime, err := http.ParseTime(lm)
	if err != nil {
		t.Fatalf("Last-Modified %q: %v", lm, err)
	}
	exposed := map[string]bool{}
	for _, h := range strings.Split(r.header.Get("Access-Control-Expose-Headers"), ",") {
		exposed[strings.ToLower(strings.TrimSpace(h))] = true
	}
	if !exposed["etag"] || !exposed["last-modified"] {
		t.Errorf("Access-Control-Expose-Headers = %q, want ETag and Last-Modified", r.header.Get("Access-Control-Expose-Headers"))
	}
	for _, ims := range []string{lm, lmTime.Add(time.Hour).Format(http.TimeFormat)} {
		r := e.do(http.MethodGet, DefaultPath, nil, "If-Modified-Since", ims)
		if r.status != http.StatusNotModified || len(r.body) != 0 {
			t.Errorf("If-Modified-Since %s: %d with %d bytes, want 304 and no body", ims, r.status, len(r.body))
		}
		if r.header.Get("Last-Modified") != lm || r.header.Get("Access-Control-Expose-Headers") == "" {
			t.Errorf("304 without Last-Modified or exposed headers: %v", r.header)
		}
	}
	for _, ims := range []string{lmTime.Add(-time.Second).Format(http.TimeFormat), "yesterday"} {
		if r := e.do(http.MethodGet, DefaultPath, nil, "If-Modified-Since", ims); r.status != http.StatusOK || len(r.body) == 0 {
			t.Errorf("If-Modified-Since %s: %d, want 200 with the document", ims, r.status)
		}
	}
	// If-None-Match takes precedence: a stale ETag gets the document even
	// with a current If-Modified-Since.
	if r := e.do(http.MethodGet, DefaultPath, nil, "If-None-Match", `"stale"`, "If-Modified-Since", lm); r.status != http.StatusOK {
		t.Errorf("stale If-None-Match with current If-Modified-Since: %d, want 200", r.status)
	}
	// A preflight allows the header.
	if r := e.do(http.MethodOptions, DefaultPath, nil); !strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "If-Modified-Since") {
		t.Errorf("preflight Access-Control-Allow-Headers = %q", r.header.Get("Access-Control-Allow-Headers"))
	}
}

// A rebuild copies the entries that did not change from the document
// served and encodes the others: the bytes are those a full build makes.
func TestRebuildAfterAChangeMatchesAFullBuild(t *testing.T) {
	store := openStore(t)
	e := newEnvOn(t, store, Options{})
	keys := []agentKey{newAgent(t), newAgent(t), newAgent(t)}
	for i, k := range keys {
		e.mustRegister(regEvent(t, k, e.now().Add(time.Duration(i)*time.Second), fmt.Sprintf("agent %d", i)))
	}
	e.document()
	e.clock.Advance(time.Hour)
	e.mustPost(note(t, keys[1], e.now(), "a change in the middle"))
	e.clock.Advance(time.Minute)
	e.mustRegister(regEvent(t, keys[2], e.now(), "renamed, now longer than before"))
	e.document()
	got := e.do(http.MethodGet, DefaultPath, nil).body

	full := newEnvOn(t, store, Options{Now: e.clock.Now}) // builds from scratch
	want := full.do(http.MethodGet, DefaultPath, nil).body
	if !bytes.Equal(got, want) {
		t.Errorf("incremental:\n%s\nfull:\n%s", got, want)
	}
}

// A rebuild assembles again only the runs of entries (chunks) that
// changed: agents removed, added back and added, in several chunks, give
// the bytes of a document built from scratch.
func TestRebuildOfManyChunksMatchesAFullBuild(t *testing.T) {
	store := openStore(t)
	if err := seedAgents(store, 3000, t0); err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, store, Options{})
	before := e.document()
	if n := len(e.dir.doc.Load().chunks); n < 3 {
		t.Fatalf("the document of 3000 agents is in %d chunks; the test needs several", n)
	}
	// What Ban and Unban do after parsing the key (the seeded keys are
	// random bytes, not points on the curve).
	for _, i := range []int{0, 1, 1500, 2999} {
		pk := before.Agents[i].Pubkey
		if err := e.dir.agents.Ban(t.Context(), pk, "test", e.now()); err != nil {
			t.Fatal(err)
		}
		if err := e.dir.afterModeration(t.Context(), pk); err != nil {
			t.Fatal(err)
		}
	}
	pk := before.Agents[1500].Pubkey
	if err := e.dir.agents.Unban(t.Context(), pk); err != nil {
		t.Fatal(err)
	}
	if err := e.dir.afterModeration(t.Context(), pk); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t)
	e.mustRegister(minedRegistration(t, a, e.now(), "newcomer", 8))
	e.document()
	e.clock.Advance(time.Minute)
	e.mustPost(note(t, a, e.now(), "hello"))
	e.document()
	got := e.do(http.MethodGet, DefaultPath, nil).body

	full := newEnvOn(t, store, Options{Now: e.clock.Now}) // builds from scratch
	want := full.do(http.MethodGet, DefaultPath, nil).body
	if !bytes.Equal(got, want) {
		t.Fatalf("incremental (%d bytes) and full (%d bytes) documents differ", len(got), len(want))
	}
	var doc Document
	if err := json.Unmarshal(got, &doc); err != nil || len(doc.Agents) != 2998 {
		t.Fatalf("document: %d agents, %v", len(doc.Agents), err)
	}
}

// sameEntry compares every field of an entry: changing any one makes the
// entries differ, and equal values behind other pointers do not.
func TestSameEntryCoversEveryField(t *testing.T) {
	op, id := "op", "x@y.example"
	base := Entry{Pubkey: "p", Npub: "n", Name: "a", Purpose: "b", Capabilities: []string{"c"}, Operator: &op,
		Level: 1, Gates: Gates{PowBits: 1, NIP05: &id}, Flags: []string{}, FirstRegisteredAt: 1, ActiveDays: 1,
		RegistrationEvent: "r", ProfileURL: "u"}
	op2, id2 := op, id
	copied := base
	copied.Operator, copied.Gates.NIP05, copied.Capabilities = &op2, &id2, []string{"c"}
	if !sameEntry(&copied, &base) {
		t.Error("a copy of an entry differs from it")
	}
	mutated := base
	var change func(v reflect.Value, path string)
	change = func(v reflect.Value, path string) {
		for i := range v.NumField() {
			f, name := v.Field(i), path+v.Type().Field(i).Name
			if f.Kind() == reflect.Struct {
				change(f, name+".")
				continue
			}
			old := reflect.New(f.Type()).Elem()
			old.Set(f)
			switch f.Kind() {
			case reflect.String:
				f.SetString(f.String() + "!")
			case reflect.Int, reflect.Int64:
				f.SetInt(f.Int() + 1)
			case reflect.Bool:
				f.SetBool(!f.Bool())
			case reflect.Slice:
				f.Set(reflect.Append(f, reflect.ValueOf("more")))
			case reflect.Pointer:
				if f.IsNil() {
					f.Set(reflect.New(f.Type().Elem()))
				} else {
					f.Set(reflect.Zero(f.Type()))
				}
			default:
				t.Fatalf("%s: kind %s not covered by this test", name, f.Kind())
			}
			if sameEntry(&mutated, &base) {
				t.Errorf("changing %s leaves the entry the same", name)
			}
			f.Set(old)
		}
	}
	change(reflect.ValueOf(&mutated).Elem(), "")
}

// appendEntry writes what json.Marshal writes, for every kind of field and
// every character class encoding/json escapes.
func TestAppendEntryIsJSONMarshal(t *testing.T) {
	op, id, score := "Ops & <Co>", "bot@example.com", 7
	odd := []string{"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "\b\f\n\r\t\x00\x01\x1f\x7f",
		"é ü 日本 🤖", "\u2028\u2029", "bad \xff utf-8 \xc3", "\u00a0\ufeff"}
	entries := []Entry{
		{},
		{Capabilities: []string{}, Flags: []string{}},
		{Pubkey: "p", Npub: "n", Name: "a", Purpose: "b", Capabilities: []string{"c", "d"}, Operator: &op, Level: 2,
			Gates: Gates{PowBits: 21, PowOK: true, NIP05: &id}, Flags: []string{FlagTemplate, FlagBurst},
			FirstRegisteredAt: -5, ActiveDays: 3, Maintainer: true, CreditScore: &score, RegistrationEvent: "r", ProfileURL: "u"},
	}
	for _, s := range odd {
		s := s
		entries = append(entries, Entry{Name: s, Purpose: s + s, Capabilities: []string{s}, Operator: &s, Gates: Gates{NIP05: &s},
			Flags: []string{s}, RegistrationEvent: s, ProfileURL: s, Pubkey: s, Npub: s})
	}
	for i := range entries {
		want, err := json.Marshal(&entries[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := appendEntry(nil, &entries[i]); !bytes.Equal(got, want) {
			t.Errorf("entry %d:\n got %s\nwant %s", i, got, want)
		}
	}
}
