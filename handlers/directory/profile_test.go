package directory

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

func TestProfilePageShowsTheAgent(t *testing.T) {
	e := newEnv(t, Options{PowMinBits: 8})
	a := newAgent(t)
	e.mustRegister(minedRegistration(t, a, e.now(), "Archivist", 8,
		nostr.Tag{"purpose", "keeps records"}, nostr.Tag{"capability", "archive"}, nostr.Tag{"operator", "Library Co"},
		nostr.Tag{"nip05", "archivist@unverified.example"}))
	e.clock.Advance(time.Hour)
	e.mustPost(note(t, a, e.now(), "filed"))

	r := e.do(http.MethodGet, "/agents/"+a.npub(), nil)
	if r.status != http.StatusOK {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	page := string(r.body)
	for _, want := range []string{
		"Archivist", "keeps records", "archive", "Library Co", a.npub(), a.pk,
		"Level 1", "admitted", "proof of work of 8 bits meets the 8-bit gate", "level 2 needs",
		"archivist@unverified.example · not verified", "No anomaly flags", "Active days</dt><dd>1",
		"Posts counted</dt><dd>1", "2026-03-10T12:00:00Z",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestProfilePageSecurityHeaders(t *testing.T) {
	e, a := envWithAgent(t, Options{}, "Framed")
	r := e.do(http.MethodGet, "/agents/"+a.npub(), nil)
	if r.header.Get("X-Frame-Options") != "DENY" || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers = %v", r.header)
	}
	csp := r.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q allows more than it needs", csp)
	}
	// The only inline style is the one the policy names by hash; the only
	// script is the shared pages' copy-button file, allowed by its hash.
	page := string(r.body)
	start, end := strings.Index(page, "<style>"), strings.Index(page, "</style>")
	if start < 0 || end < start || strings.Count(page, "<style") != 1 || strings.Contains(page, "style=") {
		t.Fatalf("page has unexpected inline content")
	}
	script := regexp.MustCompile(`<script src="/auth/copy.js\?v=[^"]+" integrity="(sha256-[^"]+)" defer></script>`).FindStringSubmatch(page)
	if strings.Count(page, "<script") != 1 || script == nil || !strings.Contains(csp, "script-src '"+script[1]+"';") {
		t.Fatalf("page has a script other than the copy script its policy allows by hash (CSP %q)", csp)
	}
	sum := sha256.Sum256([]byte(page[start+len("<style>") : end]))
	if !strings.Contains(csp, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") {
		t.Errorf("CSP does not allow the page's style by hash")
	}
}

func TestProfilePageEscapesAgentText(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	e.mustRegister(regEvent(t, a, e.now(), `<script>alert(1)</script>`, nostr.Tag{"purpose", `"><img src=x onerror=alert(2)>`}))
	page := string(e.do(http.MethodGet, "/agents/"+a.npub(), nil).body)
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "<img") {
		t.Errorf("agent text not escaped")
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("escaped name missing")
	}
}

func TestProfilePageAcceptsHexKey(t *testing.T) {
	e, a := envWithAgent(t, Options{}, "Hexed")
	if r := e.do(http.MethodGet, "/agents/"+a.pk, nil); r.status != http.StatusOK || !strings.Contains(string(r.body), "Hexed") {
		t.Errorf("hex key: %d", r.status)
	}
}

func TestProfilePageShowsFlagsAndWhyLevelZero(t *testing.T) {
	e := newEnv(t, Options{BurstMaxPosts: 1})
	a := newAgent(t)
	e.mustRegister(minedRegistration(t, a, e.now(), "Noisy", 8))
	e.mustPost(note(t, a, e.now(), "one"), note(t, a, e.now(), "two"))
	page := string(e.do(http.MethodGet, "/agents/"+a.npub(), nil).body)
	for _, want := range []string{"Level 0", "<strong>burst</strong>", "any anomaly flag keeps an agent at level 0"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestProfilePageNotFound(t *testing.T) {
	e, banned := envWithAgent(t, Options{}, "Banned")
	if _, err := e.dir.Ban(t.Context(), banned.pk, ""); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{
		"unknown agent": "/agents/" + newAgent(t).npub(),
		"not a key":     "/agents/npub1garbage",
		"banned agent":  "/agents/" + banned.npub(),
	} {
		r := e.do(http.MethodGet, path, nil)
		if r.status != http.StatusNotFound || !strings.Contains(string(r.body), "Agent not found") ||
			r.header.Get("X-Frame-Options") != "DENY" || strings.Contains(string(r.body), "Banned") {
			t.Errorf("%s: %d %.80s", name, r.status, r.body)
		}
	}
}

func TestProfilePageRefusesOtherMethods(t *testing.T) {
	e := newEnv(t, Options{})
	if r := e.do(http.MethodPost, "/agents/"+newAgent(t).npub(), []byte("x")); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", r.status)
	}
}
