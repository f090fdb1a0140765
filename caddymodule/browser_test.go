package caddymodule

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/internal/testform"
)

// browser is a cookie-jar HTTP client that fills the real HTML forms Hearth
// serves, as a member's browser would. It does not follow redirects, so
// each answer can be checked.
type browser struct {
	t      testing.TB
	client *http.Client
	origin string
}

func newBrowser(t testing.TB, origin string) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, origin: origin, client: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// page is an answer with its body read.
type page struct {
	*http.Response
	body string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	return page{resp, string(body)}
}

func (b *browser) abs(path string) string {
	if strings.Contains(path, "://") {
		return path
	}
	return b.origin + path
}

// get opens path (or an absolute URL).
func (b *browser) get(path string) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.abs(path), nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

// post submits form to path as the page's own form would (same origin).
func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.abs(path), strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.origin)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.do(req)
}

// submit fills the page's form whose action is action: its hidden fields
// as the page sent them, then fields (the member's input and the button
// pressed).
func (b *browser) submit(p page, action string, fields url.Values) page {
	b.t.Helper()
	if form, ok := testform.Fill(p.body, action, fields); ok {
		return b.post(action, form)
	}
	b.t.Fatalf("no form posting to %s on the page:\n%s", action, p.body)
	return page{}
}

// signIn opens the sign-in page and fills it in.
func (b *browser) signIn(username, password string) page {
	b.t.Helper()
	p := b.get("/auth/sign_in")
	if p.StatusCode != http.StatusOK {
		b.t.Fatalf("sign-in page: HTTP %d", p.StatusCode)
	}
	return b.submit(p, "/auth/sign_in", url.Values{"username": {username}, "password": {password}})
}
