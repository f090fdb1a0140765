package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// The library pages come with hearth_graphql: signed-in members land
// there after signing in and at / when nothing else in the site answers
// it; a site's own answer at / stays its own.
func TestMembersLandInTheLibraryThroughCaddy(t *testing.T) {
	dir := t.TempDir()
	site := func(rest string) string {
		return hearthCaddyfile(dir, fmt.Sprintf("%s {\n\thearth_graphql\n%s}\n", testSite, rest))
	}
	startHearth(t, site(""))
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"alice","password":"correct horse"}`, http.StatusCreated, nil)

	b := newBrowser(t, testSite)
	if p := b.get("/library"); p.StatusCode != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/auth/sign_in?return_to=") {
		t.Fatalf("library while signed out: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
	}
	if p := b.signIn("alice", "correct horse"); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/library" {
		t.Fatalf("sign-in: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
	}
	p := b.get("/library")
	if p.StatusCode != http.StatusOK || !strings.Contains(p.body, "Your inbox is empty") || !strings.Contains(p.Header.Get("Content-Security-Policy"), "script-src 'sha256-") {
		t.Fatalf("library: HTTP %d: %s", p.StatusCode, p.body)
	}
	if p := b.get("/"); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/library" {
		t.Fatalf("/ signed in: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
	}
	if p := newBrowser(t, testSite).get("/"); p.StatusCode != http.StatusOK || !strings.Contains(p.body, `href="/auth/sign_in"`) {
		t.Fatalf("/ signed out: HTTP %d, want the landing page", p.StatusCode)
	}
	loadCaddyfile(t, site("\trespond \"the rest of the site\"\n"))
	if p := b.get("/"); p.StatusCode != http.StatusOK || p.body != "the rest of the site" {
		t.Fatalf("/ with the site's own answer, signed in: HTTP %d %q", p.StatusCode, p.body)
	}
}

// The library is the home of the sites that have it, not of every site of
// the configuration: on a site with hearth_oauth alone, members land on the
// settings and / stays the landing page, while on a site with the library
// they land there even when hearth_oauth, ahead of hearth_graphql in the
// route, serves the sign-in.
func TestHomeIsPerSite(t *testing.T) {
	const oauthOnly = "http://localhost:9081"
	startHearth(t, hearthCaddyfile(t.TempDir(), testSite+` {
	route {
		hearth_oauth
		hearth_graphql
	}
}
`+oauthOnly+` {
	hearth_oauth
}
`))
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"alice","password":"correct horse"}`, http.StatusCreated, nil)

	b := newBrowser(t, oauthOnly)
	if p := b.signIn("alice", "correct horse"); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/settings" {
		t.Fatalf("sign-in on the site without the library: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
	}
	if p := b.get("/"); p.StatusCode != http.StatusOK || !strings.Contains(p.body, "Sign-in for apps") {
		t.Fatalf("/ signed in on the site without the library: HTTP %d to %q, want its landing page", p.StatusCode, p.Header.Get("Location"))
	}
	if p := b.get("/settings"); p.StatusCode != http.StatusOK || strings.Contains(p.body, `href="/library"`) {
		t.Fatalf("settings on the site without the library: HTTP %d, want no link to a library: %s", p.StatusCode, p.body)
	}

	b = newBrowser(t, testSite)
	if p := b.signIn("alice", "correct horse"); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/library" {
		t.Fatalf("sign-in on the site with the library: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
	}
	if p := b.get("/"); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/library" {
		t.Fatalf("/ signed in on the site with the library: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
	}
	if p := b.get("/settings"); p.StatusCode != http.StatusOK || !strings.Contains(p.body, `href="/library"`) {
		t.Fatalf("settings on the site with the library: HTTP %d, want its link to the library", p.StatusCode)
	}
}
