//go:build browser

// Package inboxtweb walks Inboxt's own web app (v1.1.1, built unmodified)
// on Hearth in Debian's Chromium: Caddy built from this tree, started in
// this process from docs/inboxt-web.md's Caddyfile (its host names turned
// into http://localhost:18480 for the app and http://127.0.0.1:18480 for
// Hearth's own host, the app's folder into $HEARTH_INBOXT_WEB), with the
// app served from outside the module (AGPL-3.0 test material, never copied
// in). See README.md.
package inboxtweb

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	_ "github.com/hearthkit/caddy-hearth/caddymodule"
)

const (
	appSite  = "http://localhost:18480"
	mainSite = "http://127.0.0.1:18480"
	admin    = "localhost:12419"
	password = "correct horse battery"
)

// recipe is the Caddyfile of docs/inboxt-web.md, with the test's hosts and
// the app's folder, behind the test's global options.
func recipe(t *testing.T, dir, web string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/inboxt-web.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```caddyfile\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/inboxt-web.md has no caddyfile block")
	}
	site := strings.NewReplacer(
		"read.example.com {", appSite+" {",
		"example.com {", mainSite+" {",
		"account_domain example.com", "account_domain localhost",
		"/srv/inboxt-web", web,
	).Replace(string(m[1]))
	return fmt.Sprintf(`{
	admin %s
	persist_config off
	auto_https off
	storage file_system %q
	hearth {
		storage_dir %q
	}
}
%s`, admin, filepath.Join(dir, "caddy-data"), filepath.Join(dir, "hearth"), site)
}

func startCaddy(t *testing.T, caddyfile string) {
	t.Helper()
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatalf("adapt the Caddyfile: %v\n%s", err, caddyfile)
	}
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatalf("start Caddy: %v", err)
	}
	t.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			t.Errorf("stop Caddy: %v", err)
		}
	})
}

func TestInboxtWebAppOnHearth(t *testing.T) {
	web := os.Getenv("HEARTH_INBOXT_WEB")
	if web == "" {
		web = "../../../shared/inboxt/web"
	}
	web, _ = filepath.Abs(web)
	if _, err := os.Stat(filepath.Join(web, "index.html")); err != nil {
		t.Fatalf("Inboxt's web app: %v (set HEARTH_INBOXT_WEB to its built folder)", err)
	}
	browser := os.Getenv("HEARTH_CHROMIUM")
	if browser == "" {
		browser, _ = exec.LookPath("chromium")
	}
	if browser == "" {
		t.Fatal("Chromium not found: apt-get install chromium, or set HEARTH_CHROMIUM")
	}
	dir := t.TempDir()
	startCaddy(t, recipe(t, dir, web))
	req, _ := http.NewRequest(http.MethodPost, "http://"+admin+"/hearth/members", strings.NewReader(`{"username":"alice","password":"`+password+`"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("add alice: %v %v", err, resp)
	}
	resp.Body.Close()
	api := &apiClient{t: t, token: apiToken(t)}
	api.saveArticle(articleTitle, "https://bread.example/baking", breadText)
	api.saveArticle(otherTitle, "https://garden.example/tomatoes", "Tomatoes want sun, water at the roots and a stake to climb.")

	// A window wide enough for the app's desktop layout (the highlight
	// button shows above the md breakpoint).
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.Flag("lang", "en-GB"), chromedp.WindowSize(1400, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelTime := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	w := &walker{t: t, ctx: ctx}

	// Sign in through the app's own form on localhost, with the address
	// Hearth reports there.
	w.run("open the app", chromedp.Navigate(appSite+"/"))
	w.clickButton("Sign In")
	w.waitFor("the sign-in form", `!!document.querySelector('input[placeholder="Email address"]')`)
	w.run("fill the form",
		chromedp.SendKeys(`input[placeholder="Email address"]`, "alice@localhost.invalid", chromedp.ByQuery),
		chromedp.SendKeys(`input[placeholder="Password"]`, password, chromedp.ByQuery))
	w.run("submit", chromedp.Click(`form button[type="submit"]`, chromedp.ByQuery))
	w.waitFor("the inbox with the saved articles", `!document.querySelector('input[placeholder="Password"]') && document.body.innerText.includes(`+js(articleTitle)+`) && document.body.innerText.includes(`+js(otherTitle)+`)`)
	if strings.Contains(w.text(), "Verify your email") {
		t.Fatal("the app shows the verification banner")
	}

	// Labels: made in the Labels dialog, put on an item from the list;
	// the label's link in the sidebar lists that item only.
	w.menu("Labels")
	w.clickButton("Create Label")
	w.typeInto(`.mantine-Modal-content input:not([readonly])`, "Kitchen")
	w.clickButton("Save")
	w.closeModals()
	w.waitFor("the label in the sidebar", navLink("Kitchen")+` !== undefined`)
	w.closeModals()
	w.selectItem(articleTitle)
	w.clickIcon("tag")
	w.waitFor("the labels dialog", `document.body.innerText.includes("Save & Close")`)
	w.run("tick Kitchen", chromedp.Evaluate(`[...document.querySelectorAll(".mantine-Modal-content label")].find(l => l.innerText.trim() === "Kitchen").click()`, nil))
	w.clickButton("Save & Close")
	api.waitItem("the label on the article", articleTitle, func(it apiItem) bool { return len(it.Labels) == 1 && it.Labels[0].Name == "Kitchen" })
	w.clickNav("Kitchen")
	w.freshView("label%3AKitchen")
	w.waitFor("the label's items", `document.body.innerText.includes(`+js(articleTitle)+`) && !document.body.innerText.includes(`+js(otherTitle)+`)`)

	// Search: the box lists what matches, and saves the search as a saved
	// query shown in the sidebar.
	w.run("open the inbox", chromedp.Navigate(appSite+"/"))
	w.waitFor("the inbox", `document.body.innerText.includes(`+js(otherTitle)+`)`)
	w.typeInto(`input[placeholder="Search for keywords or labels..."]`, "tomatoes")
	w.freshView("q=tomatoes")
	w.waitFor("the search's result", `document.body.innerText.includes(`+js(otherTitle)+`) && !document.body.innerText.includes(`+js(articleTitle)+`)`)
	w.clickIcon("device-floppy")
	w.typeInto(`.mantine-Modal-content input[placeholder="e.g. My Newsletters"]`, "Garden")
	w.clickButton("Save")
	w.waitFor("the saved query in the sidebar", navLink("Garden")+` !== undefined`)
	if q := api.savedQueries(); len(q) != 1 || q[0] != "Garden: tomatoes" {
		t.Fatalf("saved queries through the API: %v", q)
	}

	// Archive with undo, then archive for good: the Archive view lists it.
	w.run("open the inbox", chromedp.Navigate(appSite+"/"))
	w.selectItem(otherTitle)
	w.clickIcon("archive")
	api.waitItem("archived", otherTitle, func(it apiItem) bool { return it.Status == "ARCHIVED" })
	w.clickButton("Undo")
	api.waitItem("back in the inbox", otherTitle, func(it apiItem) bool { return it.Status == "ACTIVE" })
	w.waitFor("the item back in the list", `document.body.innerText.includes(`+js(otherTitle)+`)`)
	w.selectItem(otherTitle)
	w.clickIcon("archive")
	api.waitItem("archived", otherTitle, func(it apiItem) bool { return it.Status == "ARCHIVED" })
	w.clickNav("Archive")
	w.waitFor("the archive", `document.body.innerText.includes(`+js(otherTitle)+`)`)

	// Trash, then empty the trash: the item is gone for good.
	w.selectItem(otherTitle)
	w.clickIcon("trash")
	api.waitItem("in the trash", otherTitle, func(it apiItem) bool { return it.Status == "DELETED" })
	w.clickNav("Trash")
	w.clickButton("Empty Trash Now")
	w.clickButton("Delete permanently")
	w.waitFor("the toast", `document.body.innerText.includes("1 item permanently deleted")`)
	api.waitGone("emptied from the trash", otherTitle)

	// Add a link: a private address is refused under the form's URL field
	// (the path of Hearth's refusal); a public one is added.
	w.run("open the inbox", chromedp.Navigate(appSite+"/"))
	w.waitFor("the inbox", `document.body.innerText.includes(`+js(articleTitle)+`)`)
	w.clickButton("Add Link")
	w.typeInto(`input[placeholder="https://inboxt.app/"]`, "http://127.0.0.1:18480/private")
	w.clickButton("Add")
	w.waitFor("the refusal under the URL field", `(() => { const e = document.querySelector(".mantine-TextInput-error"); return !!e && e.innerText.includes("private or reserved network address") })()`)
	w.typeInto(`input[placeholder="https://inboxt.app/"]`, "https://example.org/sourdough")
	w.clickButton("Add")
	api.waitItem("the added link", "", func(it apiItem) bool { return it.OriginalURL == "https://example.org/sourdough" })

	// API tokens: made in the dialog, shown once; it works on the API.
	w.menu("API Tokens")
	w.clickButton("Create API Token")
	w.typeInto(`.mantine-Modal-content input[placeholder="My extension"]`, "Walk script")
	w.clickButton("Create")
	w.waitFor("the token shown once", `[...document.querySelectorAll(".mantine-Modal-content p")].some(p => p.innerText.trim().startsWith("app_"))`)
	var secret string
	w.run("read the token", chromedp.Evaluate(`[...document.querySelectorAll(".mantine-Modal-content p")].find(p => p.innerText.trim().startsWith("app_")).innerText.trim()`, &secret))
	(&apiClient{t: t, token: secret}).do(`{ me { username } }`, nil, nil)
	w.closeModals()

	// Hearth's own pages on the main host still answer in the same
	// browser: the app's service worker covers only its own host.
	w.run("open Hearth's sign-in page", chromedp.Navigate(mainSite+"/auth/sign_in"))
	w.waitFor("Hearth's sign-in page", `!!document.querySelector('main form input[name="username"]')`)
}

const (
	articleTitle = "Baking Bread at Home"
	otherTitle   = "Growing Tomatoes"
)

var breadText = strings.Repeat("Flour, water, salt and yeast make bread when you knead the dough and let it rise slowly overnight. ", 12)

// js is s as a JavaScript string literal.
func js(s string) string { b, _ := json.Marshal(s); return string(b) }

// walker drives the browser as a member would, waiting for the app as
// they do.
type walker struct {
	t   *testing.T
	ctx context.Context
}

func (w *walker) run(what string, actions ...chromedp.Action) {
	w.t.Helper()
	if err := chromedp.Run(w.ctx, actions...); err != nil {
		w.t.Fatalf("%s: %v", what, err)
	}
}

func (w *walker) text() string {
	var s string
	_ = chromedp.Run(w.ctx, chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &s))
	return s
}

// waitFor polls a JavaScript condition.
func (w *walker) waitFor(what, cond string) {
	w.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		if err := chromedp.Run(w.ctx, chromedp.Evaluate(cond, &ok)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			var href string
			_ = chromedp.Run(w.ctx, chromedp.Evaluate(`location.href`, &href))
			w.t.Fatalf("%s: not seen at %s; the page says: %.1500s", what, href, w.text())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clickText clicks the last element matching selector whose own text is
// text, once there is one.
func (w *walker) clickText(selector, text string) {
	w.t.Helper()
	find := fmt.Sprintf(`[...document.querySelectorAll(%s)].filter(e => e.innerText && e.innerText.trim() === %s)`, js(selector), js(text))
	w.waitFor(selector+" "+text, find+`.length > 0`)
	w.run("click "+text, chromedp.Evaluate(find+`.pop().click()`, nil))
}

func (w *walker) clickButton(text string) { w.t.Helper(); w.clickText("button", text) }

// navLink is JavaScript finding the sidebar's link named text: the
// element of that exact text outside dialogs, or its link.
func navLink(text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("a, button, p, span, div")].filter(e => e.children.length === 0 && e.innerText && e.innerText.trim() === %s && !e.closest(".mantine-Modal-content")).map(e => e.closest("a, button") || e)[0]`, js(text))
}

// clickNav clicks the sidebar's link named text.
func (w *walker) clickNav(text string) {
	w.t.Helper()
	w.waitFor("the link "+text, navLink(text)+` !== undefined`)
	w.run("click "+text, chromedp.Evaluate(navLink(text)+`.click()`, nil))
}

// freshView waits for the address to hold part, then reloads the page.
// Inboxt's app keeps every list in one cache entry (its keyArgs function
// returns an array, which Apollo reads as argument names: none match) and
// keeps a view's items that the next view's first page lacks when the two
// share an item (apps/web/src/lib/graphql/client.ts @45f4314); as Inboxt's
// cursors are item ids, on Inboxt's own API too a label's view lists the
// inbox's other items until the page is loaded afresh.
func (w *walker) freshView(part string) {
	w.t.Helper()
	w.waitFor("the address with "+part, fmt.Sprintf(`location.href.includes(%s)`, js(part)))
	w.run("reload", chromedp.Reload())
}

// clickIcon clicks the last button drawn with Tabler's icon name: the
// app's item actions are icons whose names show only in a tooltip.
func (w *walker) clickIcon(name string) {
	w.t.Helper()
	find := fmt.Sprintf(`[...document.querySelectorAll("button")].filter(b => b.querySelector("svg.tabler-icon-%s"))`, name)
	w.waitFor("the "+name+" icon", find+`.length > 0`)
	w.run("click the "+name+" icon", chromedp.Evaluate(find+`.pop().click()`, nil))
}

// typeInto types text over what the field selector names holds, once it
// is there.
func (w *walker) typeInto(selector, text string) {
	w.t.Helper()
	w.waitFor(selector, fmt.Sprintf(`!!document.querySelector(%s)`, js(selector)))
	w.run("type into "+selector, chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%s).select()`, js(selector)), nil),
		chromedp.SendKeys(selector, text, chromedp.ByQuery))
}

// menu opens the user menu (the avatar) and picks item.
func (w *walker) menu(item string) {
	w.t.Helper()
	w.waitFor("the user menu", `!!document.querySelector(".mantine-Avatar-root")`)
	w.run("open the user menu", chromedp.Evaluate(`document.querySelector(".mantine-Avatar-root").click()`, nil))
	w.clickText(`[role="menuitem"], button`, item)
}

// closeModals closes the open dialogs with Escape, one at a time.
func (w *walker) closeModals() {
	w.t.Helper()
	for i := 0; i < 5; i++ {
		var open bool
		w.run("dialogs", chromedp.Evaluate(`!!document.querySelector(".mantine-Modal-content")`, &open))
		if !open {
			return
		}
		w.run("Escape", chromedp.KeyEvent(kb.Escape))
		time.Sleep(300 * time.Millisecond)
	}
	w.t.Fatal("a dialog does not close")
}

// selectItem ticks the list's checkbox of the item titled title.
func (w *walker) selectItem(title string) {
	w.t.Helper()
	find := fmt.Sprintf(`[...document.querySelectorAll("a")].filter(a => a.innerText.includes(%s) && a.querySelector('input[type="checkbox"]'))`, js(title))
	w.waitFor("the item "+title, find+`.length > 0`)
	w.run("select "+title, chromedp.Evaluate(find+`[0].querySelector('input[type="checkbox"]').click()`, nil))
}

// apiClient reads and writes alice's library through Hearth's API with an
// API token, as a script would, to check what the app did.
type apiClient struct {
	t     *testing.T
	token string
}

// apiToken makes an API token for alice through the admin API.
func apiToken(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+admin+"/hearth/members/alice/api_tokens", strings.NewReader(`{"name":"walk","expires":"never"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tok struct{ Token string }
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || tok.Token == "" {
		t.Fatalf("API token: %v %d", err, resp.StatusCode)
	}
	return tok.Token
}

func (c *apiClient) do(query string, vars map[string]any, out any) {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, mainSite+"/api/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var r struct {
		Data   json.RawMessage
		Errors []any
	}
	if err := json.Unmarshal(b, &r); err != nil || resp.StatusCode != http.StatusOK || len(r.Errors) > 0 {
		c.t.Fatalf("%.60s: %d %s", query, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			c.t.Fatal(err)
		}
	}
}

// saveArticle saves an article as an extension would.
func (c *apiClient) saveArticle(title, url, text string) {
	c.t.Helper()
	html := "<html><head><title>" + title + "</title></head><body><article><h1>" + title + "</h1><p>" + text + "</p>" +
		strings.Repeat("<p>"+text+"</p>", 3) + "</article></body></html>"
	c.do(`mutation($data: AddArticleFromHtmlSnapshotInput!) { addArticleFromHtmlSnapshot(data: $data) }`,
		map[string]any{"data": map[string]any{"url": url, "html": html}}, nil)
}

type apiItem struct {
	ID, Title, Status, OriginalURL string
	Labels                         []struct{ Name string }
	Highlights                     []string
}

// items lists every saved item, in any folder, with its highlights'
// text.
func (c *apiClient) items() []apiItem {
	c.t.Helper()
	var page struct {
		Entries struct {
			Edges []struct {
				Node struct {
					Typename    string `json:"__typename"`
					ID, Title   string
					Status      string
					OriginalURL *string
					Labels      []struct{ Name string }
				}
			}
		}
	}
	c.do(`{ entries(query: {first: 50, q: "in:all"}) { edges { node { __typename ... on SavedItem { id title status originalUrl labels { name } } } } } }`, nil, &page)
	var out []apiItem
	for _, e := range page.Entries.Edges {
		n := e.Node
		if n.Typename != "SavedItem" {
			continue
		}
		it := apiItem{ID: n.ID, Title: n.Title, Status: n.Status, Labels: n.Labels}
		if n.OriginalURL != nil {
			it.OriginalURL = *n.OriginalURL
		}
		var one struct {
			SavedItem struct {
				Highlights []struct{ Segments []struct{ Text string } }
			}
		}
		c.do(`query($id: String!) { savedItem(query: {id: $id}) { highlights { segments { text } } } }`, map[string]any{"id": n.ID}, &one)
		for _, h := range one.SavedItem.Highlights {
			var b strings.Builder
			for _, s := range h.Segments {
				b.WriteString(s.Text)
			}
			it.Highlights = append(it.Highlights, b.String())
		}
		out = append(out, it)
	}
	return out
}

// waitItem waits until an item titled title (any, when "") satisfies ok.
func (c *apiClient) waitItem(what, title string, ok func(apiItem) bool) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		items := c.items()
		for _, it := range items {
			if (title == "" || it.Title == title) && ok(it) {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not seen through the API; the items are %+v", what, items)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitGone waits until no item is titled title.
func (c *apiClient) waitGone(what, title string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		items := c.items()
		gone := true
		for _, it := range items {
			gone = gone && it.Title != title
		}
		if gone {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: still there; the items are %+v", what, items)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// savedQueries lists the saved queries as "name: query".
func (c *apiClient) savedQueries() []string {
	c.t.Helper()
	var out struct {
		SavedQueries []struct{ Name, Query string }
	}
	c.do(`{ savedQueries { name query } }`, nil, &out)
	var qs []string
	for _, q := range out.SavedQueries {
		qs = append(qs, q.Name+": "+q.Query)
	}
	return qs
}
