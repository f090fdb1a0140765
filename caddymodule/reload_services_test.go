package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip13"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// reloadSeed is what both storage_dirs of the reload test hold: the same
// member, API token, session and inbound address (one store copied).
type reloadSeed struct {
	memberID, token, session, inboundID string
}

// seedReloadStores makes dirA's store with a member and her credentials,
// and copies it to dirB, so that every credential works on both.
func seedReloadStores(t *testing.T, dirA, dirB string) reloadSeed {
	t.Helper()
	st, m, token := seedAlice(t, dirA, storage.Options{}, "reload")
	session, err := members.Of(st).CreateSession(t.Context(), m.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apitokens.Of(st).RotateInboundSecret(t.Context(), m.ID, testSite); err != nil {
		t.Fatal(err)
	}
	in, err := apitokens.Of(st).InboundInfo(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", dirA+"/.", dirB).CombinedOutput(); err != nil {
		t.Fatalf("copy store: %v: %s", err, out)
	}
	return reloadSeed{memberID: m.ID, token: token, session: session, inboundID: in.ID}
}

// TestReloadChangingStorageDirDrivesEveryService: while Caddy reloads
// between two storage_dirs (holding the same member and credentials),
// clients use every service at once: GraphQL reads and writes with an API
// token, addArticleFromUrl (the fetch queue, against a local article
// server), the mail webhook, member pages with a session cookie, the
// directory (agent registrations, posts, its document) and the
// directory's relay subscriptions (a khatru relay on loopback holding the
// agents' posts, read by subscriptions that cross every reload). Every answer must
// be one the service gives anyway or a clean 503 with Retry-After (GraphQL:
// HTTP 200 with extensions.status 503); never a 500. Caddy's log (which
// records recovered handler panics, "http: panic serving") must hold no
// panic and no "DB Closed". Every acknowledged label is in one of the two
// stores afterwards.
func TestReloadChangingStorageDirDrivesEveryService(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	logFile := filepath.Join(t.TempDir(), "caddy.log")
	seed := seedReloadStores(t, dirA, dirB)
	const mailSecret = "reload-test-mail-secret-5d1e"
	t.Setenv("HEARTH_TEST_MAIL_SECRET", mailSecret)
	// Posts reach the relay's store without a broadcast: khatru v0.19.1
	// reads its listener list without its lock when it broadcasts
	// (listener.go notifyListeners against addListener/removeListenerId),
	// which -race reports while subscriptions change at every reload. The
	// directory reads them when its subscriptions (re)start and query.
	relay, _, relayStore := memoryRelay(t)
	relayURL := "ws://" + strings.TrimPrefix(relay.URL, "http://")
	article := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>Loaf %s</title></head><body><article><h1>Loaf</h1>%s</article></body></html>`,
			r.URL.Path, strings.Repeat("<p>Flour, water, salt and yeast make bread when the dough rises slowly overnight.</p>", 8))
	}))
	t.Cleanup(article.Close)

	caddyfile := func(dir string) string {
		return testCaddyfile("grace_period 1ms\n"+jsonLogTo(logFile), fmt.Sprintf("storage_dir %q", dir), fmt.Sprintf(`%s {
	hearth_oauth
	hearth_graphql {
		allow_private_addresses
		token_rate_limit off
		member_rate_limit off
		inbound_rate_limit 100000
		mail_webhook_secret {env.HEARTH_TEST_MAIL_SECRET}
		mail_domain in.example.org
	}
	hearth_directory {
		pow_min_bits 4
		relays %s
		allow_private_addresses
		regenerate_delay 20ms
		register_limit_ip 100000 1m
		events_limit_ip 100000 1m
	}
	respond "site"
}
`, testSite, relayURL))
	}
	startHearth(t, caddyfile(dirA))

	var stop atomic.Bool
	var requests, unavailable, resets atomic.Int64
	var failed atomic.Int64
	var failures sync.Map
	fail := func(kind string) {
		failed.Add(1)
		failures.LoadOrStore(kind, true)
	}
	var ackMu sync.Mutex
	var acknowledged []string // labels created with an answer of success
	var counts sync.Map       // service → *atomic.Int64 of served answers
	served := func(service string) {
		v, _ := counts.LoadOrStore(service, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	servedCount := func(service string) int64 {
		v, _ := counts.LoadOrStore(service, new(atomic.Int64))
		return v.(*atomic.Int64).Load()
	}
	services := []string{"graphql read", "graphql write", "fetch queue", "mail webhook", "member pages",
		"directory register", "directory events", "directory document"}

	// send makes one request and classifies the answer; ok says whether
	// the answer (status and body) is one the service gives anyway.
	send := func(client *http.Client, service string, req *http.Request, ok func(status int, b []byte) bool) (int, []byte, bool) {
		resp, err := client.Do(req)
		if err != nil && (strings.Contains(err.Error(), "connection reset") || strings.HasSuffix(err.Error(), "EOF") ||
			strings.Contains(err.Error(), "server closed idle connection")) {
			// As in TestReloadChangingStorageDirWhileRequestsFlow: a
			// connection closed by the old server before the request was
			// read. A handler panic also ends a connection so; the log
			// check below catches those.
			resets.Add(1)
			return 0, nil, false
		}
		requests.Add(1)
		if err != nil {
			fail(service + ": " + err.Error())
			return 0, nil, false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			unavailable.Add(1)
			if resp.Header.Get("Retry-After") == "" {
				fail(service + ": 503 without Retry-After: " + string(b))
			}
			return resp.StatusCode, b, false
		}
		if !ok(resp.StatusCode, b) {
			fail(fmt.Sprintf("%s: HTTP %d: %.300s", service, resp.StatusCode, b))
			return resp.StatusCode, b, false
		}
		served(service)
		return resp.StatusCode, b, true
	}
	// gqlOK accepts a GraphQL answer without errors, or Inboxt's form of a
	// 503: HTTP 200, extensions.status 503, Retry-After (then it says false).
	gqlAnswer := func(service string, b []byte, h func() string) (data json.RawMessage, ok bool) {
		var r struct {
			Data   json.RawMessage `json:"data"`
			Errors []struct {
				Message    string         `json:"message"`
				Extensions map[string]any `json:"extensions"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			fail(service + ": not GraphQL JSON: " + string(b))
			return nil, false
		}
		if len(r.Errors) == 0 {
			return r.Data, true
		}
		if r.Errors[0].Extensions["status"] == float64(503) {
			unavailable.Add(1)
			if h() == "" {
				fail(service + ": extensions.status 503 without Retry-After")
			}
			return nil, false
		}
		fail(fmt.Sprintf("%s: errors %.300s", service, b))
		return nil, false
	}
	gqlRequest := func(query string, vars map[string]any) *http.Request {
		body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
		req, _ := http.NewRequest(http.MethodPost, testSite+"/api/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+seed.token)
		return req
	}
	doGraphQL := func(client *http.Client, service, query string, vars map[string]any) (json.RawMessage, bool) {
		req := gqlRequest(query, vars)
		resp, err := client.Do(req)
		if err != nil {
			if strings.Contains(err.Error(), "connection reset") || strings.HasSuffix(err.Error(), "EOF") ||
				strings.Contains(err.Error(), "server closed idle connection") {
				resets.Add(1)
				return nil, false
			}
			requests.Add(1)
			fail(service + ": " + err.Error())
			return nil, false
		}
		requests.Add(1)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" {
			unavailable.Add(1)
			return nil, false
		}
		if resp.StatusCode != http.StatusOK {
			fail(fmt.Sprintf("%s: HTTP %d: %.300s", service, resp.StatusCode, b))
			return nil, false
		}
		data, ok := gqlAnswer(service, b, func() string { return resp.Header.Get("Retry-After") })
		if ok {
			served(service)
		}
		return data, ok
	}

	workers := map[string]func(client *http.Client, i int){
		"graphql read": func(client *http.Client, _ int) {
			doGraphQL(client, "graphql read", `query { labels { id name } me { id } }`, nil)
		},
		"graphql write": func(client *http.Client, i int) {
			name := fmt.Sprintf("reload-%d", i)
			data, ok := doGraphQL(client, "graphql write", `mutation($data: CreateLabelInput!) { createLabel(data: $data) { id name } }`,
				map[string]any{"data": map[string]any{"name": name, "color": "#aabbcc"}})
			if ok && bytes.Contains(data, []byte(name)) {
				ackMu.Lock()
				acknowledged = append(acknowledged, name)
				ackMu.Unlock()
			}
		},
		"fetch queue": func(client *http.Client, i int) {
			doGraphQL(client, "fetch queue", `mutation($data: AddArticleFromUrlInput!) { addArticleFromUrl(data: $data) { success } }`,
				map[string]any{"data": map[string]any{"url": fmt.Sprintf("%s/loaf-%d", article.URL, i)}})
		},
		"mail webhook": func(client *http.Client, i int) {
			body := fmt.Sprintf(`{"OriginalRecipient":"%s@in.example.org","FromFull":{"Email":"news@bakery.example","Name":"Weekly Bakes"},
				"Subject":"Rye week %d","MessageID":"rye-%d","HtmlBody":"<p>Rye bread and caraway.</p>","TextBody":"Rye bread and caraway."}`, seed.inboundID, i, i)
			req, _ := http.NewRequest(http.MethodPost, testSite+"/api/inbox/items/mail-webhook", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Webhook-Secret", mailSecret)
			send(client, "mail webhook", req, func(status int, _ []byte) bool { return status == http.StatusOK })
		},
		"member pages": func(client *http.Client, i int) {
			path := []string{"/settings", "/settings/api_tokens", "/oauth/authorized_applications"}[i%3]
			req, _ := http.NewRequest(http.MethodGet, testSite+path, nil)
			req.AddCookie(&http.Cookie{Name: account.CookieName, Value: seed.session})
			send(client, "member pages", req, func(status int, b []byte) bool {
				return status == http.StatusOK && bytes.Contains(b, []byte("alice"))
			})
		},
		"directory": func(client *http.Client, i int) {
			sk := nostr.GeneratePrivateKey()
			pk, _ := nostr.GetPublicKey(sk)
			evt := nostr.Event{PubKey: pk, Kind: 31339, CreatedAt: nostr.Now(),
				Tags: nostr.Tags{{"d", "agent"}, {"name", fmt.Sprintf("Reload Bot %d", i)}}}
			nonce, err := nip13.DoWork(context.Background(), evt, 4)
			if err != nil {
				fail("directory: proof of work: " + err.Error())
				return
			}
			evt.Tags = append(evt.Tags, nonce)
			if err := evt.Sign(sk); err != nil {
				fail("directory: sign: " + err.Error())
				return
			}
			b, _ := json.Marshal(evt)
			req, _ := http.NewRequest(http.MethodPost, testSite+"/api/v1/agents/register", bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			if _, _, ok := send(client, "directory register", req, func(status int, _ []byte) bool { return status == http.StatusCreated }); !ok {
				return
			}
			// A post through the events endpoint, one through the relay
			// (which the directory's subscription reads across reloads).
			post := nostr.Event{PubKey: pk, Kind: 1, CreatedAt: nostr.Now(), Content: fmt.Sprintf("Fresh rye %d", i)}
			_ = post.Sign(sk)
			b, _ = json.Marshal([]nostr.Event{post})
			req, _ = http.NewRequest(http.MethodPost, testSite+"/api/v1/agents/events", bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			send(client, "directory events", req, func(status int, _ []byte) bool { return status == http.StatusOK })
			relayPost := nostr.Event{PubKey: pk, Kind: 1, CreatedAt: nostr.Now(), Content: fmt.Sprintf("Another loaf %d", i)}
			_ = relayPost.Sign(sk)
			relayStore(&relayPost)
			req, _ = http.NewRequest(http.MethodGet, testSite+"/directory.json", nil)
			send(client, "directory document", req, func(status int, b []byte) bool {
				return status == http.StatusOK && bytes.Contains(b, []byte(`"agents"`))
			})
		},
	}
	var wg sync.WaitGroup
	for _, work := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 30 * time.Second}
			for i := 0; !stop.Load(); i++ {
				work(client, i)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // every service running before the first reload
	for i := 1; i <= 10; i++ {
		dir := dirA
		if i%2 == 1 {
			dir = dirB
		}
		loadCaddyfile(t, caddyfile(dir))
		time.Sleep(100 * time.Millisecond) // let the relay subscriptions and fetches start on the new store
	}
	// Every service answers on the last config. On a loaded machine the
	// workers may wait a while for a core; the bound is only a backstop.
	servedBefore := map[string]int64{}
	for _, service := range services {
		servedBefore[service] = servedCount(service)
	}
	for _, service := range services {
		storagetest.Eventually(t, service+" served after the last reload", func() bool { return servedCount(service) > servedBefore[service] })
	}
	stop.Store(true)
	wg.Wait()

	// The directory's relay subscription of the last config works: a post
	// on the relay by an agent registered now (which restarts the
	// subscription with the new author) is counted.
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	post := nostr.Event{PubKey: pk, Kind: 1, CreatedAt: nostr.Now(), Content: "After the reloads"}
	if err := post.Sign(sk); err != nil {
		t.Fatal(err)
	}
	relayStore(&post)
	reg := nostr.Event{PubKey: pk, Kind: 31339, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"d", "agent"}, {"name", "After Bot"}}}
	nonce, err := nip13.DoWork(context.Background(), reg, 4)
	if err != nil {
		t.Fatal(err)
	}
	reg.Tags = append(reg.Tags, nonce)
	if err := reg.Sign(sk); err != nil {
		t.Fatal(err)
	}
	if status, body := postJSON(t, testSite+"/api/v1/agents/register", reg); status != http.StatusCreated {
		t.Fatalf("register after the reloads: HTTP %d: %s", status, body)
	}
	// Never counted, the relay subscription is not running.
	storagetest.Eventually(t, "a post on the relay after the reloads counted", func() bool { return agentPosts(t, pk) > 0 })

	// Both stores closed: count what each holds.
	loadCaddyfile(t, fmt.Sprintf("{\n\tadmin %s\n}\n", testAdmin))
	labels := map[string]bool{}
	for _, dir := range []string{dirA, dirB} {
		st, err := storage.Open(dir, storage.Options{})
		if err != nil {
			t.Fatalf("open %s after the reloads: %v", dir, err)
		}
		ls, err := library.Of(st).Labels(t.Context(), seed.memberID)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			labels[l.Name] = true
		}
		st.Close()
	}
	var lost []string
	for _, name := range acknowledged {
		if !labels[name] {
			lost = append(lost, name)
		}
	}

	logData, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, line := range strings.Split(string(logData), "\n") {
		l := strings.ToLower(line)
		if strings.Contains(l, "panic") || strings.Contains(l, "db closed") || strings.Contains(l, `"status":500`) ||
			strings.Contains(l, `"level":"error"`) && strings.Contains(l, `"logger":"http.handlers.`) {
			bad = append(bad, line)
		}
	}
	summary := map[string]int64{}
	counts.Range(func(k, v any) bool { summary[k.(string)] = v.(*atomic.Int64).Load(); return true })
	t.Logf("%d requests, %d clean 503s, %d connections closed before a request was read, during 10 reloads; served: %v",
		requests.Load(), unavailable.Load(), resets.Load(), summary)
	if len(bad) > 0 {
		t.Errorf("%d log lines with a panic, DB Closed, a 500 or a handler's error; first:\n%.6000s", len(bad), strings.Join(bad[:min(10, len(bad))], "\n"))
	}
	if n := failed.Load(); n > 0 {
		var kinds []string
		failures.Range(func(k, _ any) bool { kinds = append(kinds, k.(string)); return len(kinds) < 8 })
		t.Errorf("%d of %d answers failed; kinds: %q", n, requests.Load(), kinds)
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d acknowledged labels are in neither store: %v", len(lost), len(acknowledged), lost[:min(5, len(lost))])
	}
}
