package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// The second site serves the same API with the default fetcher, which
// refuses private addresses.
const strictSite = "http://localhost:9081"

func graphqlSites() string {
	return fmt.Sprintf(`%s {
	hearth_graphql {
		allow_private_addresses
	}
	respond "site"
}
%s {
	hearth_graphql
}
`, testSite, strictSite)
}

type gqlResult struct {
	status int
	header http.Header
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

func (r *gqlResult) code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// gql posts a GraphQL operation to site as an Inboxt integration does.
func gql(t *testing.T, site, token, query string, vars map[string]any) *gqlResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, site+"/api/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return doGQL(t, req)
}

func doGQL(t *testing.T, req *http.Request) *gqlResult {
	t.Helper()
	resp, b := send(t, req)
	r := &gqlResult{status: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(b, r); err != nil {
		t.Fatalf("HTTP %d, not GraphQL JSON: %s", resp.StatusCode, b)
	}
	return r
}

// gqlData runs an operation that must succeed and decodes its data.
func gqlData(t *testing.T, token, query string, vars map[string]any, out any) {
	t.Helper()
	r := gql(t, testSite, token, query, vars)
	if r.status != http.StatusOK || len(r.Errors) > 0 {
		t.Fatalf("HTTP %d, errors %+v", r.status, r.Errors)
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			t.Fatal(err)
		}
	}
}

const entriesOp = `query Entries($query: GetEntriesInput!) {
  entries(query: $query) {
    edges { cursor node { __typename id createdAt
      ... on SavedItem { title wordCount readingProgress updatedAt status type }
      ... on Highlight { savedItemTitle } } }
    pageInfo { hasNextPage endCursor }
  }
}`

type gqlEntry struct {
	Typename        string  `json:"__typename"`
	ID              string  `json:"id"`
	CreatedAt       string  `json:"createdAt"`
	UpdatedAt       string  `json:"updatedAt"`
	Title           string  `json:"title"`
	WordCount       float64 `json:"wordCount"`
	ReadingProgress float64 `json:"readingProgress"`
	Status          string  `json:"status"`
	Type            string  `json:"type"`
	SavedItemTitle  string  `json:"savedItemTitle"`
}

type gqlPage struct {
	Entries struct {
		Edges []struct {
			Node gqlEntry `json:"node"`
		} `json:"edges"`
		PageInfo struct {
			HasNextPage bool    `json:"hasNextPage"`
			EndCursor   *string `json:"endCursor"`
		} `json:"pageInfo"`
	} `json:"entries"`
}

// allEntries is the spec's loop: pass endCursor as after until hasNextPage
// is false. between runs after each page.
func allEntries(t *testing.T, token string, query map[string]any, between func(page int)) []gqlEntry {
	t.Helper()
	var out []gqlEntry
	for page := 0; ; page++ {
		if page > 2000 {
			t.Fatal("pagination does not end")
		}
		var p gqlPage
		gqlData(t, token, entriesOp, map[string]any{"query": query}, &p)
		for _, e := range p.Entries.Edges {
			out = append(out, e.Node)
		}
		if !p.Entries.PageInfo.HasNextPage {
			if len(p.Entries.Edges) > 0 && (p.Entries.PageInfo.EndCursor == nil) {
				t.Fatal("last page without endCursor")
			}
			return out
		}
		if between != nil {
			between(page)
		}
		query["after"] = *p.Entries.PageInfo.EndCursor
	}
}

// hearthStore is the running Caddy's store, to seed data quickly.
func hearthStore(t *testing.T) *storage.Store {
	t.Helper()
	v, err := caddy.ActiveContext().AppIfConfigured("hearth")
	if err != nil {
		t.Fatal(err)
	}
	return v.(*App).Store()
}

func createAPIToken(t *testing.T, username string) string {
	t.Helper()
	var tok struct{ Token string }
	adminJSONOK(t, http.MethodPost, "/hearth/members/"+username+"/api_tokens", `{"name":"test","expires":"never"}`, http.StatusCreated, &tok)
	if !strings.HasPrefix(tok.Token, "app_") || len(tok.Token) < 70 || len(tok.Token) > 80 {
		t.Fatalf("API token %q", tok.Token)
	}
	return tok.Token
}

func TestGraphQLPaginationThroughCaddy(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), graphqlSites()))
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"alice","password":"correct horse"}`, http.StatusCreated, nil)
	token := createAPIToken(t, "alice")
	st := hearthStore(t)
	m, _ := members.Of(st).Member(t.Context(), "alice")
	save := func(n int) string {
		it, _, err := library.Of(st).SaveItem(t.Context(), m.ID, library.NewItem{
			URL: fmt.Sprintf("https://example.com/%d", n), Title: fmt.Sprintf("Title %02d", n%37),
			WordCount: n % 50, HTML: "<p>x</p>", Text: "x",
		})
		if err != nil {
			t.Fatal(err)
		}
		return it.ID
	}
	for n := 0; n < 1000; n++ {
		save(n)
	}

	for _, field := range []string{"createdAt", "updatedAt", "title", "wordCount", "readingProgress"} {
		for _, dir := range []string{"asc", "desc"} {
			got := allEntries(t, token, map[string]any{"first": 100, "sort": map[string]any{"field": field, "direction": dir}}, nil)
			seen := map[string]bool{}
			for _, e := range got {
				if seen[e.ID] {
					t.Fatalf("%s %s: %s twice", field, dir, e.ID)
				}
				seen[e.ID] = true
			}
			if len(got) != 1000 {
				t.Fatalf("%s %s: %d items, want 1000", field, dir, len(got))
			}
			ordered := sort.SliceIsSorted(got, func(i, j int) bool {
				a, b := got[i], got[j]
				if dir == "desc" {
					a, b = b, a
				}
				switch field {
				case "title":
					return a.Title < b.Title
				case "wordCount":
					return a.WordCount < b.WordCount
				case "createdAt":
					return a.CreatedAt < b.CreatedAt
				case "updatedAt":
					return a.UpdatedAt < b.UpdatedAt
				}
				return a.ReadingProgress < b.ReadingProgress
			})
			if !ordered {
				t.Fatalf("%s %s: not in order", field, dir)
			}
		}
	}

	// Items added and removed between pages: nothing skipped or repeated.
	// in:inbox because without in: Inboxt lists every status, trash too
	// (entry-manager.service.ts, Inboxt/inboxt@45f4314).
	var removed string
	got := allEntries(t, token, map[string]any{"first": 50, "q": "in:inbox", "sort": map[string]any{"field": "createdAt", "direction": "asc"}}, func(page int) {
		if page == 3 {
			save(5000) // newest: must appear at the end
			save(5001)
			// Trash an item further down the list.
			all := allEntries(t, token, map[string]any{"first": 100, "sort": map[string]any{"field": "createdAt", "direction": "asc"}}, nil)
			removed = all[900].ID
			gqlData(t, token, `mutation($data: UpdateSavedItemsStatusInput!) { updateSavedItemsStatus(data: $data) { id status } }`,
				map[string]any{"data": map[string]any{"ids": []string{removed}, "status": "DELETED"}}, nil)
		}
	})
	seen := map[string]bool{}
	for _, e := range got {
		if seen[e.ID] || e.ID == removed {
			t.Fatalf("%s repeated or removed item listed", e.ID)
		}
		seen[e.ID] = true
	}
	if len(got) != 1001 {
		t.Fatalf("%d items after adding 2 and trashing 1 of 1000, want 1001", len(got))
	}
}

func TestGraphQLThroughCaddy(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), graphqlSites()))
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"alice","password":"correct horse"}`, http.StatusCreated, nil)
	token := createAPIToken(t, "alice")

	article := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><title>Baking Bread at Home</title>
<meta name="author" content="Jane Baker"><meta name="description" content="How to bake bread."></head>
<body><article><h1>Baking Bread at Home</h1>`+strings.Repeat("<p>Flour, water, salt and yeast make bread when you knead the dough and let it rise slowly overnight.</p>", 12)+`</article></body></html>`)
	}))
	defer article.Close()
	const addURL = `mutation($data: AddArticleFromUrlInput!) { addArticleFromUrl(data: $data) { success } }`

	t.Run("article from a local site", func(t *testing.T) {
		gqlData(t, token, addURL, map[string]any{"data": map[string]any{"url": article.URL + "/bread"}}, nil)
		// addArticleFromUrl answers at once and fetches in the background
		// (as Inboxt does): a client sees the article once the fetch is done.
		var got []gqlEntry
		// A generous wait: under the race detector on a busy machine the
		// fetch and the indexer's catch-up can take seconds. Four polls a
		// second: a faster poll would run into the token's rate limit (600
		// requests a minute) and fail on its 429 instead of waiting.
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			got = allEntries(t, token, map[string]any{"first": 10, "q": "bread"}, nil)
			if len(got) == 1 && got[0].WordCount > 0 {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if len(got) != 1 || got[0].Title != "Baking Bread at Home" || got[0].WordCount < 100 || got[0].Typename != "SavedItem" {
			t.Fatalf("saved article: %+v", got)
		}
	})

	t.Run("private address refused by the default fetcher", func(t *testing.T) {
		r := gql(t, strictSite, token, addURL, map[string]any{"data": map[string]any{"url": article.URL + "/other"}})
		// Inboxt's input error: "Invalid input provided", the reason in
		// extensions.response.message.
		if r.code() != "BAD_USER_INPUT" || r.Errors[0].Message != "Invalid input provided" || !strings.Contains(fmt.Sprint(r.Errors[0].Extensions["response"]), "private") {
			t.Fatalf("private URL: HTTP %d %+v", r.status, r.Errors)
		}
		if got := allEntries(t, token, map[string]any{"first": 10}, nil); len(got) != 1 {
			t.Fatalf("%d items after the refused fetch, want 1", len(got))
		}
	})

	t.Run("q operators and __typename", func(t *testing.T) {
		var item struct {
			Entries struct{ Edges []struct{ Node gqlEntry } }
		}
		gqlData(t, token, entriesOp, map[string]any{"query": map[string]any{"first": 1}}, &item)
		id := item.Entries.Edges[0].Node.ID
		var lbl struct{ CreateLabel struct{ ID string } }
		gqlData(t, token, `mutation($data: CreateLabelInput!) { createLabel(data: $data) { id } }`,
			map[string]any{"data": map[string]any{"name": "Kitchen", "color": "#ff0000"}}, &lbl)
		gqlData(t, token, `mutation($data: SetSavedItemLabelsInput!) { setSavedItemLabels(data: $data) { success } }`,
			map[string]any{"data": map[string]any{"id": id, "labelIds": []string{lbl.CreateLabel.ID}}}, nil)
		gqlData(t, token, `mutation($data: CreateHighlightInput!) { createHighlight(data: $data) { id } }`,
			map[string]any{"data": map[string]any{"savedItemId": id, "segments": []map[string]any{{
				"xpath": "/article/p[1]", "beforeText": "", "afterText": "", "startOffset": 0, "endOffset": 5, "text": "Flour"}}}}, nil)
		host, _ := url.Parse(article.URL)
		for _, c := range []struct {
			q    string
			want int
			typ  string
		}{
			{"in:inbox", 1, "SavedItem"}, {"in:archive", 0, ""}, {"in:trash", 0, ""},
			{"type:article", 1, "SavedItem"}, {"type:newsletter", 0, ""}, {"type:highlight", 1, "Highlight"},
			{"label:kitchen", 1, "SavedItem"}, {"-label:kitchen", 0, ""}, {"no:labels", 0, ""},
			{"has:highlights", 1, "SavedItem"}, {"saved:2000-01-01..*", 1, "SavedItem"}, {"saved:*..2000-01-01", 0, ""},
			{"updated:2000-01-01..*", 1, "SavedItem"}, {"site:" + host.Hostname(), 1, "SavedItem"}, {"site:example.org", 0, ""},
			{"sort:title-asc knead", 1, "SavedItem"}, {"sourdough", 0, ""},
		} {
			got := allEntries(t, token, map[string]any{"first": 20, "q": c.q}, nil)
			if len(got) != c.want || (c.want > 0 && got[0].Typename != c.typ) {
				t.Errorf("q %q: %+v, want %d %s", c.q, got, c.want, c.typ)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		me := `query { me { username } }`
		for _, c := range []struct {
			name, token string
			status      int
			code        string
		}{
			// As Inboxt (Apollo Server 4) answers: HTTP 200, code
			// UNAUTHORIZED, extensions.status 401; me is null without a token.
			{"malformed token", "not-a-token", 200, "UNAUTHORIZED"},
			{"unknown token", "app_" + strings.Repeat("A", 70), 200, "UNAUTHORIZED"},
		} {
			r := gql(t, testSite, c.token, me, nil)
			if r.status != c.status || r.code() != c.code {
				t.Errorf("%s: HTTP %d %q", c.name, r.status, r.code())
			}
		}
		if r := gql(t, testSite, "", me, nil); r.status != 200 || len(r.Errors) != 0 || string(r.Data) != `{"me":null}` {
			t.Errorf("me without a token: HTTP %d %s %+v", r.status, r.Data, r.Errors)
		}
		r := gql(t, testSite, token, entriesOp, map[string]any{"query": map[string]any{"first": 5, "q": strings.Repeat("a", 201)}})
		if r.code() != "BAD_REQUEST" { // Inboxt's AppException
			t.Errorf("long q: HTTP %d %+v", r.status, r.Errors)
		}
		r = gql(t, testSite, token, `query { nope }`, nil)
		if r.status != 400 || r.code() != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("invalid query: HTTP %d %+v", r.status, r.Errors)
		}
		req, _ := http.NewRequest(http.MethodPost, testSite+"/api/graphql", strings.NewReader("{not json"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		if r := doGQL(t, req); r.status != 400 || len(r.Errors) == 0 {
			t.Errorf("bad JSON: HTTP %d", r.status)
		}
		// max_body_size (1 MiB) for a request that names nobody,
		// max_member_body_size (8 MiB) for a member's.
		for _, c := range []struct {
			auth string
			size int
		}{{"", 1 << 20}, {"Bearer " + token, 8 << 20}} {
			big := `{"query":"query { me { username } }","variables":{"x":"` + strings.Repeat("x", c.size) + `"}}`
			req, _ = http.NewRequest(http.MethodPost, testSite+"/api/graphql", strings.NewReader(big))
			req.Header.Set("Content-Type", "application/json")
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			if r := doGQL(t, req); r.status != 413 {
				t.Errorf("%d MiB body (token: %t): HTTP %d", c.size>>20, c.auth != "", r.status)
			}
		}
	})

	t.Run("API token made on the settings page: use, expire, delete", func(t *testing.T) {
		b := newBrowser(t, testSite)
		if p := b.signIn("alice", "correct horse"); p.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in: HTTP %d", p.StatusCode)
		}
		p := b.get("/settings/api_tokens")
		p = b.submit(p, "/settings/api_tokens", url.Values{"name": {"Obsidian"}, "expires": {"7d"}})
		m := regexp.MustCompile(`id="secret" aria-labelledby="secret-label" data-copy>(app_[^<]+)</output>`).FindStringSubmatch(p.body)
		if p.StatusCode != http.StatusOK || m == nil {
			t.Fatalf("create token: HTTP %d: %s", p.StatusCode, p.body)
		}
		pageToken := m[1]
		var me struct{ Me struct{ Username string } }
		gqlData(t, pageToken, `query { me { username } }`, nil, &me)
		if me.Me.Username != "alice" {
			t.Fatalf("me = %+v", me)
		}
		p = b.get("/settings/api_tokens")
		if strings.Contains(p.body, pageToken) || !strings.Contains(p.body, "Obsidian") {
			t.Fatal("the list shows the token again, or not its name")
		}
		idRE := regexp.MustCompile(`<input type="hidden" name="action" value="delete"><input type="hidden" name="id" value="([^"]+)"><button class="danger" type="submit">Delete “Obsidian”</button>`)
		dm := idRE.FindStringSubmatch(p.body)
		if dm == nil {
			t.Fatalf("no delete form for Obsidian: %s", p.body)
		}

		// Its 7 days are over: the running server refuses it from the next
		// request on, and the page says so.
		st := hearthStore(t)
		alice, err := members.Of(st).Member(t.Context(), "alice")
		if err != nil {
			t.Fatal(err)
		}
		over := time.Now().Add(-time.Second)
		if _, err := apitokens.Of(st).SetExpiry(t.Context(), alice.ID, dm[1], &over); err != nil {
			t.Fatal(err)
		}
		r := gql(t, testSite, pageToken, `query { me { username } }`, nil)
		if r.status != http.StatusOK || r.code() != "UNAUTHORIZED" || string(r.Data) != "" && string(r.Data) != "null" {
			t.Fatalf("expired token: HTTP %d, errors %+v, data %s", r.status, r.Errors, r.Data)
		}
		if p := b.get("/settings/api_tokens"); !strings.Contains(p.body, "Obsidian <em>(expired)</em>") {
			t.Fatalf("the page does not show the token as expired: %s", p.body)
		}

		b.post("/settings/api_tokens", url.Values{"action": {"delete"}, "id": {dm[1]}})
		if r := gql(t, testSite, pageToken, `query { me { username } }`, nil); r.code() != "UNAUTHORIZED" {
			t.Fatalf("deleted token: HTTP %d %+v", r.status, r.Errors)
		}
	})

	t.Run("newsletter webhook", func(t *testing.T) {
		b := newBrowser(t, testSite)
		b.signIn("alice", "correct horse")
		p := b.post("/settings/api_tokens", url.Values{"action": {"rotate_inbound"}})
		m := regexp.MustCompile(`id="inbound-url" aria-labelledby="inbound-url-label" data-copy>([^<]+)</output>`).FindStringSubmatch(p.body)
		if m == nil {
			t.Fatalf("no inbound URL: HTTP %d %s", p.StatusCode, p.body)
		}
		inbound := m[1]
		// Inboxt's query lists the address, without its secret.
		var addrs struct {
			InboundEmailAddresses []struct{ FullAddress string }
		}
		gqlData(t, token, `query { inboundEmailAddresses { id createdAt fullAddress } }`, nil, &addrs)
		if len(addrs.InboundEmailAddresses) != 1 || addrs.InboundEmailAddresses[0].FullAddress != testSite+"/api/newsletters/inbound/nl_…" {
			t.Fatalf("inboundEmailAddresses = %+v", addrs)
		}
		msg := "From: Weekly Bakes <news@bakery.example>\r\nTo: alice@example.com\r\nSubject: Rye week\r\n" +
			"Message-ID: <rye-week@bakery.example>\r\n" +
			"MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>This week: rye bread.</p>\r\n"
		// The forwarding service retries: the second delivery gets the
		// first one's answer and is not saved again.
		var answers []string
		for range 2 {
			resp, err := http.Post(inbound, "message/rfc822", strings.NewReader(msg))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("inbound: HTTP %d %s", resp.StatusCode, b)
			}
			answers = append(answers, string(b))
		}
		if answers[0] != answers[1] || !strings.Contains(answers[0], `"id"`) {
			t.Fatalf("answers to the same message: %q", answers)
		}
		resp, _ := http.Post(inbound, "message/rfc822", strings.NewReader("no headers at all"))
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("malformed message: HTTP %d", resp.StatusCode)
		}
		got := allEntries(t, token, map[string]any{"first": 10, "q": "type:newsletter"}, nil)
		if len(got) != 1 || got[0].Title != "Rye week" || got[0].Type != "NEWSLETTER" {
			t.Fatalf("newsletters: %+v", got)
		}
	})
}

// Inboxt's mail webhook through Caddy: off on a site without a secret; on
// with one (from the environment), the recipient <inbound id>@mail_domain
// routes a provider's JSON to the member, unknown recipients are refused
// storing nothing.
func TestMailWebhookThroughCaddy(t *testing.T) {
	const secret = "caddy-test-mail-secret-93c1"
	t.Setenv("HEARTH_TEST_MAIL_SECRET", secret)
	startHearth(t, hearthCaddyfile(t.TempDir(), fmt.Sprintf(`%s {
	hearth_graphql {
		mail_webhook_secret {env.HEARTH_TEST_MAIL_SECRET}
		mail_domain in.example.org
	}
	respond "site"
}
%s {
	hearth_graphql
	respond "strict"
}
`, testSite, strictSite)))
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"alice","password":"correct horse"}`, http.StatusCreated, nil)
	token := createAPIToken(t, "alice")
	b := newBrowser(t, testSite)
	b.signIn("alice", "correct horse")
	b.post("/settings/api_tokens", url.Values{"action": {"rotate_inbound"}})
	var addrs struct {
		InboundEmailAddresses []struct{ ID, FullAddress string }
	}
	gqlData(t, token, `query { inboundEmailAddresses { id createdAt fullAddress } }`, nil, &addrs)
	if len(addrs.InboundEmailAddresses) != 1 || addrs.InboundEmailAddresses[0].FullAddress != addrs.InboundEmailAddresses[0].ID+"@in.example.org" {
		t.Fatalf("inboundEmailAddresses = %+v", addrs)
	}
	rcpt := addrs.InboundEmailAddresses[0].FullAddress
	post := func(site, body string, auth func(*http.Request)) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, site+"/api/inbox/items/mail-webhook", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != nil {
			auth(req)
		}
		resp, b := send(t, req)
		return resp.StatusCode, string(b)
	}
	header := func(r *http.Request) { r.Header.Set("X-Webhook-Secret", secret) }
	postmark := `{"OriginalRecipient":"` + rcpt + `","FromFull":{"Email":"news@bakery.example","Name":"Weekly Bakes"},
		"Subject":"Rye week","MessageID":"rye-week-1","HtmlBody":"<p>This week: rye bread and caraway.</p>","TextBody":"This week: rye bread and caraway."}`
	if status, body := post(strictSite, postmark, header); status != http.StatusNotFound || !strings.Contains(body, "not enabled") {
		t.Fatalf("site without a secret: %d %s", status, body)
	}
	if status, body := post(testSite, postmark, nil); status != http.StatusUnauthorized {
		t.Fatalf("no secret: %d %s", status, body)
	}
	unknown := strings.Replace(postmark, rcpt, "1@in.example.org", 1)
	if status, body := post(testSite, unknown, header); status != http.StatusNotFound || !strings.Contains(body, "1@in.example.org") {
		t.Fatalf("unknown recipient: %d %s", status, body)
	}
	if got := allEntries(t, token, map[string]any{"first": 10}, nil); len(got) != 0 {
		t.Fatalf("stored before any accepted delivery: %+v", got)
	}
	status, first := post(testSite, postmark, header)
	if status != http.StatusOK {
		t.Fatalf("delivery: %d %s", status, first)
	}
	// The provider retries, with Basic credentials this time.
	status, again := post(testSite, postmark, func(r *http.Request) { r.SetBasicAuth("inboxt", secret) })
	if status != http.StatusOK || again != first {
		t.Fatalf("retry: %d %s, first %s", status, again, first)
	}
	got := allEntries(t, token, map[string]any{"first": 10, "q": "type:newsletter"}, nil)
	if len(got) != 1 || got[0].Title != "Rye week" || got[0].Typename != "SavedItem" {
		t.Fatalf("newsletters = %+v", got)
	}
}
