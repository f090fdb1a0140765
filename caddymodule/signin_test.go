package caddymodule

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

const oauthSite = testSite + " {\n\thearth_oauth\n\trespond \"the rest of the site\"\n}\n"

func TestMemberSignsInThroughCaddy(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), oauthSite))
	adminJSONOK(t, http.MethodPost, "/hearth/members",
		`{"username":"alice","password":"correct horse","display_name":"Alice"}`, http.StatusCreated, nil)

	b := newBrowser(t, testSite)
	p := b.get("/settings")
	if p.StatusCode != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/auth/sign_in") {
		t.Fatalf("settings while signed out: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
	}

	p = b.signIn("alice", "wrong password")
	if p.StatusCode != http.StatusUnauthorized || !strings.Contains(p.body, "Wrong username or password") {
		t.Fatalf("wrong password: HTTP %d: %s", p.StatusCode, p.body)
	}
	if p := b.get("/settings"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("a wrong password signed in: HTTP %d", p.StatusCode)
	}

	p = b.signIn("alice", "correct horse")
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/settings" {
		t.Fatalf("sign-in: HTTP %d to %q: %s", p.StatusCode, p.Header.Get("Location"), p.body)
	}
	p = b.get("/settings")
	if p.StatusCode != http.StatusOK || !strings.Contains(p.body, "@alice") ||
		!strings.Contains(p.body, `href="/oauth/authorized_applications"`) {
		t.Fatalf("settings after sign-in: HTTP %d: %s", p.StatusCode, p.body)
	}

	// Other paths still reach the rest of the site.
	if p := b.get("/about"); p.StatusCode != http.StatusOK || p.body != "the rest of the site" {
		t.Fatalf("other path: HTTP %d: %q", p.StatusCode, p.body)
	}

	// Suspension ends the session and blocks signing in again.
	adminJSONOK(t, http.MethodPost, "/hearth/members/alice/suspend", "", http.StatusOK, nil)
	if p := b.get("/settings"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("suspended member still signed in: HTTP %d", p.StatusCode)
	}
	p = b.signIn("alice", "correct horse")
	if p.StatusCode != http.StatusForbidden || !strings.Contains(p.body, "suspended") {
		t.Fatalf("suspended sign-in: HTTP %d: %s", p.StatusCode, p.body)
	}
	adminJSONOK(t, http.MethodPost, "/hearth/members/alice/unsuspend", "", http.StatusOK, nil)
	if p := b.signIn("alice", "correct horse"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in after unsuspend: HTTP %d: %s", p.StatusCode, p.body)
	}
}

func TestSignInRateLimitThroughCaddy(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), oauthSite))
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"bob","password":"battery staple"}`, http.StatusCreated, nil)

	b := newBrowser(t, testSite)
	for i := 1; i <= 10; i++ {
		if p := b.signIn("bob", "guess "+strconv.Itoa(i)); p.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failed sign-in %d: HTTP %d", i, p.StatusCode)
		}
	}
	// The eleventh attempt is refused before the password is checked, even
	// when it is right.
	p := b.signIn("bob", "battery staple")
	if p.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("after 10 failures: HTTP %d: %s", p.StatusCode, p.body)
	}
	if secs, err := strconv.Atoi(p.Header.Get("Retry-After")); err != nil || secs < 1 {
		t.Fatalf("Retry-After %q", p.Header.Get("Retry-After"))
	}
	if p := b.get("/settings"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("rate-limited sign-in started a session: HTTP %d", p.StatusCode)
	}
	// Another member is not locked out by bob's failures.
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"carol","password":"carol's password"}`, http.StatusCreated, nil)
	if p := newBrowser(t, testSite).signIn("carol", "carol's password"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("other member: HTTP %d: %s", p.StatusCode, p.body)
	}
}
