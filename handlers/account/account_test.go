package account_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html"
	"html/template"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

const password = "correct horse battery"

type fixture struct {
	t     *testing.T
	store *storage.Store
	pages *account.Pages
	srv   *httptest.Server
}

// newFixture serves the pages (and a 404 "next handler" for everything
// else) from a real store, with one settings page registered.
func newFixture(t *testing.T, opts account.Options) *fixture {
	t.Helper()
	st, err := storage.Open(t.TempDir(), storage.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newFixtureOn(t, st, opts)
}

// newFixtureOn is newFixture on the store st.
func newFixtureOn(t *testing.T, st *storage.Store, opts account.Options) *fixture {
	t.Helper()
	p := account.New(st, opts)
	tokens := template.Must(template.New("tokens").Parse(`<p>Tokens of {{.}}</p><form method="post"><button>Create</button></form>`))
	p.AddSettingsPage(account.SettingsPage{Path: "/settings/api_tokens", Title: "API Tokens", Subpaths: true, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := p.CurrentMember(r)
		if r.Method == http.MethodPost {
			fmt.Fprintf(w, "created for %s at %s", m.Username, r.URL.Path)
			return
		}
		p.Render(w, r, http.StatusOK, "API Tokens", tokens, m.Username)
	})})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.Handles(r) {
			p.ServeHTTP(w, r)
			return
		}
		http.Error(w, "next handler", http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	return &fixture{t: t, store: st, pages: p, srv: srv}
}

func (f *fixture) member(username string) *members.Member {
	f.t.Helper()
	m, err := members.Of(f.store).CreateMember(context.Background(), username, "Display "+username, password)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// browser is a cookie-jar client that does not follow redirects, so tests
// see each response.
func (f *fixture) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type resp struct {
	*http.Response
	body string
}

func do(t *testing.T, c *http.Client, req *http.Request) resp {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return resp{res, string(b)}
}

func (f *fixture) get(c *http.Client, path string) resp {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
	return do(f.t, c, req)
}

func (f *fixture) post(c *http.Client, path string, form url.Values, header ...string) resp {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(f.t, c, req)
}

func (f *fixture) signIn(c *http.Client, username, pw, returnTo string) resp {
	f.t.Helper()
	return f.post(c, "/auth/sign_in", url.Values{"username": {username}, "password": {pw}, "return_to": {returnTo}})
}

func sessionCookie(r resp) *http.Cookie {
	for _, c := range r.Cookies() {
		if c.Name == account.CookieName {
			return c
		}
	}
	return nil
}

func wantStatus(t *testing.T, r resp, status int) {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body:\n%s", r.Request.Method, r.Request.URL.Path, r.StatusCode, status, r.body)
	}
}

// wantRedirect fails t unless r is a 303 to location.
func wantRedirect(t *testing.T, r resp, location string) {
	t.Helper()
	wantStatus(t, r, http.StatusSeeOther)
	if got := r.Header.Get("Location"); got != location {
		t.Fatalf("redirect to %q, want %q", got, location)
	}
}

func wantBody(t *testing.T, r resp, substr string) {
	t.Helper()
	if !strings.Contains(r.body, substr) {
		t.Fatalf("%s %s: body lacks %q:\n%s", r.Request.Method, r.Request.URL.Path, substr, r.body)
	}
}

func TestSignInStartsSessionAndReturns(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	c := f.browser()

	r := f.get(c, "/settings/api_tokens?tab=new")
	wantRedirect(t, r, "/auth/sign_in?return_to="+url.QueryEscape("/settings/api_tokens?tab=new"))

	r = f.get(c, r.Header.Get("Location"))
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, `<label for="username">`)
	wantBody(t, r, `<label for="password">`)
	wantBody(t, r, `name="return_to" value="/settings/api_tokens?tab=new"`)

	r = f.signIn(c, "ALICE", password, "/settings/api_tokens?tab=new")
	wantRedirect(t, r, "/settings/api_tokens?tab=new")
	ck := sessionCookie(r)
	if ck == nil || !strings.HasPrefix(ck.Value, members.SessionPrefix) {
		t.Fatalf("no session cookie in %v", r.Header["Set-Cookie"])
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.MaxAge <= 0 {
		t.Fatalf("cookie attributes: %+v", ck)
	}
	if ck.Secure {
		t.Fatalf("cookie is Secure on plain-http loopback; the browser would never send it back")
	}

	r = f.get(c, "/settings/api_tokens?tab=new")
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "Tokens of alice")
	wantBody(t, r, `<a href="/settings/api_tokens" aria-current="page">API Tokens</a>`)

	r = f.get(c, "/settings")
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "@alice")
	wantBody(t, r, `action="/auth/sign_out"`)

	// Signed in, the sign-in page sends the member on.
	r = f.get(c, "/auth/sign_in")
	wantRedirect(t, r, "/settings")
}

func TestWrongPasswordIsRefused(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	for _, tc := range []struct{ name, username, password string }{
		{"wrong password", "alice", "not the password"},
		{"unknown member", "bob", password},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.browser()
			r := f.signIn(c, tc.username, tc.password, "")
			wantStatus(t, r, http.StatusUnauthorized)
			wantBody(t, r, "Wrong username or password.")
			wantBody(t, r, `value="`+tc.username+`"`)
			if sessionCookie(r) != nil {
				t.Fatal("a failed sign-in set a session cookie")
			}
			if strings.Contains(r.body, tc.password) {
				t.Fatal("the page repeats the password")
			}
			wantStatus(t, f.get(c, "/settings"), http.StatusSeeOther)
		})
	}
}

// A refused sign-in's log line names the member whose password was wrong,
// and never what was typed as a username that is no member's: people type
// their password there (into the wrong field, after a username the browser
// filled in), and the log keeps it.
func TestRefusedSignInsLogNoUsernameThatIsNotAMembers(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	f := newFixture(t, account.Options{Logger: zap.New(core), FailuresPerUsername: 2, FailuresPerIP: 100})
	f.member("alice")
	c := f.browser()
	// A password that is a well-formed username: two failures, then a
	// refusal by the rate limit.
	typed := "tr0ub4dor3"
	for range 3 {
		f.signIn(c, typed, "alice's password, maybe", "")
	}
	f.signIn(c, "Alice", "not the password", "")
	var names []string
	for _, e := range logs.All() {
		if !strings.HasPrefix(e.Message, "sign-in") {
			continue
		}
		fields := e.ContextMap()
		if fmt.Sprint(fields) != strings.ReplaceAll(fmt.Sprint(fields), typed, "") {
			t.Errorf("%q logged what was typed as the username: %v", e.Message, fields)
		}
		if u, ok := fields["username"]; ok {
			names = append(names, e.Message+": "+fmt.Sprint(u))
		} else if fields["username_known"] != false {
			t.Errorf("%q neither names a member nor says the username is none: %v", e.Message, fields)
		}
	}
	if want := []string{"sign-in failed: alice"}; !slices.Equal(names, want) {
		t.Errorf("usernames logged: %q, want %q", names, want)
	}
	if n := len(logs.FilterField(zap.Bool("username_known", false)).All()); n != 3 {
		t.Errorf("%d lines say the username is none, want 3 (two failures, one refusal)", n)
	}
}

func TestBadSignInInput(t *testing.T) {
	f := newFixture(t, account.Options{})
	c := f.browser()
	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		text   string
	}{
		{"empty", url.Values{}, http.StatusBadRequest, "Enter your username and your password."},
		{"no password", url.Values{"username": {"alice"}}, http.StatusBadRequest, "Enter your username and your password."},
		{"bad username", url.Values{"username": {"al ice<script>"}, "password": {password}}, http.StatusBadRequest, "A username is 1 to 30 letters"},
		{"long password", url.Values{"username": {"alice"}, "password": {strings.Repeat("x", 200)}}, http.StatusBadRequest, "Wrong username or password."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.post(c, "/auth/sign_in", tc.form)
			wantStatus(t, r, tc.status)
			wantBody(t, r, tc.text)
			if strings.Contains(r.body, "<script>") {
				t.Fatal("input echoed unescaped")
			}
		})
	}
	t.Run("too large", func(t *testing.T) {
		r := f.post(c, "/auth/sign_in", url.Values{"username": {"alice"}, "password": {strings.Repeat("x", 64<<10)}})
		wantStatus(t, r, http.StatusRequestEntityTooLarge)
	})
	t.Run("method", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodDelete, f.srv.URL+"/auth/sign_in", nil)
		r := do(t, c, req)
		wantStatus(t, r, http.StatusMethodNotAllowed)
		if r.Header.Get("Allow") != "GET, POST" {
			t.Fatalf("Allow: %q", r.Header.Get("Allow"))
		}
	})
}

func TestSuspendedMemberCannotSignIn(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	c := f.browser()
	wantStatus(t, f.signIn(c, "alice", password, ""), http.StatusSeeOther)
	wantStatus(t, f.get(c, "/settings"), http.StatusOK)

	if _, err := members.Of(f.store).SetSuspended(t.Context(), "alice", true); err != nil {
		t.Fatal(err)
	}
	r := f.get(c, "/settings")
	wantStatus(t, r, http.StatusSeeOther) // the session is gone

	r = f.signIn(c, "alice", password, "")
	wantStatus(t, r, http.StatusForbidden)
	wantBody(t, r, "This account is suspended")
	if sessionCookie(r) != nil {
		t.Fatal("suspended member got a session cookie")
	}
	// A wrong password still says only "wrong", not whether the account is suspended.
	r = f.signIn(c, "alice", "not the password", "")
	wantStatus(t, r, http.StatusUnauthorized)

	if _, err := members.Of(f.store).SetSuspended(t.Context(), "alice", false); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, f.signIn(c, "alice", password, ""), http.StatusSeeOther)
}

func TestCurrentMemberRefusesSuspendedMember(t *testing.T) {
	f := newFixture(t, account.Options{})
	m := f.member("alice")
	id := f.session(m)
	req := httptest.NewRequest(http.MethodGet, "/settings", nil)
	req.AddCookie(&http.Cookie{Name: account.CookieName, Value: id})
	if got := f.pages.CurrentMember(req); got == nil || got.Username != "alice" {
		t.Fatalf("CurrentMember = %v", got)
	}
	if _, err := members.Of(f.store).SetSuspended(req.Context(), "alice", true); err != nil {
		t.Fatal(err)
	}
	if got := f.pages.CurrentMember(req); got != nil {
		t.Fatalf("CurrentMember of a suspended member = %v", got.Username)
	}
	rec := httptest.NewRecorder()
	if _, ok := f.pages.RequireMember(rec, req); ok || rec.Code != http.StatusSeeOther {
		t.Fatalf("RequireMember: ok=%v code=%d", ok, rec.Code)
	}
}

func TestSignInRateLimitPerUsername(t *testing.T) {
	f := newFixture(t, account.Options{FailuresPerUsername: 3, FailuresPerIP: 100})
	f.member("alice")
	c := f.browser()
	f.failSignIns(c, "alice", 3)
	for _, pw := range []string{"wrong password", password} {
		r := f.signIn(c, "Alice", pw, "")
		wantStatus(t, r, http.StatusTooManyRequests)
		wantBody(t, r, "Too many failed sign-ins")
		if n, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || n < 1 {
			t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
		}
		if sessionCookie(r) != nil {
			t.Fatal("rate-limited sign-in set a cookie")
		}
	}
	// Another member is not affected.
	f.member("bob")
	wantStatus(t, f.signIn(c, "bob", password, ""), http.StatusSeeOther)
}

func TestSignInRateLimitPerIP(t *testing.T) {
	f := newFixture(t, account.Options{FailuresPerUsername: 100, FailuresPerIP: 4})
	f.member("alice")
	c := f.browser()
	for i := 0; i < 4; i++ {
		wantStatus(t, f.signIn(c, fmt.Sprintf("guess%d", i), "wrong password", ""), http.StatusUnauthorized)
	}
	r := f.signIn(c, "alice", password, "")
	wantStatus(t, r, http.StatusTooManyRequests)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
}

func TestSuccessfulSignInResetsUsernameFailures(t *testing.T) {
	f := newFixture(t, account.Options{FailuresPerUsername: 3, FailuresPerIP: 100})
	f.member("alice")
	c := f.browser()
	f.failSignIns(c, "alice", 2)
	wantStatus(t, f.signIn(c, "alice", password, ""), http.StatusSeeOther)
	for i := 0; i < 3; i++ {
		wantStatus(t, f.signIn(f.browser(), "alice", "wrong password", ""), http.StatusUnauthorized)
	}
}

// failSignIns signs in n times as username with a wrong password, each
// refused (401).
func (f *fixture) failSignIns(c *http.Client, username string, n int) {
	f.t.Helper()
	for range n {
		wantStatus(f.t, f.signIn(c, username, "wrong password", ""), http.StatusUnauthorized)
	}
}

func TestReturnToMustBeLocalPath(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	for _, rt := range []string{
		"//evil.example/x",
		"/\\evil.example",
		"\\\\evil.example",
		"/%2Fevil.example",
		"/%5Cevil.example",
		"https://evil.example/",
		"http:/evil.example",
		"javascript:alert(1)",
		"evil.example",
		"/ok\r\nSet-Cookie: x=1",
		"/ok\\..\\x",
		"/" + strings.Repeat("a", 3000),
	} {
		t.Run(rt, func(t *testing.T) {
			c := f.browser()
			r := f.signIn(c, "alice", password, rt)
			wantRedirect(t, r, "/settings")
			r = f.get(c, "/auth/sign_in?return_to="+url.QueryEscape(rt))
			if got := r.Header.Get("Location"); got != "/settings" {
				t.Fatalf("signed-in GET with return_to %q redirected to %q", rt, got)
			}
		})
	}
	c := f.browser()
	r := f.signIn(c, "alice", password, "/oauth/authorize?client_id=1&scope=read+write")
	if got := r.Header.Get("Location"); got != "/oauth/authorize?client_id=1&scope=read+write" {
		t.Fatalf("local return_to lost: %q", got)
	}
}

func TestCrossOriginPostsAreRefused(t *testing.T) {
	f := newFixture(t, account.Options{OpenRegistration: true})
	f.member("alice")
	form := url.Values{"username": {"alice"}, "password": {password}}
	for _, h := range [][]string{
		{"Origin", "https://evil.example"},
		{"Sec-Fetch-Site", "cross-site"},
	} {
		t.Run(h[0], func(t *testing.T) {
			c := f.browser()
			r := f.post(c, "/auth/sign_in", form, h...)
			wantStatus(t, r, http.StatusForbidden)
			wantBody(t, r, "sent from another site")
			if sessionCookie(r) != nil {
				t.Fatal("cross-origin sign-in set a cookie")
			}
			r = f.post(c, "/auth/sign_up", url.Values{"username": {"mallory"}, "password": {password}, "password_confirmation": {password}}, h...)
			wantStatus(t, r, http.StatusForbidden)
			if _, err := members.Of(f.store).Member(t.Context(), "mallory"); err == nil {
				t.Fatal("cross-origin sign-up created a member")
			}

			// Signed in, a cross-origin sign-out or settings post is refused too.
			wantStatus(t, f.signIn(c, "alice", password, ""), http.StatusSeeOther)
			wantStatus(t, f.post(c, "/auth/sign_out", nil, h...), http.StatusForbidden)
			wantStatus(t, f.post(c, "/settings/api_tokens", nil, h...), http.StatusForbidden)
			wantStatus(t, f.get(c, "/settings"), http.StatusOK)
		})
	}
	t.Run("same origin", func(t *testing.T) {
		c := f.browser()
		r := f.post(c, "/auth/sign_in", form, "Origin", f.srv.URL, "Sec-Fetch-Site", "same-origin")
		wantStatus(t, r, http.StatusSeeOther)
		r = f.post(c, "/settings/api_tokens/new", nil, "Origin", f.srv.URL)
		wantStatus(t, r, http.StatusOK)
		wantBody(t, r, "created for alice at /settings/api_tokens/new")
	})
}

func TestSignOut(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	c := f.browser()
	r := f.signIn(c, "alice", password, "")
	old := sessionCookie(r)

	// GET only offers the button.
	r = f.get(c, "/auth/sign_out")
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "You are signed in as <strong>@alice</strong>")
	wantStatus(t, f.get(c, "/settings"), http.StatusOK)

	r = f.post(c, "/auth/sign_out", nil)
	wantStatus(t, r, http.StatusSeeOther)
	if ck := sessionCookie(r); ck == nil || ck.MaxAge >= 0 {
		t.Fatalf("sign-out did not clear the cookie: %v", r.Header["Set-Cookie"])
	}
	// It lands on the sign-in page, which says what happened.
	if got := r.Header.Get("Location"); got != "/auth/sign_in?signed_out=1" {
		t.Fatalf("sign-out sends to %q", got)
	}
	wantBody(t, f.get(c, r.Header.Get("Location")), `<p class="notice" role="status">You are signed out.</p>`)
	if r := f.get(c, "/auth/sign_in"); strings.Contains(r.body, "You are signed out") {
		t.Error("the plain sign-in page says the member signed out")
	}
	wantStatus(t, f.get(c, "/settings"), http.StatusSeeOther)

	// The old session id no longer works, even if a copy was kept.
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/settings", nil)
	req.AddCookie(&http.Cookie{Name: account.CookieName, Value: old.Value})
	wantStatus(t, do(t, &http.Client{CheckRedirect: c.CheckRedirect}, req), http.StatusSeeOther)
}

func TestSignInReplacesPlantedSession(t *testing.T) {
	f := newFixture(t, account.Options{})
	m := f.member("alice")
	planted := f.session(m)
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/auth/sign_in", strings.NewReader(url.Values{"username": {"alice"}, "password": {password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: account.CookieName, Value: planted})
	r := do(t, f.browser(), req)
	wantStatus(t, r, http.StatusSeeOther)
	if ck := sessionCookie(r); ck == nil || ck.Value == planted {
		t.Fatal("sign-in kept the session id the browser brought")
	}
	if _, err := members.Of(f.store).SessionMember(req.Context(), planted); err == nil {
		t.Fatal("the earlier session still works")
	}
}

func TestSignUp(t *testing.T) {
	f := newFixture(t, account.Options{OpenRegistration: true})
	f.member("alice")
	c := f.browser()

	r := f.get(c, "/auth/sign_up?return_to=%2Foauth%2Fauthorize%3Fx%3D1")
	wantStatus(t, r, http.StatusOK)
	for _, l := range []string{`<label for="username">`, `<label for="display_name">`, `<label for="password">`, `<label for="password_confirmation">`} {
		wantBody(t, r, l)
	}
	wantBody(t, f.get(c, "/auth/sign_in"), `href="/auth/sign_up"`)

	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		text   string
	}{
		{"bad username", url.Values{"username": {"no spaces"}, "password": {password}, "password_confirmation": {password}}, http.StatusBadRequest, "Username must be 1 to 30 letters, digits or underscores."},
		{"short password", url.Values{"username": {"carol"}, "password": {"short"}, "password_confirmation": {"short"}}, http.StatusBadRequest, "Password must be 8 to 128 characters long."},
		{"mismatch", url.Values{"username": {"carol"}, "password": {password}, "password_confirmation": {password + "!"}}, http.StatusBadRequest, "The two passwords don&#39;t match."},
		{"long display name", url.Values{"username": {"carol"}, "display_name": {strings.Repeat("d", 31)}, "password": {password}, "password_confirmation": {password}}, http.StatusBadRequest, "Display name must be at most 30 characters"},
		{"taken", url.Values{"username": {"ALICE"}, "password": {password}, "password_confirmation": {password}}, http.StatusConflict, "is taken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.post(c, "/auth/sign_up", tc.form)
			wantStatus(t, r, tc.status)
			wantBody(t, r, tc.text)
			if sessionCookie(r) != nil {
				t.Fatal("failed sign-up set a cookie")
			}
			if _, err := members.Of(f.store).Member(t.Context(), "carol"); err == nil {
				t.Fatal("failed sign-up created a member")
			}
		})
	}

	r = f.post(c, "/auth/sign_up", url.Values{"username": {"carol"}, "display_name": {"Carol C"}, "password": {password}, "password_confirmation": {password}, "return_to": {"/oauth/authorize?x=1"}})
	wantRedirect(t, r, "/oauth/authorize?x=1")
	m, err := members.Of(f.store).Member(t.Context(), "carol")
	if err != nil || m.DisplayName != "Carol C" {
		t.Fatalf("member after sign-up: %v, %v", m, err)
	}
	r = f.get(c, "/settings")
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "Carol C @carol")
	// The new account signs in with its password.
	wantStatus(t, f.signIn(f.browser(), "carol", password, ""), http.StatusSeeOther)
}

func TestSignUpRateLimit(t *testing.T) {
	f := newFixture(t, account.Options{OpenRegistration: true, SignUpsPerIP: 2})
	for i := 0; i < 2; i++ {
		wantStatus(t, f.post(f.browser(), "/auth/sign_up", url.Values{"username": {fmt.Sprint("user", i)}, "password": {password}, "password_confirmation": {password}}), http.StatusSeeOther)
	}
	r := f.post(f.browser(), "/auth/sign_up", url.Values{"username": {"user9"}, "password": {password}, "password_confirmation": {password}})
	wantStatus(t, r, http.StatusTooManyRequests)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	if _, err := members.Of(f.store).Member(t.Context(), "user9"); err == nil {
		t.Fatal("rate-limited sign-up created a member")
	}
}

func TestSignUpClosedByDefault(t *testing.T) {
	f := newFixture(t, account.Options{})
	c := f.browser()
	wantStatus(t, f.get(c, "/auth/sign_up"), http.StatusNotFound)
	r := f.post(c, "/auth/sign_up", url.Values{"username": {"carol"}, "password": {password}, "password_confirmation": {password}})
	wantStatus(t, r, http.StatusNotFound)
	wantBody(t, r, "Sign-up is closed")
	if _, err := members.Of(f.store).Member(t.Context(), "carol"); err == nil {
		t.Fatal("closed sign-up created a member")
	}
	if strings.Contains(f.get(c, "/auth/sign_in").body, "/auth/sign_up") {
		t.Fatal("sign-in page links to a closed sign-up")
	}
}

var styleRE = regexp.MustCompile(`(?s)<style>(.*?)</style>`)

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, account.Options{OpenRegistration: true})
	f.member("alice")
	c, member := f.browser(), f.browser()
	f.signIn(member, "alice", password, "")
	pages := map[string]func() resp{
		"sign-in":       func() resp { return f.get(c, "/auth/sign_in") },
		"sign-up":       func() resp { return f.get(c, "/auth/sign_up") },
		"failed":        func() resp { return f.signIn(c, "alice", "wrong password", "") },
		"bad input":     func() resp { return f.signIn(c, "", "", "") },
		"sign-out":      func() resp { return f.get(c, "/auth/sign_out") },
		"settings":      func() resp { return f.get(member, "/settings") },
		"settings page": func() resp { return f.get(member, "/settings/api_tokens") },
	}
	for name, fetch := range pages {
		t.Run(name, func(t *testing.T) {
			r := fetch()
			h := r.Header
			csp := h.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "form-action 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
				if !strings.Contains(csp, want) {
					t.Fatalf("CSP %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe") {
				t.Fatalf("CSP %q allows unsafe sources", csp)
			}
			for k, v := range map[string]string{
				"X-Frame-Options": "DENY", "Referrer-Policy": "same-origin", "X-Content-Type-Options": "nosniff",
				"Cache-Control": "no-store", "Content-Type": "text/html; charset=utf-8",
			} {
				if h.Get(k) != v {
					t.Fatalf("%s: %q, want %q", k, h.Get(k), v)
				}
			}
			// The inline stylesheet is the one the policy's hash allows.
			m := styleRE.FindStringSubmatch(r.body)
			if m == nil {
				t.Fatal("no stylesheet")
			}
			sum := sha256.Sum256([]byte(m[1]))
			if !strings.Contains(csp, "style-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") {
				t.Fatalf("CSP %q does not allow the page's stylesheet", csp)
			}
		})
	}
}

func TestRenderKeepsPageOwnPolicy(t *testing.T) {
	f := newFixture(t, account.Options{})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/oauth/authorize", nil)
	csp := f.pages.ContentSecurityPolicy("https://app.example", "x'; script-src *")
	rec.Header().Set("Content-Security-Policy", csp)
	f.pages.Render(rec, req, http.StatusOK, "Authorize", template.Must(template.New("a").Parse(`<p>{{.}}</p>`)), "<b>hi</b>")
	if got := rec.Header().Get("Content-Security-Policy"); got != csp || !strings.Contains(got, "form-action 'self' https://app.example x") {
		t.Fatalf("CSP %q", got)
	}
	if strings.Contains(csp, "script-src *") && strings.Contains(csp, "; script-src") {
		t.Fatalf("a form-action source could inject a directive: %q", csp)
	}
	if !strings.Contains(rec.Body.String(), "<p>&lt;b&gt;hi&lt;/b&gt;</p>") || rec.Header().Get("X-Frame-Options") != "DENY" {
		t.Fatalf("render: %s", rec.Body.String())
	}
}

func TestCookieIsSecureOutsideLocalhost(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	for _, tc := range []struct {
		host   string
		tls    bool
		secure bool
	}{
		{"hearth.example", false, true},
		{"hearth.example", true, true},
		{"localhost:8080", false, false},
		{"app.localhost", false, false},
		{"127.0.0.1:2015", false, false},
		{"[::1]:2015", false, false},
		{"localhost", true, true},
	} {
		req := httptest.NewRequest(http.MethodPost, "http://"+tc.host+"/auth/sign_in", strings.NewReader(url.Values{"username": {"alice"}, "password": {password}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if !tc.tls {
			req.TLS = nil
		} else if req.TLS == nil {
			req = httptest.NewRequest(http.MethodPost, "https://"+tc.host+"/auth/sign_in", strings.NewReader(url.Values{"username": {"alice"}, "password": {password}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		rec := httptest.NewRecorder()
		f.pages.ServeHTTP(rec, req)
		res := rec.Result()
		var ck *http.Cookie
		for _, c := range res.Cookies() {
			if c.Name == account.CookieName {
				ck = c
			}
		}
		if res.StatusCode != http.StatusSeeOther || ck == nil {
			t.Fatalf("%s: status %d, cookie %v", tc.host, res.StatusCode, ck)
		}
		if ck.Secure != tc.secure {
			t.Errorf("host %s tls=%v: Secure=%v, want %v", tc.host, tc.tls, ck.Secure, tc.secure)
		}
	}
}

// TestSignInFromPlainHTTPOffLocalhostSaysWhy: a browser on a plain-HTTP
// page under a name other than localhost (http://mybox:8080) would drop the
// Secure session cookie and land on the sign-in page again with no word;
// the sign-in and sign-up forms say why instead, and start no session. The
// same form from an HTTPS page of that name signs in.
func TestSignInFromPlainHTTPOffLocalhostSaysWhy(t *testing.T) {
	f := newFixture(t, account.Options{OpenRegistration: true})
	f.member("alice")
	post := func(path string, form url.Values, origin string) resp {
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(form.Encode()))
		req.Host = "mybox:8080"
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		return do(t, f.browser(), req)
	}
	signIn := url.Values{"username": {"alice"}, "password": {password}}
	signUp := url.Values{"username": {"bob"}, "password": {password}, "password_confirmation": {password}}
	for _, tc := range []struct {
		path string
		form url.Values
	}{{"/auth/sign_in", signIn}, {"/auth/sign_up", signUp}} {
		r := post(tc.path, tc.form, "http://mybox:8080")
		wantStatus(t, r, http.StatusBadRequest)
		wantBody(t, r, "browsers keep the sign-in cookie only over HTTPS")
		if c := sessionCookie(r); c != nil {
			t.Errorf("%s from http://mybox:8080 set a session cookie", tc.path)
		}
	}
	if _, err := members.Of(f.store).Member(context.Background(), "bob"); err == nil {
		t.Error("the refused sign-up made the member bob")
	}
	r := post("/auth/sign_in", signIn, "https://mybox:8080")
	wantStatus(t, r, http.StatusSeeOther)
	if c := sessionCookie(r); c == nil || !c.Secure {
		t.Fatalf("sign-in from https://mybox:8080: cookie %v, want a Secure session cookie", c)
	}
	// A proxy on the LAN (nginx's proxy_pass keeps its upstream's name,
	// localhost:8080, as Host): the cookie is not Secure, the browser on
	// http://mybox keeps it, and the sign-in works as it always did.
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/auth/sign_in", strings.NewReader(signIn.Encode()))
	req.Host = "localhost:8080"
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://mybox")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	r = do(t, f.browser(), req)
	wantStatus(t, r, http.StatusSeeOther)
	if c := sessionCookie(r); c == nil || c.Secure {
		t.Fatalf("sign-in through a proxy passing Host localhost:8080 from http://mybox: cookie %v, want a session cookie that is not Secure", c)
	}
}

func TestSettingsPages(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	c := f.browser()
	r := f.get(c, "/settings")
	wantRedirect(t, r, "/auth/sign_in?return_to=%2Fsettings")
	if f.pages.Handles(httptest.NewRequest(http.MethodGet, "/settings_other", nil)) {
		t.Fatal("handles a path outside its pages")
	}
	wantStatus(t, f.get(c, "/elsewhere"), http.StatusNotFound)

	f.pages.AddSettingsPage(account.SettingsPage{Path: "/settings/applications/", Title: "Authorized apps", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "apps")
	})})
	f.pages.AddSettingsPage(account.SettingsPage{Path: "/settings/applications", Title: "Authorized applications", Subpaths: true, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "apps of "+f.pages.CurrentMember(r).Username)
	})})
	// A page without Subpaths leaves the paths below it to the site.
	f.pages.AddSettingsPage(account.SettingsPage{Path: "/settings/plain", Title: "Plain", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "plain")
	})})
	if !f.pages.Handles(httptest.NewRequest(http.MethodGet, "/settings/plain", nil)) || f.pages.Handles(httptest.NewRequest(http.MethodGet, "/settings/plain/x", nil)) {
		t.Fatal("a page without Subpaths: handles its path only")
	}
	if n := len(f.pages.SettingsPages()); n != 3 {
		t.Fatalf("%d settings pages, want 3 (same path replaces)", n)
	}
	wantStatus(t, f.get(c, "/settings/applications/42"), http.StatusSeeOther)
	f.signIn(c, "alice", password, "")
	r = f.get(c, "/settings")
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, `<a href="/settings/applications">Authorized applications</a>`)
	wantBody(t, r, `<a href="/settings/api_tokens">API Tokens</a>`)
	r = f.get(c, "/settings/applications/42")
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "apps of alice")
}

// postConcurrently sends n POSTs of form(i) to path at once and counts the
// answers by status.
func (f *fixture) postConcurrently(n int, path string, form func(i int) url.Values) map[int]int {
	f.t.Helper()
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := f.browser().PostForm(f.srv.URL+path, form(i))
			if err != nil {
				f.t.Error(err)
				return
			}
			res.Body.Close()
			mu.Lock()
			statuses[res.StatusCode]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return statuses
}

// Concurrent attempts are counted before the (slow) password check, so a
// burst gets no more password checks than the limit allows.
func TestSignInRateLimitHoldsUnderConcurrency(t *testing.T) {
	f := newFixture(t, account.Options{FailuresPerUsername: 5, FailuresPerIP: 100})
	f.member("alice")
	got := f.postConcurrently(40, "/auth/sign_in", func(i int) url.Values {
		return url.Values{"username": {"alice"}, "password": {fmt.Sprint("guess ", i)}}
	})
	if got[http.StatusUnauthorized] != 5 || got[http.StatusTooManyRequests] != 35 {
		t.Fatalf("40 concurrent wrong passwords with a limit of 5: %v", got)
	}
	// A refused attempt is not counted as a failure: the limit is 5
	// failures, not 5 + refused.
	f2 := newFixture(t, account.Options{FailuresPerUsername: 100, FailuresPerIP: 3})
	f2.member("bob")
	for i := 0; i < 2; i++ {
		wantStatus(t, f2.signIn(f2.browser(), "bob", "wrong password", ""), http.StatusUnauthorized)
	}
	wantStatus(t, f2.signIn(f2.browser(), "bob", password, ""), http.StatusSeeOther) // not a failure
	wantStatus(t, f2.signIn(f2.browser(), "bob", "wrong password", ""), http.StatusUnauthorized)
	wantStatus(t, f2.signIn(f2.browser(), "bob", password, ""), http.StatusTooManyRequests)
}

// Concurrent sign-ups are counted before the account is made (and its
// password hashed), so a burst makes no more accounts than the limit. (A
// sign-up refused for a username taken counts too:
// TestTakenUsernamesCountAgainstSignUps.)
func TestSignUpRateLimitHoldsUnderConcurrency(t *testing.T) {
	f := newFixture(t, account.Options{OpenRegistration: true, SignUpsPerIP: 3})
	got := f.postConcurrently(20, "/auth/sign_up", func(i int) url.Values {
		return url.Values{"username": {fmt.Sprint("user", i)}, "password": {password}, "password_confirmation": {password}}
	})
	if got[http.StatusSeeOther] != 3 || got[http.StatusTooManyRequests] != 17 {
		t.Fatalf("20 concurrent sign-ups with a limit of 3: %v", got)
	}
	ms, err := members.Of(f.store).Members(t.Context())
	if err != nil || len(ms) != 3 {
		t.Fatalf("%d members (%v), want 3", len(ms), err)
	}
}

var scriptRE = regexp.MustCompile(`<script src="(/auth/(?:copy|passkey).js\?v=[^"]+)" integrity="(sha256-[A-Za-z0-9+/=]+)" defer></script>`)

var scriptSrcRE = regexp.MustCompile(`script-src ([^;]+);`)

// TestCopyScriptIsTheOneThePolicyAllows: every page loads the copy-button
// script with its hash as integrity, the policy allows exactly that hash
// (no 'self', no inline script), and /auth/copy.js serves the text whose
// hash it is.
func TestCopyScriptIsTheOneThePolicyAllows(t *testing.T) {
	f := newFixture(t, account.Options{})
	c := f.browser()
	// The sign-in page loads the copy script and the passkey script, and
	// its policy allows exactly those two.
	page := f.get(c, "/auth/sign_in")
	scripts := scriptRE.FindAllStringSubmatch(page.body, -1)
	if len(scripts) != 2 {
		t.Fatalf("the page loads %d of the copy and passkey scripts:\n%s", len(scripts), page.body)
	}
	csp := page.Header.Get("Content-Security-Policy")
	var hashes []string
	for _, m := range scripts {
		src, hash := html.UnescapeString(m[1]), m[2]
		hashes = append(hashes, "'"+hash+"'")
		js := f.get(c, src)
		if js.StatusCode != http.StatusOK || js.Header.Get("Content-Type") != "text/javascript; charset=utf-8" || js.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("GET %s: HTTP %d %v", src, js.StatusCode, js.Header)
		}
		sum := sha256.Sum256([]byte(js.body))
		if got := "sha256-" + base64.StdEncoding.EncodeToString(sum[:]); got != hash {
			t.Fatalf("%s hashes to %s, the page names %s", src, got, hash)
		}
		if r := f.post(c, src, url.Values{}); r.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("POST %s: HTTP %d", src, r.StatusCode)
		}
	}
	if m := scriptSrcRE.FindStringSubmatch(csp); m == nil || m[1] != strings.Join(hashes, " ") {
		t.Fatalf("CSP %q does not allow exactly the scripts' hashes %v", csp, hashes)
	}
}
