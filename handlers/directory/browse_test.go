package directory

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// browse fetches the browse page with query q and returns its HTML.
func (e *env) browse(q string) string {
	e.t.Helper()
	if err := e.dir.Rebuild(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
	r := e.do(http.MethodGet, BrowsePath+q, nil)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		e.t.Fatalf("GET %s%s: %d %s", BrowsePath, q, r.status, r.header.Get("Content-Type"))
	}
	return string(r.body)
}

var profileLinkRE = regexp.MustCompile(`<a href="/agents/(npub1[0-9a-z]+)">([^<]*)</a>`)

// listed returns the agents a browse page shows, by name, in order.
func listed(html string) []string {
	var names []string
	for _, m := range profileLinkRE.FindAllStringSubmatch(html, -1) {
		names = append(names, m[2])
	}
	return names
}

func TestBrowsePageListsFiltersAndSearches(t *testing.T) {
	e := newEnv(t, Options{})
	baker, courier, idle := newAgent(t), newAgent(t), newAgent(t)
	e.mustRegister(minedRegistration(t, baker, e.now(), "Baker Bot", 8, nostr.Tag{"purpose", "Bakes rye bread"},
		nostr.Tag{"capability", "bake"}, nostr.Tag{"capability", "slice"}, nostr.Tag{"operator", "Jane"}))
	e.clock.Advance(time.Second)
	e.mustRegister(regEvent(t, courier, e.now(), "Courier", nostr.Tag{"capability", "deliver"}, nostr.Tag{"operator", "Bakery Ltd"}))
	e.clock.Advance(time.Second)
	e.mustRegister(regEvent(t, idle, e.now(), "Idle <b>one</b>"))
	e.clock.Advance(time.Hour)
	e.mustPost(note(t, courier, e.now(), "on my way"))

	page := e.browse("")
	if got := listed(page); strings.Join(got, ",") != "Baker Bot,Courier,Idle &lt;b&gt;one&lt;/b&gt;" {
		t.Fatalf("listed %v", got)
	}
	for _, want := range []string{"Bakes rye bread", "bake, slice", "Jane", "1 · admitted", "0 · new / sandbox", "1 active day",
		`href="/agents/` + baker.npub() + `"`, `href="` + DefaultPath + `"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for q, want := range map[string]string{
		"?level=1":                     "Baker Bot",
		"?level=0":                     "Courier,Idle &lt;b&gt;one&lt;/b&gt;",
		"?capability=deliver":          "Courier",
		"?q=RYE":                       "Baker Bot",
		"?q=bakery":                    "Courier",
		"?q=" + courier.npub()[:12]:    "Courier",
		"?q=bake&level=0":              "Courier",
		"?q=nothing+like+it":           "",
		"?level=9&capability=&page=-3": "Baker Bot,Courier,Idle &lt;b&gt;one&lt;/b&gt;",
	} {
		if got := strings.Join(listed(e.browse(q)), ","); got != want {
			t.Errorf("%s: listed %q, want %q", q, got, want)
		}
	}
	if p := e.browse("?q=" + url.QueryEscape(strings.Repeat("x", 5000))); !strings.Contains(p, "No agent to show") {
		t.Error("a long search did not come back empty")
	}
	// A GET form back to the page: the policy lets it submit, nothing posts.
	r := e.do(http.MethodGet, BrowsePath, nil)
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q", csp)
	}
	if r := e.do(http.MethodPost, BrowsePath, nil); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", r.status)
	}
}

func TestBrowsePageIsPaged(t *testing.T) {
	e := newEnv(t, Options{})
	for i := range 120 {
		if _, _, err := e.dir.Register(t.Context(), mustJSON(t, regEvent(t, newAgent(t), e.now().Add(time.Duration(i)*time.Second), fmt.Sprintf("agent %03d", i)))); err != nil {
			t.Fatal(err)
		}
	}
	first := e.browse("")
	if got := listed(first); len(got) != 50 || got[0] != "agent 000" || !strings.Contains(first, "Page 1 of 3") ||
		!strings.Contains(first, `href="/directory?page=2" rel="next"`) || strings.Contains(first, `rel="prev"`) {
		t.Fatalf("page 1: %d agents %v", len(got), got[:min(3, len(got))])
	}
	last := e.browse("?page=3")
	if got := listed(last); len(got) != 20 || got[0] != "agent 100" || !strings.Contains(last, `href="/directory?page=2" rel="prev"`) || strings.Contains(last, `rel="next"`) {
		t.Fatalf("page 3: %v", got)
	}
	if got := listed(e.browse("?page=99")); len(got) != 20 {
		t.Errorf("a page past the end shows the last: %d agents", len(got))
	}
	// "agent 0" matches agents 000 to 099: two pages, the links keep the search.
	if p := e.browse("?q=agent+0&level=0"); !strings.Contains(p, `href="/directory?level=0&amp;page=2&amp;q=agent&#43;0" rel="next"`) {
		t.Errorf("page 1 of a search does not keep the search in its link: %s", p)
	}
}

// The profile page says plainly that no credit score is given, and links
// the browse page.
func TestProfileWordsTheCreditScorePlainly(t *testing.T) {
	e, a := envWithAgent(t, Options{}, "plain")
	r := e.do(http.MethodGet, ProfilePrefix+a.npub(), nil)
	body := string(r.body)
	if !strings.Contains(body, "No credit score is given yet") || strings.Contains(body, "reserved, coming later") ||
		!strings.Contains(body, `href="/directory"`) {
		t.Errorf("profile: %s", body)
	}
}

// A search of the browse page reads every agent of the document: their
// text is lowered once per document, not on every request, so a search
// (anyone may ask, with a new query each time) costs the same allocations
// at any size of the directory. The allocations are counted, not timed.
func TestBrowseSearchAllocatesTheSameAtAnyDirectorySize(t *testing.T) {
	e := newEnv(t, Options{})
	register := func(from, to int) {
		for i := from; i < to; i++ {
			evt := regEvent(t, newAgent(t), e.now().Add(time.Duration(i)*time.Second), fmt.Sprintf("Agent %03d", i),
				nostr.Tag{"purpose", "Reads The News"}, nostr.Tag{"capability", "Summaries"})
			if _, _, err := e.dir.Register(t.Context(), mustJSON(t, evt)); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.dir.Rebuild(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	allocs := func() float64 {
		req := httptest.NewRequest(http.MethodGet, BrowsePath+"?q=nothing+like+it", nil)
		rec := httptest.NewRecorder()
		e.dir.serveBrowse(rec, req) // decodes the document once
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Agent directory") {
			t.Fatalf("browse: %d", rec.Code)
		}
		return testing.AllocsPerRun(20, func() { e.dir.serveBrowse(httptest.NewRecorder(), req) })
	}
	register(0, 100)
	small := allocs()
	register(100, 300)
	if large := allocs(); large-small > 20 {
		t.Fatalf("a search allocates %.0f times at 100 agents and %.0f at 300", small, large)
	}
}
