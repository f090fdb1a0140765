//go:build browser

package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

const reader = "dora" // the library suite's member

// article is a page saved through addArticleFromHtmlSnapshot: several
// paragraphs, so the extractor keeps them as the article, under headings
// of two levels.
func article(title string) string {
	return fmt.Sprintf(`<html><head><title>%s</title><meta name="author" content="Ada Baker"></head><body><article><h1>%s</h1>`+
		`<p>The first paragraph of %s talks about bread, flour and water at some length, so that the extractor keeps it as the text of the article.</p>`+
		`<h2>The dough</h2>`+
		`<p>Second paragraph: <b>kneading</b> the dough takes ten minutes by hand, less with a machine, and it needs patience and a warm room.</p>`+
		`<h3>Resting</h3>`+
		`<p>Third paragraph: the loaf rests overnight in a cool place, then bakes for forty minutes in a very hot oven with steam.</p>`+
		`<p>Fourth paragraph: let it cool before cutting, or the crumb turns gummy; a good loaf keeps for days in a linen bag.</p>`+
		`<script>window.pwned = 1</script><img src="x" onerror="window.pwned = 2"></article></body></html>`, title, title, title)
}

// gql runs a GraphQL operation with the member's API token and decodes
// its data into out; errors fail the test.
func gql(t *testing.T, token, query string, out any) {
	t.Helper()
	codes, data := graphql(t, token, query)
	if len(codes) > 0 {
		t.Fatalf("graphql %s: %v", query, codes)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(data), out); err != nil {
			t.Fatalf("graphql %s: %v in %s", query, err, data)
		}
	}
}

type apiItem struct {
	SavedItem struct {
		Status string  `json:"status"`
		ReadAt *string `json:"readAt"`
		Labels []struct {
			Name string `json:"name"`
		} `json:"labels"`
		Highlights []struct {
			ID       string `json:"id"`
			Note     string `json:"note"`
			Segments []struct {
				XPath       string `json:"xpath"`
				StartOffset int    `json:"startOffset"`
				EndOffset   int    `json:"endOffset"`
				Text        string `json:"text"`
				BeforeText  string `json:"beforeText"`
				AfterText   string `json:"afterText"`
			} `json:"segments"`
		} `json:"highlights"`
	} `json:"savedItem"`
}

// hostileArticle is content a page or newsletter may carry to run script,
// leave the page or tell a third party the member reads it.
const hostileArticle = `<html><head><meta http-equiv="refresh" content="0;url=https://evil.example/"><title>Hostile page</title>
<link rel="stylesheet" href="https://evil.example/x.css"><style>body{background:url(https://evil.example/bg.png)}</style></head>
<body onload="window.pwned=1"><article><h1>Hostile page</h1>
<p>The first paragraph has enough words in it that the extractor keeps it as the text of the article, as a real one would.</p>
<p><a href="javascript:window.pwned=3">a javascript link</a> and <a href="data:text/html,&lt;script&gt;parent.pwned=4&lt;/script&gt;">a data link</a> and <a href="https://evil.example/ok">a plain link</a>.</p>
<svg width="10" height="10"><script>window.pwned=5</script><image href="https://evil.example/svg.png"/></svg>
<iframe src="https://evil.example/frame"></iframe><object data="https://evil.example/o.swf"></object><embed src="https://evil.example/e.swf">
<form action="https://evil.example/post"><input name="a"><button>Send</button></form>
<p style="background:url(https://evil.example/style.png)" onclick="window.pwned=6">A styled paragraph with more words, long enough to be kept in the article.</p>
<img src="https://evil.example/pixel.gif" width="1" height="1"><img src="https://evil.example/photo.jpg" alt="A photo" onerror="window.pwned=7">
<picture><source srcset="https://evil.example/p.webp"><img src="https://evil.example/p.jpg" alt="A picture"></picture>
<video src="https://evil.example/v.mp4" poster="https://evil.example/poster.jpg"></video><audio src="https://evil.example/a.mp3"></audio>
<script>window.pwned=8</script><noscript><img src="https://evil.example/noscript.gif"></noscript>
</article></body></html>`

// imageOrigin serves, on a loopback port of its own (another origin than
// the site's), an article with a 40×30 PNG, an SVG and a tracking pixel;
// asked reports whether a path was requested of it.
func imageOrigin(t *testing.T) (origin string, asked func(path string) bool) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for x := 0; x < 40; x++ {
		img.Set(x, x%30, color.RGBA{180, 60, 20, 255})
	}
	var pic bytes.Buffer
	if err := png.Encode(&pic, img); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = true
		mu.Unlock()
		switch r.URL.Path {
		case "/bread":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<html><head><title>Bread with pictures</title></head><body><article><h1>Bread with pictures</h1>`+
				strings.Repeat(`<p>The dough rests overnight in a cool place, then bakes for forty minutes in a very hot oven with steam.</p>`, 6)+
				`<p><img src="/loaf.png" alt="A loaf on a board" width="40" height="30"></p><p><img src="/mark.svg" alt="A mark"></p>`+
				`<p>The crumb should be open and glossy: <img src="/crumb.jpg" alt="The crumb, close up" width="600" height="400"> as here.</p>`+
				`<p><img src="/pixel.gif" width="1" height="1"></p>`+
				strings.Repeat(`<p>Let it cool before cutting, or the crumb turns gummy; a good loaf keeps for days in a linen bag.</p>`, 6)+
				`</article></body></html>`)
		case "/loaf.png":
			w.Header().Set("Content-Type", "image/png")
			w.Write(pic.Bytes())
		case "/mark.svg":
			w.Header().Set("Content-Type", "image/svg+xml")
			fmt.Fprint(w, `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func(path string) bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[path]
	}
}

func itemOf(t *testing.T, token, id string) apiItem {
	t.Helper()
	var out apiItem
	gql(t, token, fmt.Sprintf(`query { savedItem(query: {id: %q}) { status readAt labels { name } highlights { id note segments { xpath startOffset endOffset text beforeText afterText } } } }`, id), &out)
	return out
}

// recordRequests starts recording the URLs the tab requests, and every
// Content-Security-Policy violation its pages report (in
// window.__cspViolations, from a script DevTools adds to each new
// document); it returns the requests so far.
func (s *suite) recordRequests() func() []string {
	s.t.Helper()
	var mu sync.Mutex
	var urls []string
	chromedp.ListenTarget(s.ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			urls = append(urls, e.Request.URL)
			mu.Unlock()
		}
	})
	s.run("watch the policy", network.Enable(), chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(`window.__cspViolations = []; document.addEventListener("securitypolicyviolation", e => window.__cspViolations.push(e.violatedDirective + " " + e.blockedURI));`).Do(ctx)
		return err
	}))
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), urls...)
	}
}

// lighthouse runs Lighthouse (npm, this folder's package-lock.json) on
// path with the member's session cookie, in Debian's Chromium: it
// asserts accessibility and best practices at 100 and logs the
// performance score (recorded in bench/README.md, not asserted).
func (s *suite) lighthouse(path string) {
	s.t.Helper()
	var cookie string
	s.run("session cookie", chromedp.ActionFunc(func(ctx context.Context) error {
		cs, err := network.GetCookies().WithURLs([]string{site}).Do(ctx)
		for _, c := range cs {
			if c.Name == "hearth_session" {
				cookie = c.Name + "=" + c.Value
			}
		}
		return err
	}))
	headers, _ := json.Marshal(map[string]string{"Cookie": cookie})
	cmd := exec.Command("node", "node_modules/lighthouse/cli/index.js", site+path,
		"--only-categories=accessibility,best-practices,performance", "--output=json", "--quiet",
		"--chrome-flags=--headless=new --no-sandbox", "--extra-headers="+string(headers))
	cmd.Env = append(os.Environ(), "CHROME_PATH="+chromium(s.t))
	out, err := cmd.Output()
	if err != nil {
		s.t.Fatalf("lighthouse %s: %v", path, err)
	}
	var r struct {
		Categories map[string]struct {
			Score float64 `json:"score"`
		} `json:"categories"`
		Audits map[string]struct {
			Score *float64 `json:"score"`
			Title string   `json:"title"`
		} `json:"audits"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		s.t.Fatalf("lighthouse %s: %v", path, err)
	}
	for _, c := range []string{"accessibility", "best-practices"} {
		if r.Categories[c].Score != 1 {
			for id, a := range r.Audits {
				if a.Score != nil && *a.Score < 1 {
					s.t.Logf("lighthouse %s: %s: %s (%v)", path, id, a.Title, *a.Score)
				}
			}
			s.t.Errorf("lighthouse %s: %s %v, want 100", path, c, r.Categories[c].Score*100)
		}
	}
	s.t.Logf("lighthouse %s: performance %v (recorded, not asserted)", path, r.Categories["performance"].Score*100)
}

// nothingRunsOrLeaves opens a reader page of hostile content, clicks its
// links that are not plain web links, and checks that no script of it
// ran, that the tab asked no other origin for anything, and that the
// page's policy reported no violation (nothing it needs blocked, nothing
// left for it to block).
func (s *suite) nothingRunsOrLeaves(path string, requests func() []string) {
	s.t.Helper()
	s.open(path)
	s.run("links of the content", chromedp.Evaluate(`document.querySelectorAll("#content a").forEach(a => { if (!a.href.startsWith("http")) a.click(); }); true`, nil))
	time.Sleep(500 * time.Millisecond)
	var pwned bool
	s.run("saved scripts", chromedp.Evaluate(`window.pwned !== undefined`, &pwned))
	if pwned {
		s.t.Fatalf("%s: a script of the saved content ran", path)
	}
	var violations []string
	s.run("policy reports", chromedp.Evaluate(`window.__cspViolations || []`, &violations))
	if len(violations) > 0 {
		s.t.Errorf("%s: the policy blocked %v", path, violations)
	}
	for _, u := range requests() {
		if !strings.HasPrefix(u, site+"/") && !strings.HasPrefix(u, "data:") {
			s.t.Errorf("%s: the tab asked another origin for %s", path, u)
		}
	}
}

// tap touches the element sel names with a finger (touch emulated: the
// emulated phone takes no mouse clicks), scrolled into view first.
func (s *suite) tap(sel string) {
	s.t.Helper()
	var at struct{ X, Y float64 }
	s.run("find "+sel, chromedp.Evaluate(fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.scrollIntoView({block: "center"}); `+
		`const b = e.getBoundingClientRect(); return {X: b.left + b.width / 2, Y: b.top + b.height / 2}; })()`, sel), &at))
	s.run("tap "+sel, input.DispatchTouchEvent(input.TouchStart, []*input.TouchPoint{{X: at.X, Y: at.Y}}),
		input.DispatchTouchEvent(input.TouchEnd, []*input.TouchPoint{}))
}

// waitFor polls a JavaScript condition on the page.
func (s *suite) waitFor(what, cond string) {
	s.t.Helper()
	s.run(what, chromedp.Poll(cond, nil, chromedp.WithPollingTimeout(60*time.Second)))
}

// waitAcross polls cond across a navigation (a form the key submitted):
// evaluating while the old document goes away fails, and is tried again.
func (s *suite) waitAcross(what, cond string) {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var done bool
		err := chromedp.Run(s.ctx, chromedp.Evaluate(`document.readyState === "complete" && !!(`+cond+`)`, &done))
		if err == nil && done {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not within 60 s (%v)", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *suite) key(k string) {
	s.t.Helper()
	s.run("press "+k, chromedp.KeyEvent(k))
}

func TestLibraryAndReaderInChromium(t *testing.T) {
	s := startSite(t, reader)

	// Signing in lands in the library; an empty inbox says what to do.
	s.signIn(reader, password)
	if loc := s.location(); loc != site+"/library" {
		t.Fatalf("after signing in the browser is at %s, want the library", loc)
	}
	if got := s.text(".empty"); !strings.Contains(got, "Your inbox is empty") {
		t.Fatalf("empty inbox says %q", got)
	}
	s.check("library-empty")
	s.focusIsVisible("library-empty", true)

	// An API token for what apps do beside the browser.
	s.open("/settings/api_tokens")
	s.run("name a token", chromedp.SendKeys("#name", "library suite", chromedp.ByID))
	s.submit(`form input[name=action][value=create] ~ p button[type=submit]`)
	token := s.text("#secret")

	// 55 articles (more than a page), one label.
	ids := make([]string, 55)
	for i := range ids {
		var out struct {
			ID string `json:"addArticleFromHtmlSnapshot"`
		}
		gql(t, token, fmt.Sprintf(`mutation { addArticleFromHtmlSnapshot(data: {url: %q, html: %q}) }`,
			fmt.Sprintf("https://bakery.example/loaf-%02d", i), article(fmt.Sprintf("Loaf number %02d", i))), &out)
		ids[i] = out.ID
	}
	var lab struct {
		Label struct{ ID string } `json:"createLabel"`
	}
	gql(t, token, `mutation { createLabel(data: {name: "Weekend", color: "#336699"}) { id } }`, &lab)
	gql(t, token, fmt.Sprintf(`mutation { setSavedItemLabels(data: {id: %q, labelIds: [%q]}) { success } }`, ids[3], lab.Label.ID), nil)

	// The inbox: 50 items, newest first, and a next page by cursor.
	s.open("/library")
	if n := s.count("li.item"); n != 50 {
		t.Fatalf("the first page lists %d items", n)
	}
	if got := s.text("li.item:first-child a.title"); got != "Loaf number 54" {
		t.Fatalf("first item %q", got)
	}
	s.check("library")
	// The library is an installable app, as Chromium judges its manifest
	// (name, icon, start URL, display).
	var notInstallable []*page.InstallabilityError
	s.run("installability", chromedp.ActionFunc(func(ctx context.Context) (err error) {
		notInstallable, err = page.GetInstallabilityErrors().Do(ctx)
		return err
	}))
	for _, e := range notInstallable {
		args := []string{}
		for _, a := range e.ErrorArguments {
			args = append(args, a.Name+"="+a.Value)
		}
		t.Errorf("the library is not installable: %s %v", e.ErrorID, args)
	}
	s.lighthouse("/library")
	s.submit("#next-page")
	if n := s.count("li.item"); n != 5 {
		t.Fatalf("the second page lists %d items", n)
	}
	s.check("library-page-2")

	// Search with the API's syntax, typed in the search box.
	s.open("/library")
	s.run("search", chromedp.SetValue("#q", `in:all label:"Weekend"`, chromedp.ByID))
	s.submit(`form.search button[type=submit]`)
	if n := s.count("li.item"); n != 1 || s.text("li.item a.title") != "Loaf number 03" {
		t.Fatalf("label search lists %d items", n)
	}
	s.check("library-search")
	s.run("search", chromedp.SetValue("#q", `saved:someday`, chromedp.ByID))
	s.submit(`form.search button[type=submit]`)
	if got := s.text(".error"); !strings.Contains(got, "is not a date") {
		t.Fatalf("a bad query says %q", got)
	}
	s.check("library-search-error")
	s.open("/library/help")
	s.check("library-help")

	// The keyboard: ? lists the shortcuts; j then e archives in place.
	s.open("/library")
	s.key("?")
	s.waitFor("the shortcuts open", `document.querySelector("#shortcuts").open`)
	s.check("library-shortcuts")
	s.key(kb.Escape)
	s.key("j")
	s.key("e")
	s.waitFor("archived in place", `document.querySelector("#notice") && document.querySelector("#notice").textContent.includes("Archived.")`)
	if n := s.count("li.item"); n != 49 {
		t.Fatalf("after archiving by keyboard the page lists %d items", n)
	}
	if st := itemOf(t, token, ids[54]).SavedItem.Status; st != "ARCHIVED" {
		t.Fatalf("archived by keyboard: the API says %s", st)
	}
	// The next item is now the current one: # moves it to the trash, and
	// Undo puts it back.
	s.key("#")
	s.waitFor("trashed in place", `!!document.querySelector("#undo")`)
	if st := itemOf(t, token, ids[53]).SavedItem.Status; st != "DELETED" {
		t.Fatalf("trashed by keyboard: the API says %s", st)
	}
	s.check("library-undo")
	s.submit("#undo")
	if st := itemOf(t, token, ids[53]).SavedItem.Status; st != "ACTIVE" {
		t.Fatalf("after undo the API says %s", st)
	}
	// / focuses the search box; j j k then o opens the first item; in the
	// reader h highlights the selection and u goes back to the list.
	s.key("/")
	s.waitFor("the search box focused", `document.activeElement && document.activeElement.id === "q"`)
	s.run("leave the search box", chromedp.Evaluate(`document.activeElement.blur()`, nil))
	var firstTitle string
	s.run("the first title", chromedp.Evaluate(`document.querySelector("li.item a.title").textContent`, &firstTitle))
	s.key("j")
	s.key("j")
	s.key("k")
	s.key("o")
	s.waitAcross("the item opened", `location.pathname.startsWith("/library/item/") && !!document.querySelector("#title")`)
	if got := s.text("#title"); got != firstTitle {
		t.Fatalf("j j k o opened %q, want %q", got, firstTitle)
	}
	var opened string
	s.run("its id", chromedp.Evaluate(`document.querySelector("#reader").dataset.id`, &opened))
	s.run("select a word", chromedp.Evaluate(`(() => {
		const p = [...document.querySelectorAll("#content p")].find(p => p.textContent.startsWith("Third"));
		const r = document.createRange();
		r.setStart(p.firstChild, 0); r.setEnd(p.firstChild, 5);
		getSelection().removeAllRanges(); getSelection().addRange(r);
	})()`, nil))
	s.key("h")
	s.waitFor("highlighted by keyboard", `document.querySelectorAll("#content mark.highlight").length === 1`)
	if hs := itemOf(t, token, opened).SavedItem.Highlights; len(hs) != 1 || hs[0].Segments[0].Text != "Third" {
		t.Fatalf("h: the API sees %+v", hs)
	}
	s.key("u")
	s.waitAcross("back to the list", `location.pathname === "/library" && !!document.querySelector("li.item")`)

	// x selects the current item and m marks the selection read, in
	// place; # moves it to the trash and z takes it back (the notice's
	// Undo); l selects the current item and goes to the label menu; a
	// opens the add form.
	s.key("j")
	s.key("j")
	s.key("x")
	s.waitFor("selected by x", `document.querySelectorAll("li.item input[name=id]:checked").length === 1 && document.querySelector("li.item.current input[name=id]").checked`)
	var picked0 string
	s.run("the selected id", chromedp.Evaluate(`document.querySelector("li.item input[name=id]:checked").value`, &picked0))
	s.key("m")
	s.waitFor("marked read in place", `document.querySelector("#notice") && document.querySelector("#notice").textContent.includes("Marked as read.") && document.querySelector("li.item.current").classList.contains("read")`)
	if it := itemOf(t, token, picked0).SavedItem; it.ReadAt == nil {
		t.Fatal("m: the API says the item is unread")
	}
	s.key("#")
	s.waitFor("trashed in place", `!!document.querySelector("#undo")`)
	if st := itemOf(t, token, picked0).SavedItem.Status; st != "DELETED" {
		t.Fatalf("x then #: the API says %s", st)
	}
	s.key("z")
	s.waitAcross("undone by z", `!document.querySelector("#undo") && !!document.querySelector("li.item")`)
	if st := itemOf(t, token, picked0).SavedItem.Status; st != "ACTIVE" {
		t.Fatalf("after z the API says %s", st)
	}
	s.key("j")
	s.key("l")
	s.waitFor("the label menu focused", `document.activeElement && document.activeElement.id === "bulk-label" && document.querySelector("li.item.current input[name=id]").checked`)
	s.run("leave the label menu", chromedp.Evaluate(`document.activeElement.blur()`, nil))
	s.key("a")
	s.waitAcross("the add form", `location.pathname === "/library/add" && !!document.querySelector("form")`)
	s.check("add")

	// The reader: the content, and nothing in it runs.
	s.open("/library/item/" + ids[10] + "?q=in%3Ainbox")
	if got := s.text("#title"); got != "Loaf number 10" {
		t.Fatalf("reader title %q", got)
	}
	var pwned bool
	s.run("saved scripts", chromedp.Evaluate(`window.pwned !== undefined`, &pwned))
	if pwned {
		t.Fatal("a script in saved content ran")
	}
	s.check("reader")
	s.lighthouse("/library/item/" + ids[10])
	s.key("?")
	s.waitFor("the reader's shortcuts open", `document.querySelector("#shortcuts").open`)
	s.check("reader-shortcuts")
	s.key(kb.Escape)
	s.waitFor("the shortcuts closed", `!document.querySelector("#shortcuts").open`)

	// Highlight a selection with a note, as a member does with the mouse.
	var picked string
	s.run("select a word", chromedp.Evaluate(`(() => {
		const p = [...document.querySelectorAll("#content p")].find(p => p.textContent.startsWith("Second"));
		const t = p.firstChild, r = document.createRange();
		r.setStart(t, 0); r.setEnd(t, 6);
		getSelection().removeAllRanges(); getSelection().addRange(r);
		document.querySelector("#content").dispatchEvent(new MouseEvent("mouseup", {bubbles: true}));
		return t.data.slice(0, 6);
	})()`, &picked))
	s.waitFor("the highlight button", `!!document.querySelector("#hl-with-note")`)
	s.run("add a note", chromedp.Click("#hl-with-note", chromedp.ByID))
	s.run("type the note", chromedp.SendKeys("#hl-note", "knead longer", chromedp.ByID))
	s.axeClean("reader-highlight-popup")
	s.run("make it", chromedp.Click("#hl-make", chromedp.ByID))
	s.waitFor("the highlight in place", `document.querySelectorAll("#content mark.highlight").length === 1 && document.querySelectorAll("#hl-list li").length === 1`)
	it := itemOf(t, token, ids[10]).SavedItem
	if len(it.Highlights) != 1 || it.Highlights[0].Note != "knead longer" || len(it.Highlights[0].Segments) != 1 {
		t.Fatalf("the API sees %+v", it.Highlights)
	}
	seg := it.Highlights[0].Segments[0]
	// Inboxt's shape (apps/web/src/utils/highlightsDOM.ts @ 45f4314): the
	// element's absolute path then ::0, offsets in its text, the rest of
	// the text node around.
	if seg.Text != picked || seg.StartOffset != 0 || seg.EndOffset != 6 || seg.BeforeText != "" ||
		!strings.HasPrefix(seg.AfterText, " paragraph:") || !strings.HasPrefix(seg.XPath, "/html[1]/body[1]/") || !strings.HasSuffix(seg.XPath, "::0") {
		t.Fatalf("segment %+v", seg)
	}
	var resolves bool
	s.run("the xpath names the paragraph", chromedp.Evaluate(fmt.Sprintf(`document.evaluate(%q, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue.textContent.slice(0, 6) === "Second"`, strings.TrimSuffix(seg.XPath, "::0")), &resolves))
	if !resolves {
		t.Fatalf("xpath %s does not name the paragraph", seg.XPath)
	}
	s.check("reader-highlight")
	s.focusIsVisible("reader", true)
	// The Highlights view lists it, with its note, linking to it in place.
	s.open("/library?q=type%3Ahighlight")
	if got := s.text("ul.hls li"); !strings.Contains(got, "Second") || !strings.Contains(got, "knead longer") {
		t.Fatalf("the Highlights view shows %q", got)
	}
	s.check("library-highlights")

	// A highlight made through the API, with a path from another page
	// layout (Inboxt's web app), shows in place.
	var made struct {
		H struct{ ID string } `json:"createHighlight"`
	}
	gql(t, token, fmt.Sprintf(`mutation { createHighlight(data: {savedItemId: %q, segments: [{xpath: "/html[1]/body[1]/div[1]/div[2]/main[1]/div[3]/div[1]/p[3]::0", startOffset: 0, endOffset: 5, text: "Third", beforeText: "", afterText: " paragraph: the loaf"}]}) { id } }`, ids[10]), &made)
	s.open("/library/item/" + ids[10] + "?q=in%3Ainbox")
	s.waitFor("the API's highlight in place", fmt.Sprintf(`(() => { const m = document.querySelector('mark.highlight[data-highlight-id=%q]'); return !!m && m.textContent === "Third"; })()`, made.H.ID))

	// Highlight with touch, at phone width with touch emulated. On a phone
	// a long press selects a word and the finger lifts (touchend) on the
	// selection; headless Chromium has no long-press selection, so the
	// selection is made by script, then a finger is pressed on it and
	// lifted through DevTools' touch input, and the script's touchend
	// handler must offer to highlight it.
	s.run("a phone", chromedp.EmulateViewport(360, 800, chromedp.EmulateMobile, chromedp.EmulateTouch))
	s.open("/library/item/" + ids[11] + "?q=in%3Ainbox")
	var at struct{ X, Y float64 }
	s.run("select a word", chromedp.Evaluate(`(() => {
		const p = [...document.querySelectorAll("#content p")].find(p => p.textContent.startsWith("Fourth"));
		p.scrollIntoView({block: "center"});
		const r = document.createRange();
		r.setStart(p.firstChild, 0); r.setEnd(p.firstChild, 6);
		getSelection().removeAllRanges(); getSelection().addRange(r);
		const b = r.getBoundingClientRect();
		return {X: b.left + b.width / 2, Y: b.top + b.height / 2};
	})()`, &at))
	s.run("press and lift a finger", input.DispatchTouchEvent(input.TouchStart, []*input.TouchPoint{{X: at.X, Y: at.Y}}),
		chromedp.Sleep(700*time.Millisecond), input.DispatchTouchEvent(input.TouchEnd, []*input.TouchPoint{}))
	s.waitFor("the highlight button after touchend", `!!document.querySelector("#hl-make")`)
	var button struct{ X, Y float64 }
	s.run("find the button", chromedp.Evaluate(`(() => { const b = document.querySelector("#hl-make").getBoundingClientRect(); return {X: b.left + b.width / 2, Y: b.top + b.height / 2}; })()`, &button))
	s.run("tap Highlight", input.DispatchTouchEvent(input.TouchStart, []*input.TouchPoint{{X: button.X, Y: button.Y}}),
		input.DispatchTouchEvent(input.TouchEnd, []*input.TouchPoint{}))
	s.waitFor("the touch highlight in place", `document.querySelectorAll("#content mark.highlight").length === 1`)
	if hs := itemOf(t, token, ids[11]).SavedItem.Highlights; len(hs) != 1 || len(hs[0].Segments) != 1 || strings.TrimSpace(hs[0].Segments[0].Text) != "Fourth" {
		t.Fatalf("highlight made by touch: the API sees %+v", hs)
	}
	s.axeClean("reader-touch-highlight-360")
	// Beside the article its note is written and the highlight deleted,
	// in place (the script's requests; without it, the same forms).
	s.run("write a note", chromedp.SetValue("#hl-list li .note-form textarea", "crisp crust", chromedp.ByQuery))
	s.tap("#hl-list li .note-form button[type=submit]")
	s.waitFor("the note saved", `document.querySelector("#notice") && document.querySelector("#notice").textContent.includes("Note saved.")`)
	if hs := itemOf(t, token, ids[11]).SavedItem.Highlights; len(hs) != 1 || hs[0].Note != "crisp crust" {
		t.Fatalf("the note written in the reader: the API sees %+v", hs)
	}
	s.tap("#hl-list li .delete-form button[type=submit]")
	s.waitFor("deleted in place", `!document.querySelector("#content mark.highlight") && !document.querySelector("#hl-list li") && document.querySelector("#notice").textContent.includes("Highlight deleted.")`)
	if hs := itemOf(t, token, ids[11]).SavedItem.Highlights; len(hs) != 0 {
		t.Fatalf("after deleting in the reader the API sees %+v", hs)
	}
	s.run("back to the desktop", chromedp.EmulateViewport(1280, 800))
	s.open("/library/item/" + ids[10] + "?q=in%3Ainbox")

	// Labels, with the form beside the article.
	s.run("tick the label", chromedp.Click("#label-"+lab.Label.ID, chromedp.ByID))
	s.submit(`#labels-form button[type=submit]`)
	if ls := itemOf(t, token, ids[10]).SavedItem.Labels; len(ls) != 1 || ls[0].Name != "Weekend" {
		t.Fatalf("labels through the reader: %+v", ls)
	}
	// The article's headings stand above its text at every text size: a
	// section heading larger than a subsection's, both larger than the text.
	for _, size := range []string{"0", "5", "0"} {
		s.run("text size "+size, chromedp.SetValue("#pref-size", size, chromedp.ByID))
		s.submit(`#prefs button[type=submit]`)
		var px struct{ H2, H3, P float64 }
		s.run("heading sizes", chromedp.Evaluate(`(() => { const px = sel => parseFloat(getComputedStyle(document.querySelector(sel)).fontSize); return {H2: px("#content h2"), H3: px("#content h3"), P: px("#content p")}; })()`, &px))
		if !(px.H2 > px.H3 && px.H3 > px.P) {
			t.Errorf("text size %s: the article's h2 is %gpx, h3 %gpx, its text %gpx", size, px.H2, px.H3, px.P)
		}
	}
	// Dark text settings, kept for the member.
	s.run("choose dark", chromedp.SetValue("#pref-theme", "dark", chromedp.ByID))
	s.submit(`#prefs button[type=submit]`)
	s.check("reader-dark")
	// The keyboard in the reader: e archives, m marks read, l goes to the
	// labels; j and k go to the next and previous article of the list.
	s.key("e")
	s.waitAcross("archived", `document.querySelector("#notice") && document.querySelector("#notice").textContent.includes("Archived.")`)
	if st := itemOf(t, token, ids[10]).SavedItem.Status; st != "ARCHIVED" {
		t.Fatalf("archived from the reader: %s", st)
	}
	// m toggles: once each way, whichever the item was.
	for range 2 {
		read := s.text("#readtoggle") == "Mark read"
		want := map[bool]string{true: "Marked as read.", false: "Marked as unread."}[read]
		s.key("m")
		s.waitAcross("m in the reader", `document.querySelector("#notice") && document.querySelector("#notice").textContent.includes(`+strconv.Quote(want)+`)`)
		if it := itemOf(t, token, ids[10]).SavedItem; (it.ReadAt != nil) != read {
			t.Fatalf("m in the reader (%s): the API's readAt is %v", want, it.ReadAt)
		}
	}
	s.key("l")
	s.waitFor("the labels focused", `document.activeElement && document.activeElement.matches("#labels-form input[type=checkbox]")`)
	s.run("leave the labels", chromedp.Evaluate(`document.activeElement.blur()`, nil))
	s.open("/library/item/" + ids[20] + "?q=in%3Ainbox")
	s.key("j")
	s.waitAcross("the next article", `document.querySelector("#reader") && document.querySelector("#reader").dataset.id === `+strconv.Quote(ids[19]))
	s.key("k")
	s.waitAcross("the previous article", `document.querySelector("#reader") && document.querySelector("#reader").dataset.id === `+strconv.Quote(ids[20]))
	if loc := s.location(); loc != site+"/library/item/"+ids[20] {
		t.Fatalf("j then k: at %s", loc)
	}

	// Reading progress: saved while reading (the API's readingProgress),
	// restored on opening.
	s.run("a small window", chromedp.EmulateViewport(360, 420))
	s.open("/library/item/" + ids[30] + "?q=in%3Ainbox")
	s.run("read half", chromedp.Evaluate(`window.scrollTo(0, (document.scrollingElement.scrollHeight - innerHeight) / 3)`, nil))
	// The page saves it after a pause in the scrolling, in the background.
	var progress float64
	deadline := time.Now().Add(60 * time.Second)
	for progress <= 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		var out struct {
			SavedItem struct {
				ReadingProgress float64 `json:"readingProgress"`
			} `json:"savedItem"`
		}
		gql(t, token, fmt.Sprintf(`query { savedItem(query: {id: %q}) { readingProgress } }`, ids[30]), &out)
		progress = out.SavedItem.ReadingProgress
	}
	if progress <= 0 || progress >= 100 {
		t.Fatalf("reading progress through the API: %v", progress)
	}
	s.open("/library/item/" + ids[30] + "?q=in%3Ainbox")
	s.waitFor("the page opens where the member stopped", `window.scrollY > 0`)
	s.run("the usual window", chromedp.EmulateViewport(1280, 800))

	// Hostile content saved as an article: nothing of it runs, nothing is
	// asked of another origin, and the page's policy has nothing to block.
	var hostile struct {
		ID string `json:"addArticleFromHtmlSnapshot"`
	}
	gql(t, token, fmt.Sprintf(`mutation { addArticleFromHtmlSnapshot(data: {url: "https://evil.example/page", html: %q}) }`, hostileArticle), &hostile)
	requests := s.recordRequests()
	s.nothingRunsOrLeaves("/library/item/"+hostile.ID, requests)
	s.check("reader-hostile")
	// The same as a newsletter, through the member's inbound URL.
	s.open("/settings/api_tokens")
	s.submit(`form input[name=action][value=rotate_inbound] ~ button`)
	inbound := s.text("#inbound-url")
	body := strings.ReplaceAll(hostileArticle, "\n", "\r\n")
	msg := "From: Evil Weekly <news@evil.example>\r\nTo: reader@example.org\r\nSubject: Hostile newsletter\r\nMessage-ID: <1@evil.example>\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" + body
	resp, err := http.Post(inbound, "message/rfc822", strings.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("newsletter: HTTP %d", resp.StatusCode)
	}
	s.open("/library?q=" + url.QueryEscape("in:inbox type:newsletter"))
	if got := s.text("li.item .meta"); !strings.HasPrefix(got, "Evil Weekly") {
		t.Fatalf("the newsletter's row says %q, want its sender", got)
	}
	s.check("library-newsletters")
	var letter string
	s.run("the newsletter's link", chromedp.Evaluate(`document.querySelector("li.item a.title").getAttribute("href")`, &letter))
	s.nothingRunsOrLeaves(letter, requests)
	if got := s.text("#title"); got != "Hostile newsletter" {
		t.Fatalf("the newsletter's page shows %q", got)
	}
	s.check("reader-newsletter")
	s.open("/library?q=in%3Aarchive")
	if n := s.count("li.item"); n == 0 {
		t.Fatal("the archive lists nothing")
	}
	s.check("library-archive")

	// An article with images on another origin, saved through the fetch
	// path: the site fetched its images when it saved it, and the reader
	// shows them from the site; the tab asks the origin for nothing, and
	// the tracking pixel was never fetched at all.
	origin, asked := imageOrigin(t)
	gql(t, token, fmt.Sprintf(`mutation { addArticleFromUrl(data: {url: %q}) { success } }`, origin+"/bread"), nil)
	var pictures string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		s.open("/library?q=" + url.QueryEscape("in:all sort:saved-desc"))
		var newest []string // its title and link
		s.run("the newest item", chromedp.Evaluate(`(() => { const a = document.querySelector("li.item a.title"); return a ? [a.textContent.trim(), a.getAttribute("href")] : ["", ""]; })()`, &newest))
		title := newest[0]
		if title == "Bread with pictures" {
			pictures = newest[1]
			s.open(pictures)
			var shown bool
			s.run("a stored image", chromedp.Evaluate(`!!document.querySelector('#content img[src^="/library/image/"]')`, &shown))
			if shown {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the article's images were not in within 60 s (newest item %q)", title)
		}
	}
	s.waitFor("the stored image is displayed", `(() => { const i = document.querySelector('#content img[src^="/library/image/"]'); return !!i && i.complete && i.naturalWidth === 40; })()`)
	// The images not stored (the SVG, never kept, and the one the
	// origin no longer has) are boxes saying what they showed, the one
	// of known size as large as the page said (within the column): not
	// the browser's broken image. check below also finds no img undrawn.
	var holders []struct {
		Label, Shown string
		W, H         float64
		Visible      bool
	}
	s.run("the placeholders", chromedp.Evaluate(`[...document.querySelectorAll("#content hearth-img")].map(e => { const r = e.getBoundingClientRect(); `+
		`return {label: e.getAttribute("aria-label") || "", shown: getComputedStyle(e, "::before").content, w: r.width, h: r.height, visible: e.checkVisibility()}; })`, &holders))
	if len(holders) != 2 {
		t.Fatalf("placeholders %+v, want the SVG's and the missing image's", holders)
	}
	for i, want := range []string{"Image not stored: A mark", "Image not stored: The crumb, close up"} {
		h := holders[i]
		if h.Label != want || h.Shown != strconv.Quote(want) || !h.Visible || h.W < 40 || h.H < 20 {
			t.Errorf("placeholder %d: %+v, want %q shown", i, h, want)
		}
	}
	if h := holders[1]; h.W > 600 || h.W < 250 || math.Abs(h.H*600-h.W*400) > 600*2 {
		t.Errorf("the missing 600×400 image's placeholder is %.0f×%.0f", h.W, h.H)
	}
	if n := s.count(`#content img:not([src^="/library/image/"])`); n != 0 {
		t.Errorf("%d images of the article are not the stored copies", n)
	}
	s.nothingRunsOrLeaves(pictures, requests)
	for _, u := range requests() {
		if strings.HasPrefix(u, origin) {
			t.Errorf("the tab asked the article's origin for %s", u)
		}
	}
	if asked("/pixel.gif") {
		t.Error("the tracking pixel was fetched")
	}
	s.check("reader-images")

	// Saving from the browser: the bookmarklet's and share target's page
	// only asks; the member's Save saves.
	s.open("/settings/saving")
	s.check("settings-saving")
	// The bookmarklet's code, run on a page as a click on it runs it
	// there, opens the confirm page with that page's address.
	var bookmarklet string
	s.run("the bookmarklet", chromedp.Evaluate(`document.querySelector("a.bookmarklet").getAttribute("href")`, &bookmarklet))
	code, ok := strings.CutPrefix(bookmarklet, "javascript:")
	if !ok {
		t.Fatalf("the bookmarklet is %q", bookmarklet)
	}
	if code, err := url.PathUnescape(code); err == nil {
		bookmarklet = code
	}
	s.open("/library/help?from=bookmarklet")
	s.run("click the bookmarklet", chromedp.Evaluate(bookmarklet, nil))
	s.waitAcross("the confirm page", `location.pathname === "/library/add" && !!document.querySelector(".notice")`)
	var shown string
	s.run("the address shown", chromedp.Evaluate(`document.querySelector("#url").value`, &shown))
	if shown != site+"/library/help?from=bookmarklet" {
		t.Fatalf("the bookmarklet's confirm page shows %q", shown)
	}
	// The share target, as the browser builds its request from the web
	// app manifest: a phone's share sheet puts the link in text.
	var target struct {
		Action string            `json:"action"`
		Method string            `json:"method"`
		Params map[string]string `json:"params"`
	}
	s.run("the manifest's share target", chromedp.Evaluate(`fetch(document.querySelector("link[rel=manifest]").href).then(r => r.json()).then(m => m.share_target)`, &target,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if target.Method != "GET" || target.Params["text"] == "" || target.Params["title"] == "" {
		t.Fatalf("share target %+v", target)
	}
	shared := url.Values{target.Params["title"]: {"A shared story"}, target.Params["text"]: {"Look at this https://news.example/shared"}}
	s.open(target.Action + "?" + shared.Encode())
	s.run("the address shown", chromedp.Evaluate(`document.querySelector("#url").value`, &shown))
	if shown != "https://news.example/shared" {
		t.Fatalf("the share target's confirm page shows %q", shown)
	}
	s.open("/library/add?url=" + "https%3A%2F%2Fnews.example%2Fstory&title=A+story")
	if v := s.text(".notice"); !strings.Contains(v, "Save this page") {
		t.Fatalf("confirm page says %q", v)
	}
	s.check("add-confirm")
	var count struct {
		Entries struct {
			Edges []struct{ Cursor string } `json:"edges"`
		} `json:"entries"`
	}
	gql(t, token, `query { entries(query: {q: "site:news.example in:all"}) { edges { cursor } } }`, &count)
	if len(count.Entries.Edges) != 0 {
		t.Fatal("the confirm page saved the link")
	}
	// The member's Save saves it (a POST of the form, with labels).
	s.run("a label for it", chromedp.Click("#add-label-"+lab.Label.ID, chromedp.ByID))
	s.submit("#save")
	if loc := s.location(); !strings.HasPrefix(loc, site+"/library") || !strings.Contains(s.text(".notice"), "Saved.") {
		t.Fatalf("after Save the browser is at %s saying %q", loc, s.text(".notice"))
	}
	gql(t, token, `query { entries(query: {q: "site:news.example in:all label:Weekend"}) { edges { cursor } } }`, &count)
	if len(count.Entries.Edges) != 1 {
		t.Fatalf("Save on the confirm page saved %d items with the label", len(count.Entries.Edges))
	}

	// Everything again with JavaScript off: plain forms, and no page
	// offers what only the script does (highlighting, shortcuts).
	scriptHints := func(where, want string) {
		t.Helper()
		var shown string
		s.run(where+": hints", chromedp.Evaluate(`["#hl-hint", ".keyhint"].filter(sel => { const e = document.querySelector(sel); return e && e.checkVisibility(); }).join(" ")`, &shown))
		if shown != want {
			t.Errorf("%s shows the hints %q, want %q", where, shown, want)
		}
	}
	s.run("JavaScript off", emulation.SetScriptExecutionDisabled(true))
	s.open("/library")
	scriptHints("the library without JavaScript", "")
	s.run("select the first item", chromedp.Click("li.item input[name=id]", chromedp.ByQuery))
	first := ""
	s.run("its id", chromedp.Evaluate(`document.querySelector("li.item input[name=id]").value`, &first))
	s.submit(`#bulk button[value=archive]`)
	if st := itemOf(t, token, first).SavedItem.Status; st != "ARCHIVED" || !strings.Contains(s.text(".notice"), "Archived.") {
		t.Fatalf("archive without JavaScript: %s", st)
	}
	// Paging, searching with the API's syntax and labelling: plain links
	// and forms.
	s.submit("#next-page")
	if n := s.count("li.item"); n == 0 || s.count(`nav.pages a[href="/library"]`) != 1 {
		t.Fatalf("the next page without JavaScript lists %d items", n)
	}
	s.run("search", chromedp.SetValue("#q", `in:all label:"Weekend"`, chromedp.ByID))
	s.submit(`form.search button[type=submit]`)
	if n := s.count("li.item"); n != 3 { // loaves 03 and 10, the link saved from the confirm page
		t.Fatalf("label search without JavaScript lists %d items", n)
	}
	s.open("/library?q=" + url.QueryEscape("in:inbox -label:Weekend"))
	s.run("its id", chromedp.Evaluate(`document.querySelector("li.item input[name=id]").value`, &first))
	s.run("select it and the label", chromedp.Click("li.item input[name=id]", chromedp.ByQuery),
		chromedp.SetValue("#bulk-label", lab.Label.ID, chromedp.ByID))
	s.submit(`#bulk button[value=label-add]`)
	if ls := itemOf(t, token, first).SavedItem.Labels; len(ls) != 1 || ls[0].Name != "Weekend" {
		t.Fatalf("labelled without JavaScript: %+v", ls)
	}
	s.open("/library/item/" + ids[20] + "?q=in%3Ainbox")
	if n := s.count("mark.highlight"); n != 0 {
		t.Fatalf("%d marks without JavaScript", n)
	}
	scriptHints("the reader without JavaScript", "")
	// (axe runs in the page, so it checks these pages with JavaScript on:
	// the script only adds to the same HTML.)
	s.submit("#trash")
	if st := itemOf(t, token, ids[20]).SavedItem.Status; st != "DELETED" {
		t.Fatalf("trash without JavaScript: %s", st)
	}
	s.submit("#undo")
	if st := itemOf(t, token, ids[20]).SavedItem.Status; st != "ACTIVE" {
		t.Fatalf("undo without JavaScript: %s", st)
	}
	s.open("/library/item/" + ids[10] + "?q=in%3Aarchive")
	s.run("edit the note", chromedp.SetValue(".note-form textarea", "knead much longer", chromedp.ByQuery))
	s.submit(".note-form button[type=submit]")
	if hs := itemOf(t, token, ids[10]).SavedItem.Highlights; len(hs) == 0 || (hs[0].Note != "knead much longer" && hs[len(hs)-1].Note != "knead much longer") {
		t.Fatalf("note without JavaScript: %+v", hs)
	}
	s.run("JavaScript on", emulation.SetScriptExecutionDisabled(false))
	s.open("/library?q=in%3Atrash")
	scriptHints("the library with JavaScript", ".keyhint")
	s.check("library-trash-empty")
}
