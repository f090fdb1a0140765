package graphql_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/inbound"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// site serves the member pages with the API Tokens page and the API, as
// the Caddy module does, and returns a browser signed in as the member.
func site(t *testing.T, e *env) (*httptest.Server, *http.Client) {
	t.Helper()
	pages := account.New(e.store, account.Options{})
	pages.AddSettingsPage(e.api.APITokensPage(pages))
	pages.AddSettingsPage(e.api.Exports().Page(pages))
	pages.AddSettingsPage(e.api.Uploads().Page(pages))
	srv := httptest.NewServer(served(e.api, pages))
	t.Cleanup(srv.Close)
	session, err := members.Of(e.store).CreateSession(t.Context(), e.member.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	jar := &cookieJar{cookie: &http.Cookie{Name: account.CookieName, Value: session}}
	return srv, &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// wantSignInFirst checks that a signed-out browser opening the page u is
// sent to the sign-in page.
func wantSignInFirst(t *testing.T, u string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), account.SignInPath) {
		t.Fatalf("signed out: HTTP %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

type cookieJar struct{ cookie *http.Cookie }

func (j *cookieJar) SetCookies(*url.URL, []*http.Cookie) {}
func (j *cookieJar) Cookies(*url.URL) []*http.Cookie     { return []*http.Cookie{j.cookie} }

func page(t *testing.T, c *http.Client, method, u string, form url.Values) (int, string) {
	t.Helper()
	var resp *http.Response
	var err error
	if method == http.MethodPost {
		resp, err = c.PostForm(u, form)
	} else {
		resp, err = c.Get(u)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var (
	tokenInPage   = regexp.MustCompile(`data-copy>(app_[A-Za-z0-9_-]+)</output>`)
	tokenIDInPage = regexp.MustCompile(`name="id" value="([0-9]+)"`)
	inboundInPage = regexp.MustCompile(`data-copy>(https?://[^<]+/api/newsletters/inbound/[^<]+)</output>`)
)

func TestAPITokensPageCreatesShowsOnceListsAndDeletesTokens(t *testing.T) {
	e := newEnv(t, options{})
	srv, browser := site(t, e)
	pageURL := srv.URL + account.APITokensPath

	status, body := page(t, browser, http.MethodGet, pageURL, nil)
	if status != 200 || !strings.Contains(body, "Create API Token") || !strings.Contains(body, `value="never"`) {
		t.Fatalf("status %d: %s", status, body)
	}
	status, body = page(t, browser, http.MethodPost, pageURL, url.Values{"action": {"create"}, "name": {"Obsidian sync"}, "expires": {"7d"}})
	m := tokenInPage.FindStringSubmatch(body)
	if status != 200 || m == nil {
		t.Fatalf("status %d, no token shown: %s", status, body)
	}
	token := m[1]
	if len(token) < 70 || len(token) > 80 {
		t.Fatalf("token has %d characters", len(token))
	}
	if r := e.post(token, labelsQuery, nil); r.Status != 200 || len(r.Errors) > 0 {
		t.Fatalf("the page's token does not work: %d %+v", r.Status, r.Errors)
	}

	// Shown once: the list has the name and dates, never the token.
	_, body = page(t, browser, http.MethodGet, pageURL, nil)
	if strings.Contains(body, token) || !strings.Contains(body, "Obsidian sync") {
		t.Fatalf("list page: %s", body)
	}
	ids := tokenIDInPage.FindAllStringSubmatch(body, -1)
	if len(ids) != 2 { // the test token and the new one
		t.Fatalf("%d tokens listed", len(ids))
	}
	tokens, _ := apitokens.Of(e.store).List(t.Context(), e.member.ID)
	newest := tokens[0]
	if newest.Name != "Obsidian sync" || newest.ExpiresAt == nil || newest.LastUsedAt == nil {
		t.Fatalf("stored token = %+v", newest)
	}

	status, body = page(t, browser, http.MethodPost, pageURL, url.Values{"action": {"delete"}, "id": {newest.ID}})
	if status != 200 || !strings.Contains(body, "deleted") {
		t.Fatalf("delete: %d %s", status, body)
	}
	e.wantError(token, labelsQuery, nil, http.StatusOK, "UNAUTHORIZED")
}

// pasteInPage is one place to paste a new token, as the page lists it: the
// app's name and the address it wants, in a copyable code element.
var pasteInPage = regexp.MustCompile(`<p><strong>([^<]+)</strong>([^\n]*)</p>\n<p><code class="secret" id="[a-z-]+" data-copy>([^<]+)</code></p>`)

// Beside a new token the page says where each app served here wants it,
// with the site's own addresses: Omnivore's plugins the API's endpoint,
// Omnivore's browser extension the address it appends /api/graphql to
// (where its label list answers), Inboxt's apps and scripts the endpoint
// with a bearer token.
func TestAPITokensPageSaysWhereToPasteANewToken(t *testing.T) {
	e := newEnv(t, options{})
	srv, browser := site(t, e)
	status, body := page(t, browser, http.MethodPost, srv.URL+account.APITokensPath, url.Values{"action": {"create"}, "name": {"Obsidian"}, "expires": {"7d"}})
	m := tokenInPage.FindStringSubmatch(body)
	if status != 200 || m == nil {
		t.Fatalf("status %d, no token shown: %s", status, body)
	}
	token := m[1]
	want := []struct{ app, field, url string }{
		{"Omnivore’s Obsidian and Logseq plugins", "“API endpoint”", srv.URL + "/api/graphql"},
		{"Omnivore’s browser extension", "“API URL”", srv.URL + "/omnivore"},
		{"Inboxt’s apps and your own scripts", "Authorization: Bearer &lt;token&gt;", srv.URL + "/api/graphql"},
	}
	got := pasteInPage.FindAllStringSubmatch(body, -1)
	if len(got) != len(want) || !strings.Contains(body, "Where to paste it") {
		t.Fatalf("%d places to paste the token: %s", len(got), body)
	}
	for i, w := range want {
		if got[i][1] != w.app || !strings.Contains(got[i][2], w.field) || got[i][3] != w.url {
			t.Errorf("place %d: %q %q %q, want %q with %q and %q", i, got[i][1], got[i][2], got[i][3], w.app, w.field, w.url)
		}
	}
	if strings.Index(body, token) > strings.Index(body, "Where to paste it") {
		t.Error("the places to paste the token come before the token")
	}

	// The addresses work as each app uses them: the extension's label list
	// with the token alone in the header, the endpoint with a bearer token.
	ask := func(u, auth, query string) string {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"query": query})
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(string(b)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", auth)
		resp, out := send(t, req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: HTTP %d %s", u, resp.StatusCode, out)
		}
		return string(out)
	}
	if out := ask(want[1].url+"/api/graphql", token, extGetLabels); !strings.Contains(out, `{"data":{"labels":{"labels":[`) {
		t.Errorf("the extension's label list at its API URL: %s", out)
	}
	if out := ask(want[2].url, "Bearer "+token, `{ me { username } }`); !strings.Contains(out, `"username":"`+e.member.Username+`"`) {
		t.Errorf("a bearer token at the endpoint: %s", out)
	}
}

func TestAPITokensPageRejectsBadForms(t *testing.T) {
	e := newEnv(t, options{})
	srv, browser := site(t, e)
	pageURL := srv.URL + account.APITokensPath
	for name, form := range map[string]url.Values{
		"no name":        {"action": {"create"}, "name": {" "}, "expires": {"30d"}},
		"unknown expiry": {"action": {"create"}, "name": {"x"}, "expires": {"5y"}},
		"name too long":  {"action": {"create"}, "name": {strings.Repeat("n", 101)}, "expires": {"1d"}},
		"unknown action": {"action": {"explode"}},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := page(t, browser, http.MethodPost, pageURL, form)
			if status != http.StatusBadRequest || tokenInPage.MatchString(body) {
				t.Fatalf("status %d: %s", status, body)
			}
		})
	}
	if status, _ := page(t, browser, http.MethodPost, pageURL, url.Values{"action": {"delete"}, "id": {"99"}}); status != http.StatusNotFound {
		t.Fatalf("deleting an unknown token: status %d", status)
	}
	big := url.Values{"action": {"create"}, "name": {"x"}, "expires": {"1d"}, "pad": {strings.Repeat("p", 1<<20)}}
	if status, _ := page(t, browser, http.MethodPost, pageURL, big); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a form over the pages' limit: status %d, want 413", status)
	}
	tokens, _ := apitokens.Of(e.store).List(t.Context(), e.member.ID)
	if len(tokens) != 1 {
		t.Fatalf("%d tokens stored", len(tokens))
	}
}

func TestAPITokensPageNeedsSignIn(t *testing.T) {
	e := newEnv(t, options{})
	srv, _ := site(t, e)
	wantSignInFirst(t, srv.URL+account.APITokensPath)
}

func TestAPITokensPageGivesTheNewsletterInboundURL(t *testing.T) {
	e := newEnv(t, options{})
	srv, browser := site(t, e)
	pageURL := srv.URL + account.APITokensPath
	_, body := page(t, browser, http.MethodPost, pageURL, url.Values{"action": {"rotate_inbound"}})
	m := inboundInPage.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no inbound URL shown: %s", body)
	}
	if status, body := postInbound(t, e, m[1], newsletterMessage); status != http.StatusCreated {
		t.Fatalf("posting to the page's URL: %d %s", status, body)
	}
	_, body = page(t, browser, http.MethodGet, pageURL, nil)
	if strings.Contains(body, m[1]) || !strings.Contains(body, "Your address was created") {
		t.Fatalf("the inbound URL is shown again or not mentioned: %s", body)
	}
}

// inboundAddressesQuery is Inboxt's web app operation.
const inboundAddressesQuery = `query InboundEmailAddresses {
  inboundEmailAddresses { id createdAt fullAddress
    subscriptions { id createdAt name status lastReceivedAt unsubscribeUrl unsubscribeAttemptedAt } }
  me { inboundEmailAddressesCount }
}`

type inboundAddresses struct {
	InboundEmailAddresses []struct {
		ID, CreatedAt, FullAddress string
		Subscriptions              *[]struct{ ID string }
	}
	Me struct{ InboundEmailAddressesCount float64 }
}

func TestInboundEmailAddressesShowsTheAddressWithoutItsSecret(t *testing.T) {
	e := newEnv(t, options{})
	srv, browser := site(t, e)
	var got inboundAddresses
	e.do(inboundAddressesQuery, nil, &got)
	if got.InboundEmailAddresses == nil || len(got.InboundEmailAddresses) != 0 || got.Me.InboundEmailAddressesCount != 0 {
		t.Fatalf("before an address is made: %+v", got)
	}

	_, body := page(t, browser, http.MethodPost, srv.URL+account.APITokensPath, url.Values{"action": {"rotate_inbound"}})
	m := inboundInPage.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no inbound URL shown: %s", body)
	}
	secretURL := m[1]
	secret := strings.TrimPrefix(secretURL, srv.URL+inbound.Path)
	r := e.post(e.token, inboundAddressesQuery, nil)
	if r.Status != http.StatusOK || len(r.Errors) > 0 || strings.Contains(string(r.Data), secret) {
		t.Fatalf("HTTP %d %+v, data %s (must not hold the secret)", r.Status, r.Errors, r.Data)
	}
	got = inboundAddresses{}
	if err := json.Unmarshal(r.Data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.InboundEmailAddresses) != 1 || got.Me.InboundEmailAddressesCount != 1 {
		t.Fatalf("after making one: %+v", got)
	}
	a := got.InboundEmailAddresses[0]
	if a.FullAddress != srv.URL+"/api/newsletters/inbound/nl_…" || a.Subscriptions != nil || a.ID == "" {
		t.Fatalf("address = %+v, secret URL %s", a, secretURL)
	}
	if created, err := time.Parse(time.RFC3339, a.CreatedAt); err != nil || time.Since(created) > time.Minute {
		t.Fatalf("createdAt %q: %v", a.CreatedAt, err)
	}

	// A new address replaces it, with a new id.
	page(t, browser, http.MethodPost, srv.URL+account.APITokensPath, url.Values{"action": {"rotate_inbound"}})
	var after inboundAddresses
	e.do(inboundAddressesQuery, nil, &after)
	if len(after.InboundEmailAddresses) != 1 || after.InboundEmailAddresses[0].ID == a.ID {
		t.Fatalf("after a new address: %+v (was %s)", after, a.ID)
	}

	// Another member has none.
	_, bobToken := e.newMember("bob")
	var bob inboundAddresses
	r = e.post(bobToken, inboundAddressesQuery, nil)
	if err := json.Unmarshal(r.Data, &bob); err != nil || len(bob.InboundEmailAddresses) != 0 {
		t.Fatalf("bob: %s %v", r.Data, err)
	}
}
