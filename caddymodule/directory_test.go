package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip13"
	"github.com/nbd-wtf/go-nostr/nip19"

	"github.com/hearthkit/caddy-hearth/internal/testrelay"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// memoryRelay is a khatru relay on loopback keeping events in memory, and
// a function that stores an event in it without broadcasting it
// (subscribers read it when they next query).
func memoryRelay(t *testing.T) (*httptest.Server, *khatru.Relay, func(*nostr.Event)) {
	relay := khatru.NewRelay()
	var events testrelay.Events
	events.Attach(relay)
	srv := httptest.NewServer(relay)
	t.Cleanup(srv.Close)
	return srv, relay, events.Add
}

type dirAgent struct {
	Pubkey            string   `json:"pubkey"`
	Npub              string   `json:"npub"`
	Name              string   `json:"name"`
	Purpose           string   `json:"purpose"`
	Capabilities      []string `json:"capabilities"`
	Operator          *string  `json:"operator"`
	Level             int      `json:"level"`
	Flags             []string `json:"flags"`
	FirstRegisteredAt int64    `json:"first_registered_at"`
	ActiveDays        int      `json:"active_days"`
	Maintainer        bool     `json:"maintainer"`
	CreditScore       any      `json:"credit_score"`
	RegistrationEvent string   `json:"registration_event"`
	ProfileURL        string   `json:"profile_url"`
	Gates             struct {
		PowBits int     `json:"pow_bits"`
		PowOK   bool    `json:"pow_ok"`
		NIP05   *string `json:"nip05"`
	} `json:"gates"`
}

type dirDocument struct {
	Version     int        `json:"version"`
	GeneratedAt int64      `json:"generated_at"`
	Agents      []dirAgent `json:"agents"`
}

func fetchDirectory(t *testing.T) (dirDocument, string) {
	t.Helper()
	resp, err := http.Get(testSite + "/directory.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc dirDocument
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &doc); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("directory: HTTP %d: %v\n%s", resp.StatusCode, err, body)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Cache-Control") == "" {
		t.Fatalf("directory headers: %v", resp.Header)
	}
	return doc, resp.Header.Get("ETag")
}

// waitDirectory polls the document until ok holds (the document is
// rebuilt shortly after a change, not synchronously). The minute is only a
// backstop for a loaded machine under the race detector.
func waitDirectory(t *testing.T, what string, ok func(dirDocument) bool) dirDocument {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		doc, _ := fetchDirectory(t)
		if ok(doc) {
			return doc
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: document never showed it: %+v", what, doc)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// agentPosts is the number of posts the admin API counts for the agent
// pk (-1 when it lists no such agent).
func agentPosts(t *testing.T, pk string) int {
	t.Helper()
	var agents []struct {
		Pubkey string `json:"pubkey"`
		Posts  int    `json:"posts"`
	}
	adminJSONOK(t, http.MethodGet, "/hearth/agents", "", http.StatusOK, &agents)
	for _, a := range agents {
		if a.Pubkey == pk {
			return a.Posts
		}
	}
	return -1
}

func postJSON(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func TestDirectoryThroughCaddy(t *testing.T) {
	relay, khatruRelay, _ := memoryRelay(t)
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	npub, _ := nip19.EncodePublicKey(pk)
	maintainerSK := nostr.GeneratePrivateKey()
	maintainerPK, _ := nostr.GetPublicKey(maintainerSK)
	maintainerNpub, _ := nip19.EncodePublicKey(maintainerPK)

	site := fmt.Sprintf(`%s {
	hearth_directory {
		pow_min_bits 8
		maintainer %s
		relays ws://%s
		nip05_domain example.org
		allow_private_addresses
		regenerate_delay 50ms
	}
	respond "site"
}
`, testSite, maintainerNpub, strings.TrimPrefix(relay.URL, "http://"))
	startHearth(t, hearthCaddyfile(t.TempDir(), site))

	sign := func(key string, evt nostr.Event) nostr.Event {
		if err := evt.Sign(key); err != nil {
			t.Fatal(err)
		}
		return evt
	}
	register := func(key, pub, name string, at time.Time, bits int, extra ...nostr.Tag) nostr.Event {
		evt := nostr.Event{PubKey: pub, Kind: 31339, CreatedAt: nostr.Timestamp(at.Unix()),
			Tags: append(nostr.Tags{{"d", "agent"}, {"name", name}}, extra...)}
		if bits > 0 {
			nonce, err := nip13.DoWork(context.Background(), evt, bits)
			if err != nil {
				t.Fatal(err)
			}
			evt.Tags = append(evt.Tags, nonce)
		}
		return sign(key, evt)
	}

	// Registration with proof of work, a local NIP-05 name, capabilities.
	now := time.Now()
	reg := register(sk, pk, "Baker Bot", now, 10, nostr.Tag{"purpose", "Bakes bread"},
		nostr.Tag{"capability", "bake"}, nostr.Tag{"capability", "slice"}, nostr.Tag{"operator", "Jane"},
		nostr.Tag{"nip05", "baker@example.org"})
	status, body := postJSON(t, testSite+"/api/v1/agents/register", reg)
	if status != http.StatusCreated {
		t.Fatalf("register: HTTP %d: %s", status, body)
	}
	// The same event again is a replay.
	status, body = postJSON(t, testSite+"/api/v1/agents/register", map[string]any{"event": reg})
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"invalid: `) {
		t.Fatalf("replay: HTTP %d: %s", status, body)
	}
	// A bad signature stores nothing.
	forged := register(sk, pk, "Forged", now.Add(time.Second), 0)
	forged.Sig = strings.Repeat("0", 128)
	if status, body = postJSON(t, testSite+"/api/v1/agents/register", forged); status != http.StatusBadRequest ||
		!strings.Contains(string(body), "invalid:") {
		t.Fatalf("forged: HTTP %d: %s", status, body)
	}
	mreg := register(maintainerSK, maintainerPK, "Site Bot", now, 0)
	if status, body = postJSON(t, testSite+"/api/v1/agents/register", mreg); status != http.StatusCreated {
		t.Fatalf("maintainer register: HTTP %d: %s", status, body)
	}

	// The local name waits for the operator: not in nostr.json until
	// `caddy hearth agent approve`.
	var pending struct{ Names map[string]string }
	getJSON(t, testSite+"/.well-known/nostr.json?name=baker", &pending)
	if len(pending.Names) != 0 {
		t.Fatalf("nostr.json vouches for an unapproved name: %+v", pending)
	}
	addr := "--address=" + testAdmin
	if out, err := runHearth(t, "", "agent", "names", addr); err != nil || !strings.Contains(out, "baker@example.org") || !strings.Contains(out, "pending") {
		t.Fatalf("agent names: %q, %v", out, err)
	}
	if out, err := runHearth(t, "", "agent", "approve", "baker", addr); err != nil || !strings.Contains(out, "approved baker@example.org") {
		t.Fatalf("agent approve: %q, %v", out, err)
	}
	if _, err := runHearth(t, "", "agent", "approve", "nobody", addr); err == nil || !strings.Contains(err.Error(), "no agent claims") {
		t.Fatalf("approving a free name: %v", err)
	}
	doc := waitDirectory(t, "registrations", func(d dirDocument) bool {
		return len(d.Agents) == 2 && (d.Agents[0].Gates.NIP05 != nil || d.Agents[1].Gates.NIP05 != nil)
	})
	var baker, site2 dirAgent
	for _, a := range doc.Agents {
		if a.Pubkey == pk {
			baker = a
		} else {
			site2 = a
		}
	}
	if doc.Version != 2 || baker.Npub != npub || baker.Name != "Baker Bot" || baker.Purpose != "Bakes bread" ||
		strings.Join(baker.Capabilities, ",") != "bake,slice" || baker.Operator == nil || *baker.Operator != "Jane" ||
		baker.Level != 1 || !baker.Gates.PowOK || baker.Gates.PowBits != 10 || baker.Gates.NIP05 == nil ||
		*baker.Gates.NIP05 != "baker@example.org" || baker.CreditScore != nil || baker.RegistrationEvent != reg.ID ||
		baker.FirstRegisteredAt != int64(reg.CreatedAt) || baker.Maintainer || !strings.HasSuffix(baker.ProfileURL, "/agents/"+npub) {
		t.Fatalf("baker entry: %+v", baker)
	}
	if !site2.Maintainer || site2.Level != 0 || site2.Gates.NIP05 != nil {
		t.Fatalf("maintainer entry: %+v", site2)
	}

	// ETag and 304.
	_, etag := fetchDirectory(t)
	req, _ := http.NewRequest(http.MethodGet, testSite+"/directory.json", nil)
	req.Header.Set("If-None-Match", etag)
	resp, _ := send(t, req)
	if etag == "" || resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match %q: HTTP %d", etag, resp.StatusCode)
	}

	// The local NIP-05 document.
	var nip05 struct{ Names map[string]string }
	getJSON(t, testSite+"/.well-known/nostr.json?name=baker", &nip05)
	if nip05.Names["baker"] != pk {
		t.Fatalf("nostr.json: %+v", nip05)
	}

	// A post through the events endpoint, one through the relay: both counted.
	// Both dated the same second, so that they fall on one UTC day (active
	// days below) even when the test runs across midnight.
	postedAt := nostr.Now()
	post := sign(sk, nostr.Event{PubKey: pk, Kind: 1, CreatedAt: postedAt, Content: "Fresh rye today"})
	status, body = postJSON(t, testSite+"/api/v1/agents/events", []nostr.Event{post})
	if status != http.StatusOK || !strings.Contains(string(body), "true") {
		t.Fatalf("events: HTTP %d: %s", status, body)
	}
	relayPost := sign(sk, nostr.Event{PubKey: pk, Kind: 1, CreatedAt: postedAt, Content: "Another loaf"})
	// The events endpoint's post goes to the relay too: counted once.
	// Through khatru's own pipeline for a client's EVENT, not a websocket:
	// khatru v0.19.1 broadcasts without its listener lock, a race -race
	// reports while the directory changes its subscription (testrelay.Publish).
	testrelay.Publish(t, khatruRelay, &relayPost, &post)
	// The relay's post arrives through the directory's subscription, in
	// the background: a minute is only a backstop.
	storagetest.Eventually(t, "two posts counted (one from the events endpoint, one from the relay)", func() bool {
		posts := agentPosts(t, pk)
		if posts > 2 {
			t.Fatalf("posts = %d, want 2 (one from the events endpoint, one from the relay)", posts)
		}
		return posts == 2
	})
	waitDirectory(t, "the posts", func(d dirDocument) bool {
		for _, a := range d.Agents {
			if a.Pubkey == pk {
				return a.ActiveDays == 1
			}
		}
		return false
	})

	// Profile page.
	pr, err := http.Get(testSite + "/agents/" + npub)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := io.ReadAll(pr.Body)
	pr.Body.Close()
	if pr.StatusCode != http.StatusOK || !strings.Contains(string(pb), "Baker Bot") || pr.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("profile: HTTP %d", pr.StatusCode)
	}

	// The operator takes the name back.
	var names []map[string]any
	if out, err := runHearth(t, "", "agent", "names", "--json", addr); err != nil || json.Unmarshal([]byte(out), &names) != nil ||
		len(names) != 1 || names[0]["approved"] != true {
		t.Fatalf("agent names --json: %q, %v", out, err)
	}
	if out, err := runHearth(t, "", "agent", "release", "baker@example.org", addr); err != nil || !strings.Contains(out, "released baker@example.org") {
		t.Fatalf("agent release: %q, %v", out, err)
	}
	var released struct{ Names map[string]string }
	getJSON(t, testSite+"/.well-known/nostr.json?name=baker", &released)
	if len(released.Names) != 0 {
		t.Fatalf("nostr.json after release: %+v", released)
	}

	// Moderation through the admin API.
	var agents []map[string]any
	adminJSONOK(t, http.MethodGet, "/hearth/agents", "", http.StatusOK, &agents)
	if len(agents) != 2 {
		t.Fatalf("admin agents: %+v", agents)
	}
	adminJSONOK(t, http.MethodPost, "/hearth/agents/"+npub+"/ban", `{"reason":"spam"}`, http.StatusOK, nil)
	waitDirectory(t, "the ban", func(d dirDocument) bool { return len(d.Agents) == 1 && d.Agents[0].Pubkey == maintainerPK })
	later := sign(sk, nostr.Event{PubKey: pk, Kind: 1, CreatedAt: nostr.Now(), Content: "still here"})
	if _, body = postJSON(t, testSite+"/api/v1/agents/events", []nostr.Event{later}); !strings.Contains(string(body), "blocked:") {
		t.Fatalf("banned agent's post: %s", body)
	}
	if status, _ := adminDo(t, http.MethodPost, "/hearth/agents/not-a-key/ban", ""); status != http.StatusBadRequest {
		t.Fatalf("ban of a bad key: HTTP %d", status)
	}
	adminJSONOK(t, http.MethodPost, "/hearth/agents/"+pk+"/unban", "", http.StatusOK, nil)
	waitDirectory(t, "the unban", func(d dirDocument) bool { return len(d.Agents) == 2 })
}

func TestDirectoryDocumentKeepsETagAndGeneratedAtThroughReload(t *testing.T) {
	dir := t.TempDir()
	site := func(maxAge string) string {
		return fmt.Sprintf("%s {\n\thearth_directory {\n\t\tregenerate_delay 50ms\n\t\tmax_age %s\n\t}\n\trespond \"site\"\n}\n", testSite, maxAge)
	}
	startHearth(t, hearthCaddyfile(dir, site("1m")))
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	evt := nostr.Event{PubKey: pk, Kind: 31339, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"d", "agent"}, {"name", "Steady"}}}
	if err := evt.Sign(sk); err != nil {
		t.Fatal(err)
	}
	if status, body := postJSON(t, testSite+"/api/v1/agents/register", evt); status != http.StatusCreated {
		t.Fatalf("register: HTTP %d: %s", status, body)
	}
	before := waitDirectory(t, "the registration", func(d dirDocument) bool { return len(d.Agents) == 1 })
	_, etag := fetchDirectory(t)

	// Let the clock pass a second, so a document generated again would
	// carry another generated_at, then reload with another config.
	time.Sleep(1100 * time.Millisecond)
	loadCaddyfile(t, hearthCaddyfile(dir, site("2m")))
	after, etag2 := fetchDirectory(t)
	if after.GeneratedAt != before.GeneratedAt || etag2 != etag {
		t.Fatalf("after a reload without agent changes: generated_at %d -> %d, ETag %s -> %s",
			before.GeneratedAt, after.GeneratedAt, etag, etag2)
	}
	req, _ := http.NewRequest(http.MethodGet, testSite+"/directory.json", nil)
	req.Header.Set("If-None-Match", etag)
	resp, _ := send(t, req)
	if resp.StatusCode != http.StatusNotModified || resp.Header.Get("Cache-Control") != "public, max-age=120" {
		t.Fatalf("If-None-Match after the reload: HTTP %d, Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
}
