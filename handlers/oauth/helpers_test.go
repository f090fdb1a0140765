package oauth_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/net/html"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// password is every test member's password.
const password = "correct horse battery staple"

// logBuffer collects the debug log of a fixture; safe for concurrent writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) Sync() error { return nil }

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fixture is the OAuth server and the member pages on one test server, as
// caddymodule mounts them, on a real store, with debug logs captured.
type fixture struct {
	t     testing.TB
	store *storage.Store
	pages *account.Pages
	srv   *oauth.Server
	ts    *httptest.Server
	logs  *logBuffer
	// opts and serving let rebuild put a new server behind ts, as a
	// config reload does.
	opts    oauth.Options
	serving atomic.Pointer[oauth.Server]
}

// secretPattern matches every secret Hearth's OAuth server hands out: they
// carry recognisable prefixes, so no test flow may log one.
var secretPattern = regexp.MustCompile(`(hcs|hac|hat)_[A-Za-z0-9_-]{20,}`)

// logSecretPattern adds the member pages' secrets to secretPattern: session
// ids (hs_), two-factor challenges (h2f_) and reset links (hrt_).
var logSecretPattern = regexp.MustCompile(`(hcs|hac|hat|hs|h2f|hrt|hrf)_[A-Za-z0-9_-]{20,}`)

// newFixture builds the server. Registrations are not throttled unless a
// test configures it (configure sets RegistrationLimit back to 0 for the
// default); configure may change any option but Pages and Logger.
func newFixture(t testing.TB, configure ...func(*oauth.Options)) *fixture {
	t.Helper()
	st, err := storage.Open(t.TempDir(), storage.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newFixtureOn(t, st, configure...)
}

// newFixtureOn is newFixture on the store st (a node of several).
func newFixtureOn(t testing.TB, st *storage.Store, configure ...func(*oauth.Options)) *fixture {
	t.Helper()
	logs := &logBuffer{}
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewDevelopmentEncoderConfig()), logs, zapcore.DebugLevel))
	pages := account.New(st, account.Options{Logger: logger})
	opts := oauth.Options{RegistrationLimit: 1 << 20}
	for _, c := range configure {
		c(&opts)
	}
	opts.Pages, opts.Logger = pages, logger
	srv := oauth.New(st, opts)
	pages.AddSettingsPage(account.SettingsPage{Path: oauth.AuthorizedAppsPath, Title: oauth.AuthorizedAppsTitle, Handler: srv.AuthorizedAppsPage()})
	pages.AddSettingsPage(account.SettingsPage{Path: oauth.EmailPath, Title: oauth.EmailTitle, Handler: srv.EmailPage()})
	f := &fixture{t: t, store: st, pages: pages, srv: srv, logs: logs, opts: opts}
	f.serving.Store(srv)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch srv := f.serving.Load(); {
		case srv.Handles(r):
			srv.ServeHTTP(w, r)
		case pages.Handles(r):
			pages.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	f.ts = ts
	t.Cleanup(func() {
		if s := logSecretPattern.FindString(logs.String()); s != "" {
			t.Errorf("a secret (%.8s...) appears in the logs:\n%s", s, logs.String())
		}
		if strings.Contains(logs.String(), password) {
			t.Errorf("a password appears in the logs:\n%s", logs.String())
		}
	})
	return f
}

// rebuild serves a new server built with the same options (and so the
// same rate-limit registry), as Caddy does on a config reload.
func (f *fixture) rebuild() {
	f.srv = oauth.New(f.store, f.opts)
	f.serving.Store(f.srv)
}

// member creates a member with the test password.
func (f *fixture) member(username string) *members.Member {
	f.t.Helper()
	m, err := members.Of(f.store).CreateMember(context.Background(), username, "Display "+username, password)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// resp is an answer with its body read.
type resp struct {
	*http.Response
	body string
}

// json decodes the body into a map, failing the test for anything else.
func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("%s %s: body is not a JSON object (%v):\n%s", r.Request.Method, r.Request.URL.Path, err, r.body)
	}
	return m
}

func do(t testing.TB, c *http.Client, req *http.Request) resp {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	return resp{res, string(b)}
}

// noRedirects is a client without cookies that shows every redirect.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (f *fixture) url(path string) string {
	if strings.Contains(path, "://") {
		return path
	}
	return f.ts.URL + path
}

// request sends a request from an API client (no cookies). header holds
// name, value pairs.
func (f *fixture) request(method, path, contentType string, body io.Reader, header ...string) resp {
	f.t.Helper()
	req, err := http.NewRequest(method, f.url(path), body)
	if err != nil {
		f.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(f.t, noRedirects, req)
}

func (f *fixture) postForm(path string, form url.Values, header ...string) resp {
	f.t.Helper()
	return f.request(http.MethodPost, path, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()), header...)
}

func (f *fixture) postJSON(path string, v any, header ...string) resp {
	f.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.request(http.MethodPost, path, "application/json", bytes.NewReader(b), header...)
}

// getWithToken is an API request with a bearer token.
func (f *fixture) getWithToken(path, token string) resp {
	f.t.Helper()
	return f.request(http.MethodGet, path, "", nil, "Authorization", "Bearer "+token)
}

// credentialApplication is the registration response, as a client reads it.
type credentialApplication struct {
	ID                    string   `json:"id"`
	Name                  string   `json:"name"`
	Website               *string  `json:"website"`
	Scopes                []string `json:"scopes"`
	RedirectURI           string   `json:"redirect_uri"`
	RedirectURIs          []string `json:"redirect_uris"`
	ClientID              string   `json:"client_id"`
	ClientSecret          string   `json:"client_secret"`
	ClientSecretExpiresAt *int64   `json:"client_secret_expires_at"`
}

// register registers an app with a form, as most Mastodon clients do.
// aliceAuthorizing is a fixture with the member alice signed in on a
// browser and an app (name, scopes) registered with the redirect URI
// https://app.example/cb.
func aliceAuthorizing(t *testing.T, name, scopes string) (*fixture, credentialApplication, *browser) {
	t.Helper()
	f := newFixture(t)
	f.member("alice")
	app := f.register(name, "https://app.example/cb", scopes)
	return f, app, f.signedIn("alice")
}

func (f *fixture) register(name, redirectURIs, scopes string) credentialApplication {
	f.t.Helper()
	form := url.Values{"client_name": {name}, "redirect_uris": {redirectURIs}}
	if scopes != "" {
		form.Set("scopes", scopes)
	}
	r := f.postForm(oauth.AppsPath, form)
	if r.StatusCode != http.StatusOK {
		f.t.Fatalf("register %s: HTTP %d: %s", name, r.StatusCode, r.body)
	}
	var app credentialApplication
	if err := json.Unmarshal([]byte(r.body), &app); err != nil {
		f.t.Fatal(err)
	}
	return app
}

// token posts to the token endpoint.
func (f *fixture) token(form url.Values, header ...string) resp {
	f.t.Helper()
	return f.postForm(oauth.TokenPath, form, header...)
}

// appToken issues a client_credentials token.
func (f *fixture) appToken(app credentialApplication, scope string) string {
	f.t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {app.ClientID}, "client_secret": {app.ClientSecret}}
	if scope != "" {
		form.Set("scope", scope)
	}
	r := f.token(form)
	wantStatus(f.t, r, http.StatusOK)
	return r.json(f.t)["access_token"].(string)
}

// exchange trades a code for a token and returns the token.
func (f *fixture) exchange(app credentialApplication, code, redirectURI, verifier string) string {
	f.t.Helper()
	r := f.token(codeForm(app, code, redirectURI, verifier))
	wantStatus(f.t, r, http.StatusOK)
	return r.json(f.t)["access_token"].(string)
}

func codeForm(app credentialApplication, code, redirectURI, verifier string) url.Values {
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"client_id":     {app.ClientID},
		"client_secret": {app.ClientSecret},
		"redirect_uri":  {redirectURI},
		"code":          {code},
	}
	if verifier != "" {
		form.Set("code_verifier", verifier)
	}
	return form
}

// memberToken runs the whole browser flow for username (created if
// needed) and returns an access token with scope.
func (f *fixture) memberToken(app credentialApplication, username, scope string) string {
	f.t.Helper()
	if _, err := members.Of(f.store).Member(context.Background(), username); err != nil {
		f.member(username)
	}
	b := f.browser()
	b.signIn(username)
	code := b.approve(authQuery(app, app.RedirectURIs[0], scope, "st"))
	return f.exchange(app, code, app.RedirectURIs[0], "")
}

// authQuery is an authorization request's query. An empty scope is left out.
func authQuery(app credentialApplication, redirectURI, scope, state string) url.Values {
	q := url.Values{"response_type": {"code"}, "client_id": {app.ClientID}, "redirect_uri": {redirectURI}}
	if scope != "" {
		q.Set("scope", scope)
	}
	if state != "" {
		q.Set("state", state)
	}
	return q
}

// challenge is the S256 code challenge of verifier.
func challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func wantStatus(t testing.TB, r resp, status int) {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("%s %s: HTTP %d, want %d; body:\n%s", r.Request.Method, r.Request.URL.Path, r.StatusCode, status, r.body)
	}
}

func wantBody(t testing.TB, r resp, substr string) {
	t.Helper()
	if !strings.Contains(r.body, substr) {
		t.Fatalf("%s %s: body lacks %q:\n%s", r.Request.Method, r.Request.URL.Path, substr, r.body)
	}
}

// wantRetryAfter checks that r names a wait in whole seconds, at least
// one, and returns it.
func wantRetryAfter(t testing.TB, r resp) int {
	t.Helper()
	secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || secs < 1 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	return secs
}

// wantJSONError checks an API error: status and {"error": text}.
func wantJSONError(t testing.TB, r resp, status int, text string) {
	t.Helper()
	wantStatus(t, r, status)
	if got := r.json(t)["error"]; got != text {
		t.Fatalf("%s %s: error %q, want %q", r.Request.Method, r.Request.URL.Path, got, text)
	}
}

// wantOAuthError checks an RFC 6749 error response of the token or
// revocation endpoint.
func wantOAuthError(t testing.TB, r resp, code string) {
	t.Helper()
	status := http.StatusBadRequest
	if code == "invalid_client" {
		status = http.StatusUnauthorized
	}
	wantStatus(t, r, status)
	body := r.json(t)
	if body["error"] != code {
		t.Fatalf("%s: error %v, want %s", r.Request.URL.Path, body["error"], code)
	}
	if d, ok := body["error_description"].(string); !ok || d == "" {
		t.Fatalf("%s: no error_description in %s", r.Request.URL.Path, r.body)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("%s: Cache-Control %q, want no-store", r.Request.URL.Path, cc)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: Content-Type %q", r.Request.URL.Path, ct)
	}
	if ch := r.Header.Get("WWW-Authenticate"); code == "invalid_client" && !strings.HasPrefix(ch, "Bearer ") && !strings.HasPrefix(ch, "Basic ") {
		t.Fatalf("invalid_client without a WWW-Authenticate challenge: %q", ch)
	}
	for _, k := range []string{"access_token", "refresh_token"} {
		if _, ok := body[k]; ok {
			t.Fatalf("error response carries %s: %s", k, r.body)
		}
	}
}

// browser is a member's browser: a cookie jar, no automatic redirects
// (each answer is checked), and the real HTML forms of the pages.
type browser struct {
	f *fixture
	c *http.Client
}

func (f *fixture) browser() *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return &browser{f: f, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) get(path string) resp {
	b.f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.f.url(path), nil)
	if err != nil {
		b.f.t.Fatal(err)
	}
	req.Header.Set("Sec-Fetch-Site", "none")
	return do(b.f.t, b.c, req)
}

// post sends a form as the site's own page does (same origin).
func (b *browser) post(path string, form url.Values) resp {
	b.f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.f.url(path), strings.NewReader(form.Encode()))
	if err != nil {
		b.f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.f.ts.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return do(b.f.t, b.c, req)
}

// follow opens the Location of a redirect on this site.
func (b *browser) follow(r resp) resp {
	b.f.t.Helper()
	loc, err := r.Location()
	if err != nil {
		b.f.t.Fatalf("%s %s: HTTP %d without a Location: %v\n%s", r.Request.Method, r.Request.URL.Path, r.StatusCode, err, r.body)
	}
	return b.get(loc.String())
}

// htmlForm is a POST form of a page: its action, the values of its hidden
// inputs, the names of the other inputs and its submit buttons.
type htmlForm struct {
	action  string
	hidden  url.Values
	inputs  map[string]bool
	buttons map[string][]string // name -> values
}

// forms parses the POST forms of an HTML page.
func forms(t testing.TB, page string) []*htmlForm {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("page is not HTML: %v", err)
	}
	attr := func(n *html.Node, name string) string {
		for _, a := range n.Attr {
			if a.Key == name {
				return a.Val
			}
		}
		return ""
	}
	var out []*htmlForm
	var cur *htmlForm
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "form":
				if strings.EqualFold(attr(n, "method"), "post") {
					cur = &htmlForm{action: attr(n, "action"), hidden: url.Values{}, inputs: map[string]bool{}, buttons: map[string][]string{}}
					out = append(out, cur)
					for c := n.FirstChild; c != nil; c = c.NextSibling {
						walk(c)
					}
					cur = nil
					return
				}
			case "input":
				if cur != nil && attr(n, "name") != "" {
					if attr(n, "type") == "hidden" {
						cur.hidden.Add(attr(n, "name"), attr(n, "value"))
					} else {
						cur.inputs[attr(n, "name")] = true
					}
				}
			case "button":
				if cur != nil && attr(n, "name") != "" {
					cur.buttons[attr(n, "name")] = append(cur.buttons[attr(n, "name")], attr(n, "value"))
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return out
}

// form returns the page's form posting to action.
func form(t testing.TB, r resp, action string) *htmlForm {
	t.Helper()
	for _, f := range forms(t, r.body) {
		if f.action == action {
			return f
		}
	}
	t.Fatalf("%s %s: no form posting to %s on the page:\n%s", r.Request.Method, r.Request.URL.Path, action, r.body)
	return nil
}

// submit fills the page's form posting to action with fields (inputs the
// member types, and the button pressed) on top of the hidden values the
// page sent. A field the form doesn't have fails the test.
func (b *browser) submit(r resp, action string, fields url.Values) resp {
	b.f.t.Helper()
	fm := form(b.f.t, r, action)
	values := url.Values{}
	for k, v := range fm.hidden {
		values[k] = append([]string(nil), v...)
	}
	for k, v := range fields {
		switch {
		case fm.inputs[k]:
		case fm.buttons[k] != nil:
			found := false
			for _, bv := range fm.buttons[k] {
				found = found || bv == v[0]
			}
			if !found {
				b.f.t.Fatalf("the form posting to %s has no button %s=%s", action, k, v[0])
			}
		default:
			b.f.t.Fatalf("the form posting to %s has no field %s", action, k)
		}
		values[k] = v
	}
	return b.post(action, values)
}

// signIn signs in with the real form of the sign-in page.
// signedIn is a fresh browser with username signed in.
func (f *fixture) signedIn(username string) *browser {
	f.t.Helper()
	b := f.browser()
	b.signIn(username)
	return b
}

func (b *browser) signIn(username string) resp {
	b.f.t.Helper()
	p := b.get(account.SignInPath)
	wantStatus(b.f.t, p, http.StatusOK)
	r := b.submit(p, account.SignInPath, url.Values{"username": {username}, "password": {password}})
	wantStatus(b.f.t, r, http.StatusSeeOther)
	return r
}

// consent opens the authorization page for q, signing in as username on
// the way if the server asks, and returns the consent page.
func (b *browser) consent(q url.Values, username string) resp {
	b.f.t.Helper()
	r := b.get(oauth.AuthorizePath + "?" + q.Encode())
	if r.StatusCode == http.StatusSeeOther {
		signIn := b.follow(r)
		wantStatus(b.f.t, signIn, http.StatusOK)
		back := b.submit(signIn, account.SignInPath, url.Values{"username": {username}, "password": {password}})
		wantStatus(b.f.t, back, http.StatusSeeOther)
		r = b.follow(back)
	}
	wantStatus(b.f.t, r, http.StatusOK)
	return r
}

// decide presses a consent page's button (approve or deny).
func (b *browser) decide(consent resp, decision string) resp {
	b.f.t.Helper()
	return b.submit(consent, oauth.AuthorizePath, url.Values{"decision": {decision}})
}

// approve, for an already signed-in browser, approves q and returns the
// code of the redirect (checking the state came back). When the member
// already granted the app these scopes, the server redirects at once
// without a consent page (TestAuthorizeSkipsConsentForAMatchingGrant).
func (b *browser) approve(q url.Values) string {
	b.f.t.Helper()
	r := b.get(oauth.AuthorizePath + "?" + q.Encode())
	if r.StatusCode != http.StatusFound {
		r = b.decide(b.consent(q, ""), "approve")
	}
	wantStatus(b.f.t, r, http.StatusFound)
	loc, err := r.Location()
	if err != nil {
		b.f.t.Fatal(err)
	}
	if got := loc.Query().Get("state"); got != q.Get("state") {
		b.f.t.Fatalf("state %q, want %q", got, q.Get("state"))
	}
	code := loc.Query().Get("code")
	if code == "" {
		b.f.t.Fatalf("no code in %s", loc)
	}
	return code
}

// loopbackIP is the host of the test server's address.
func loopbackIP(ts *httptest.Server) string {
	host, _, _ := net.SplitHostPort(ts.Listener.Addr().String())
	return host
}
