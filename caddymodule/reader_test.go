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
