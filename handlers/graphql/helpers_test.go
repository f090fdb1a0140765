package graphql_test

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

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/handlers/inbound"
	"github.com/hearthkit/caddy-hearth/handlers/libraryservice"
	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// env is one test's world: a store in a temp dir, the API on a local
// HTTP server, and a member with an API token.
type env struct {
	t      *testing.T
	store  *storage.Store
	api    *testAPI
	srv    *httptest.Server
	member *members.Member
	token  string
	// session is the member signed in with the session cookie: post and
	// doAs send "session:<id>" as the cookie instead of a token.
	session string
}

// newEnv builds the world; pages, when given, configures the member pages
// (the session, signIn and createAccount).
func newEnv(t *testing.T, opts options, pages ...account.Options) *env {
	t.Helper()
	store := graphql.StoreForTest(t, t.TempDir())
	if opts.Pages == nil {
		po := account.Options{}
		if len(pages) > 0 {
			po = pages[0]
		}
		opts.Pages = account.New(store, po)
	}
	api := newAPI(store, opts)
	t.Cleanup(func() { api.Close() })
	srv := httptest.NewServer(served(api))
	t.Cleanup(srv.Close)
	e := &env{t: t, store: store, api: api, srv: srv}
	e.member, e.token = e.newMember("alice")
	e.session = e.signIn(e.member)
	return e
}

// options are what a test sets of the API and of the library service
// under it, as hearth_graphql's options are; newAPI gives each its own.
type options struct {
	// The API's (graphql.Options).
	MaxBodyBytes    int64
	MemberBodyBytes int64
	MaxDepth        int
	MaxComplexity   int
	MaxContentBytes int64
	NoIntrospection bool
	AccountDomain   string
	Pages           *account.Pages
	Logger          *zap.Logger
	Now             func() time.Time
	// The library service's: the Gate's rate limits, the newsletter
	// routes, what is fetched and imported.
	TokenRateLimit, MemberRateLimit, InboundRateLimit int
	ClientIP                                          func(*http.Request) string
	MailWebhookSecret, MailDomain                     string
	Fetcher                                           *safefetch.Fetcher
	AllowPrivateAddresses                             bool
	ImageQuota                                        int64
	ImportLimits                                      importer.Limits
	ImportDir                                         string
	NoImportFetch                                     bool
}

// testAPI is the GraphQL API on the library service, built as caddymodule
// builds them; Close closes the service.
type testAPI struct {
	*graphql.Server
	*libraryservice.Service
}

// newAPI builds the library service on store, and the API on it, from o.
func newAPI(store *storage.Store, o options) *testAPI {
	lib := libraryservice.Prepare(store, libraryservice.Options{
		Articles: articles.Options{
			Fetcher: o.Fetcher, ImageQuota: o.ImageQuota,
			ImportDir: o.ImportDir, ImportLimits: o.ImportLimits, NoImportFetch: o.NoImportFetch,
		},
		AllowPrivateAddresses: o.AllowPrivateAddresses,
		Inbound:               inbound.Options{WebhookSecret: o.MailWebhookSecret, MailDomain: o.MailDomain},
		InboundRateLimit:      o.InboundRateLimit,
		TokenRateLimit:        o.TokenRateLimit,
		MemberRateLimit:       o.MemberRateLimit,
		ClientIP:              o.ClientIP,
		Pages:                 o.Pages,
		Logger:                o.Logger,
	})
	return &testAPI{
		Server: graphql.New(store, lib, graphql.Options{
			MaxBodyBytes: o.MaxBodyBytes, MemberBodyBytes: o.MemberBodyBytes, MaxDepth: o.MaxDepth, MaxComplexity: o.MaxComplexity,
			MaxContentBytes: o.MaxContentBytes, NoIntrospection: o.NoIntrospection,
			AccountDomain: o.AccountDomain, Pages: o.Pages, Logger: o.Logger, Now: o.Now,
		}),
		Service: lib,
	}
}

// route is what each package's handler offers (caddymodule's service): an
// http.Handler that says which requests are its own.
type route = libraryservice.Route

// libraryRoutes are the API and the routes hearth_graphql serves beside
// it, each its own package's, in the order caddymodule's GraphQL handler
// asks them.
func libraryRoutes(a *testAPI) []route {
	return append([]route{a.Server}, a.Routes()...)
}

// served serves what hearth_graphql serves of the library (libraryRoutes)
// and then more; other requests get 404.
func served(a *testAPI, more ...route) http.Handler {
	routes := append(libraryRoutes(a), more...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range routes {
			if h.Handles(r) {
				h.ServeHTTP(w, r)
				return
			}
		}
		http.NotFound(w, r)
	})
}

// handles reports whether hearth_graphql's library routes take r.
func (e *env) handles(r *http.Request) bool {
	for _, h := range libraryRoutes(e.api) {
		if h.Handles(r) {
			return true
		}
	}
	return false
}

// signIn starts a session for m as the sign-in page does (a recent
// sign-in: the password was just given).
func (e *env) signIn(m *members.Member) string {
	e.t.Helper()
	m, err := members.Of(e.store).MemberByID(context.Background(), m.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	id, err := members.Of(e.store).CreateSessionWith(context.Background(), m, time.Hour, members.SessionInfo{})
	if err != nil {
		e.t.Fatal(err)
	}
	return sessionPrefix + id
}

const sessionPrefix = "session:"

func (e *env) newMember(username string) (*members.Member, string) {
	e.t.Helper()
	return graphql.MemberForTest(e.t, e.store, username)
}

// gqlError is one entry of a response's errors.
type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

func (g gqlError) Code() string { c, _ := g.Extensions["code"].(string); return c }

// Detail is what an input validation error says about its input (Inboxt's
// extensions.response.message[0].message), or the message of other errors.
func (g gqlError) Detail() string {
	resp, _ := g.Extensions["response"].(map[string]any)
	list, _ := resp["message"].([]any)
	if len(list) > 0 {
		first, _ := list[0].(map[string]any)
		msg, _ := first["message"].(string)
		return msg
	}
	return g.Message
}

// response is what a client sees.
type response struct {
	Status int
	Header http.Header
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

// post sends a GraphQL request as an Inboxt integration does: POST, JSON,
// Authorization: Bearer.
func (e *env) post(token, query string, vars map[string]any) *response {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return e.raw(token, "application/json", body)
}

// authorize gives req the credentials of token: for "session:<id>" the
// session cookie, as a browser on the site's own page sends it; else the
// token as a bearer (none for "").
func authorize(req *http.Request, token string) {
	if id, ok := strings.CutPrefix(token, sessionPrefix); ok {
		req.AddCookie(&http.Cookie{Name: account.CookieName, Value: id})
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	} else if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
}

// send does req and reads the whole answer.
func send(t testing.TB, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// get GETs path with the env's API token.
func (e *env) get(path string) (*http.Response, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	return send(e.t, req)
}

func (e *env) raw(token, contentType string, body []byte) *response {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	authorize(req, token)
	resp, b := send(e.t, req)
	r := &response{Status: resp.StatusCode, Header: resp.Header}
	if err := json.Unmarshal(b, r); err != nil {
		e.t.Fatalf("response is not JSON (status %d): %s", resp.StatusCode, b)
	}
	return r
}

// do runs query with the member's token and decodes data into out, failing
// on any error.
func (e *env) do(query string, vars map[string]any, out any) {
	e.t.Helper()
	e.doAs(e.token, query, vars, out)
}

// doAs is do with token (or session).
func (e *env) doAs(token, query string, vars map[string]any, out any) {
	e.t.Helper()
	r := e.post(token, query, vars)
	if r.Status != http.StatusOK || len(r.Errors) > 0 {
		e.t.Fatalf("status %d, errors %+v", r.Status, r.Errors)
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			e.t.Fatal(err)
		}
	}
}

// wantError runs query and checks that it fails with code.
func (e *env) wantError(token, query string, vars map[string]any, status int, code string) *response {
	e.t.Helper()
	r := e.post(token, query, vars)
	if r.Status != status {
		e.t.Fatalf("status = %d, want %d (errors %+v)", r.Status, status, r.Errors)
	}
	if len(r.Errors) == 0 || r.Errors[0].Code() != code {
		e.t.Fatalf("errors = %+v, want code %s", r.Errors, code)
	}
	return r
}

// saveArticle stores an article directly.
func (e *env) saveArticle(memberID string, n int, mod func(*library.NewItem)) *library.SavedItem {
	e.t.Helper()
	in := library.NewItem{
		URL:         fmt.Sprintf("https://example.com/a/%d", n),
		Title:       fmt.Sprintf("Article %d", n),
		Description: fmt.Sprintf("Description %d", n),
		WordCount:   n * 10,
		HTML:        fmt.Sprintf("<p>Body %d</p>", n),
		Text:        fmt.Sprintf("Body %d", n),
	}
	if mod != nil {
		mod(&in)
	}
	it, _, err := library.Of(e.store).SaveItem(context.Background(), memberID, in)
	if err != nil {
		e.t.Fatal(err)
	}
	return it
}

// Operations as Inboxt's web app writes them (apps/web/src/lib/graphql).
const (
	entryFragment = `
fragment EntryFragment on Entry {
  __typename
  id
  createdAt
  ... on SavedItem {
    title originalUrl sourceDomain description leadImage wordCount author
    type status readingProgress readAt isReadManual updatedAt
    labels { createdAt id name color order }
  }
  ... on Highlight {
    savedItemTitle savedItemOriginalUrl note updatedAt
    savedItem { id createdAt }
    segments { id xpath beforeText startOffset endOffset afterText text }
  }
}`
	entriesQuery = `query Entries($query: GetEntriesInput!) {
  entries(query: $query) {
    edges { cursor node { ...EntryFragment } }
    pageInfo { hasNextPage endCursor hasPreviousPage startCursor }
  }
}` + entryFragment
)

type label struct {
	ID, Name, Color string
	Order           float64
}

type entry struct {
	Typename        string   `json:"__typename"`
	ID              string   `json:"id"`
	CreatedAt       string   `json:"createdAt"`
	UpdatedAt       string   `json:"updatedAt"`
	Title           string   `json:"title"`
	OriginalURL     *string  `json:"originalUrl"`
	SourceDomain    *string  `json:"sourceDomain"`
	Description     *string  `json:"description"`
	LeadImage       *string  `json:"leadImage"`
	Author          *string  `json:"author"`
	WordCount       float64  `json:"wordCount"`
	Type            string   `json:"type"`
	Status          string   `json:"status"`
	ReadingProgress *float64 `json:"readingProgress"`
	ReadAt          *string  `json:"readAt"`
	IsReadManual    bool     `json:"isReadManual"`
	Labels          []label  `json:"labels"`
	SavedItemTitle  *string  `json:"savedItemTitle"`
	Note            *string  `json:"note"`
	SavedItem       *struct {
		ID string `json:"id"`
	} `json:"savedItem"`
	Segments []struct {
		Text *string `json:"text"`
	} `json:"segments"`
}

type entriesPage struct {
	Entries struct {
		Edges []struct {
			Cursor string `json:"cursor"`
			Node   entry  `json:"node"`
		} `json:"edges"`
		PageInfo struct {
			HasNextPage     bool    `json:"hasNextPage"`
			HasPreviousPage bool    `json:"hasPreviousPage"`
			EndCursor       *string `json:"endCursor"`
			StartCursor     *string `json:"startCursor"`
		} `json:"pageInfo"`
	} `json:"entries"`
}

// entries fetches one page.
func (e *env) entries(query map[string]any) entriesPage {
	e.t.Helper()
	var p entriesPage
	e.do(entriesQuery, map[string]any{"query": query}, &p)
	return p
}

// allEntries runs the spec's pagination loop: pass the previous endCursor
// as after until hasNextPage is false.
func (e *env) allEntries(query map[string]any) []entry {
	e.t.Helper()
	var out []entry
	q := map[string]any{}
	for k, v := range query {
		q[k] = v
	}
	for pages := 0; ; pages++ {
		if pages > 10000 {
			e.t.Fatal("pagination does not end")
		}
		p := e.entries(q)
		for _, ed := range p.Entries.Edges {
			out = append(out, ed.Node)
		}
		if !p.Entries.PageInfo.HasNextPage {
			return out
		}
		q["after"] = *p.Entries.PageInfo.EndCursor
	}
}

func ids(es []entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}
