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
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	_ "github.com/hearthkit/caddy-hearth/caddymodule"
	"github.com/hearthkit/caddy-hearth/internal/testcaddy"
)

const (
	appSite  = "http://localhost:18480"
	mainSite = "http://127.0.0.1:18480"
	admin    = "localhost:12419"
	password = "correct horse battery"
	// mailSecret is the mail webhook's secret ({env.HEARTH_MAIL_SECRET}
	// in the recipe), mailDomain the recipe's mail_domain.
	mailSecret = "walk-mail-secret"
	mailDomain = "in.example.com"
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
		// The recipe's newsletter lines, uncommented as it says.
		"# mail_domain", "mail_domain",
		"# mail_webhook_secret", "mail_webhook_secret",
	).Replace(string(m[1]))
	// Hearth's own host takes newsletters too, and fetches their images
	// from loopback, where the pictures' origin is the test's (the app's
	// host refuses private addresses, which the walk checks).
	site = strings.Replace(site, "\thearth_graphql\n", "\thearth_graphql {\n\t\tallow_private_addresses\n\t\tmail_domain "+mailDomain+
		"\n\t\tmail_webhook_secret {env.HEARTH_MAIL_SECRET}\n\t}\n", 1)
	return testcaddy.GlobalOptions(admin, dir, "") + site
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
	browser := testcaddy.Chromium()
	if browser == "" {
		t.Fatal("Chromium not found: apt-get install chromium, or set HEARTH_CHROMIUM")
	}
	dir := t.TempDir()
	t.Setenv("HEARTH_MAIL_SECRET", mailSecret)
	testcaddy.Start(t, recipe(t, dir, web))
	testcaddy.AddMember(t, admin, "alice", password)
	api := &apiClient{t: t, token: apiToken(t)}
	api.saveArticle(articleTitle, "https://bread.example/baking", breadText)
	api.saveArticle(otherTitle, "https://garden.example/tomatoes", "Tomatoes want sun, water at the roots and a stake to climb.")
	api.saveArticle(notedTitle, "https://bread.example/rye", "Rye flour holds water longer than wheat; the dough stays sticky.")
	// Omnivore's browser extension's "Add note": a note on the item as a
	// whole, which Inboxt's own server never has.
	api.addNote(notedTitle, itemNote)

	// A window wide enough for the app's desktop layout (the highlight
	// button shows above the md breakpoint).
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.Flag("lang", "en-GB"), chromedp.WindowSize(1400, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	// The app's console and uncaught errors go to the test's log, which
	// a failing step shows.
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			for _, a := range ev.Args {
				t.Logf("console %s: %s %s", ev.Type, a.Value, a.Description)
			}
		case *runtime.EventExceptionThrown:
			t.Logf("exception: %s", ev.ExceptionDetails.Error())
		}
	})
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

	// Highlighting: a selection in the reader, highlighted from the
	// popover's button, is one highlight of that text through the API,
	// drawn again once the page is loaded afresh.
	w.run("open the inbox", chromedp.Navigate(appSite+"/"))
	w.openItem(articleTitle)
	w.waitFor("the reader", `!!document.querySelector("#highlight-container") && document.querySelector("#highlight-container").innerText.includes("knead the dough")`)
	w.highlight("#highlight-container p", highlighted)
	w.waitFor("the highlight drawn", drawnHighlight)
	api.waitItem("the highlight", articleTitle, func(it apiItem) bool { return len(it.Highlights) == 1 && it.Highlights[0] == highlighted })
	api.checkHighlightSegments(articleTitle)
	w.run("reload the reader", chromedp.Reload())
	w.waitFor("the highlight drawn after reload", drawnHighlight)

	// An item note in the app's Highlights view: Inboxt's app shows a
	// highlight's segments' text and nothing else (its HighlightFragment has
	// no note), so the note is there as its text; in the reader it is
	// drawn nowhere, and the article is shown whole.
	w.clickNav("Highlights")
	w.freshView("type%3Ahighlight")
	w.waitFor("the item note in the Highlights view", `document.body.innerText.includes(`+js(itemNote)+`) && document.body.innerText.includes(`+js(highlighted)+`)`)
	w.screenshot(filepath.Join("..", "..", "build", "screenshots", "inboxt-web-item-note.png"))
	w.run("open the inbox", chromedp.Navigate(appSite+"/"))
	w.openItem(notedTitle)
	w.waitFor("the noted article in the reader", `!!document.querySelector("#highlight-container") && document.querySelector("#highlight-container").innerText.includes("the dough stays sticky") && !document.querySelector("#highlight-container .highlight")`)
	if txt := w.text(); strings.Contains(txt, itemNote) {
		t.Fatalf("the reader draws the item note in the article: %.1500s", txt)
	}

	// Import of a Pocket CSV through the app's Import dialog: its file
	// input takes the file, the app says the import started, and the
	// items arrive.
	w.run("open the inbox", chromedp.Navigate(appSite+"/"))
	w.menu("Import")
	w.clickText(".mantine-Modal-content p", "CSV File")
	csvFile := filepath.Join(dir, "part_000000.csv")
	if err := os.WriteFile(csvFile, []byte(pocketCSV), 0o600); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the file input", `!!document.querySelector('.mantine-Modal-content input[type="file"]')`)
	w.run("choose the file", chromedp.SetUploadFiles(`.mantine-Modal-content input[type="file"]`, []string{csvFile}, chromedp.ByQuery))
	w.waitFor("the chosen file", `document.querySelector(".mantine-Modal-content").innerText.includes("part_000000.csv")`)
	w.clickText(".mantine-Modal-content button", "Import")
	w.waitFor("the toast", `document.body.innerText.includes("Import started")`)
	api.waitItem("the imported item with its tags", pocketTitle, func(it apiItem) bool { return it.OriginalURL == pocketURL && len(it.Labels) == 2 })
	w.run("reload the inbox", chromedp.Reload())
	w.waitFor("the imported item in the inbox", `document.body.innerText.includes(`+js(pocketTitle)+`)`)

	// A newsletter address made in the app is listed whole; a message
	// posted to the webhook URL the app shows arrives in the inbox.
	w.menu("Emails")
	w.clickButton("Create Email Address")
	addrRe := `/^[a-z0-9]+@` + regexp.QuoteMeta(mailDomain) + `$/`
	listed := `[...document.querySelectorAll(".mantine-Modal-content input[readonly]")].map(i => i.value).filter(v => ` + addrRe + `.test(v))`
	w.waitFor("the address listed whole", listed+`.length === 1`)
	var addr, hook string
	w.run("read the address and the webhook URL",
		chromedp.Evaluate(listed+`[0]`, &addr),
		chromedp.Evaluate(`[...document.querySelectorAll(".mantine-Modal-content input[readonly]")].map(i => i.value).find(v => v.endsWith("/mail-webhook"))`, &hook))
	if hook != appSite+"/inbox/items/mail-webhook" {
		t.Fatalf("the webhook URL the app shows: %q", hook)
	}
	postMail(t, hook, addr)
	w.closeModals()
	w.clickNav("Newsletters")
	w.freshView("type%3Anewsletter")
	w.waitFor("the newsletter in the Newsletters view", `document.body.innerText.includes(`+js(newsletterSubject)+`)`)

	pictures(t, w, api, addr)

	// Export: both buttons of the Profile dialog's export download a
	// file: the highlights, and the ZIP of the library.
	downloads := w.downloads(filepath.Join(dir, "downloads"))
	w.menu("Profile")
	w.clickText("button", "Export Your Data")
	w.clickButton("Export Highlights")
	w.waitFor("the highlights export dialog", `document.body.innerText.includes("Export your highlights instantly")`)
	w.clickText(".mantine-Modal-content button", "Export Highlights")
	name, body := downloads.next(w)
	if !strings.HasPrefix(name, "highlights_") || !strings.HasSuffix(name, ".html") || !strings.Contains(string(body), highlighted) || !strings.Contains(string(body), articleTitle) {
		t.Fatalf("the highlights export %s: %.500s", name, body)
	}
	w.closeModals()
	w.menu("Profile")
	w.clickText("button", "Export Your Data")
	w.clickButton("Export Full Account Data")
	w.clickText(".mantine-Modal-content button", "Export All Data")
	name, body = downloads.next(w)
	checkExportZip(t, name, body)
	w.closeModals()

	// Sign-out through the user menu: the app is back at its sign-in
	// page, also once reloaded, and its session no longer works.
	w.menu("Log Out")
	w.waitFor("the app's landing page", `[...document.querySelectorAll("button, a")].some(b => b.innerText.trim() === "Sign In")`)
	w.run("reload", chromedp.Reload())
	w.waitFor("the app's landing page after reload", `[...document.querySelectorAll("button, a")].some(b => b.innerText.trim() === "Sign In") && !document.body.innerText.includes(`+js(articleTitle)+`)`)
	var me string
	w.run("ask the API who is signed in", chromedp.Evaluate(`fetch("/api/graphql", {method: "POST", credentials: "include", headers: {"Content-Type": "application/json"}, body: JSON.stringify({query: "{ me { username } }"})}).then(r => r.text())`, &me, awaitPromise))
	if me != `{"data":{"me":null}}` {
		t.Fatalf("after sign-out the app's session still answers: %s", me)
	}

	// Hearth's own pages on the main host still answer in the same
	// browser: the app's service worker covers only its own host.
	w.run("open Hearth's sign-in page", chromedp.Navigate(mainSite+"/auth/sign_in"))
	w.waitFor("Hearth's sign-in page", `!!document.querySelector('main form input[name="username"]')`)
}

const (
	articleTitle = "Baking Bread at Home"
	otherTitle   = "Growing Tomatoes"
	// notedTitle is the article with an item note, itemNote.
	notedTitle = "Rye Bread"
	itemNote   = "Try it with caraway next time."
)

// highlighted is the selection highlighted in the reader; drawnHighlight
// is JavaScript telling that the reader draws it (its segments' spans).
const (
	highlighted    = "knead the dough and let it rise"
	drawnHighlight = `[...document.querySelectorAll("#highlight-container .highlight")].map(e => e.textContent).join("") === "` + highlighted + `"`
)

// pocketCSV is a list as Pocket exports it (part_000000.csv of its zip:
// title, url, time_added, tags, status).
const (
	pocketTitle = "Pickling Vegetables"
	pocketURL   = "https://pickle.example/jars"
	pocketCSV   = "title,url,time_added,tags,status\n" + pocketTitle + "," + pocketURL + ",1700000000,kitchen|preserves,unread\n"
)

const newsletterSubject = "Bread Weekly, issue 7"

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

// waitFor polls a JavaScript condition. The walk's waits are a minute: a
// backstop for Chromium on a loaded machine, never a duration asserted.
func (w *walker) waitFor(what, cond string) {
	w.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
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

// click clicks the element the JavaScript expression find names once
// there is one, finding and clicking in one step: the app re-renders its
// lists while it loads, and an element found a moment before may be gone.
func (w *walker) click(what, find string) {
	w.t.Helper()
	w.waitFor(what, `(() => { const e = `+find+`; if (!e) return false; e.click(); return true })()`)
}

// clickText clicks the last element matching selector whose own text is
// text, once there is one.
func (w *walker) clickText(selector, text string) {
	w.t.Helper()
	w.click(selector+" "+text, fmt.Sprintf(`[...document.querySelectorAll(%s)].filter(e => e.innerText && e.innerText.trim() === %s).pop()`, js(selector), js(text)))
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
	w.click("the link "+text, navLink(text))
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
	w.click("the "+name+" icon", fmt.Sprintf(`[...document.querySelectorAll("button")].filter(b => b.querySelector("svg.tabler-icon-%s")).pop()`, name))
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
	w.click("the user menu", `document.querySelector(".mantine-Avatar-root")`)
	w.clickText(`[role="menuitem"], button`, item)
}

// closeModals closes the open dialogs with Escape, one at a time: after
// each Escape it waits until a dialog has gone (its closing animation can
// take a while on a loaded machine) before the next, a minute at most.
func (w *walker) closeModals() {
	w.t.Helper()
	open := func() int {
		var n int
		w.run("dialogs", chromedp.Evaluate(`document.querySelectorAll(".mantine-Modal-content").length`, &n))
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	for n := open(); n > 0; n = open() {
		if time.Now().After(deadline) {
			w.t.Fatalf("%d dialogs do not close", n)
		}
		w.run("Escape", chromedp.KeyEvent(kb.Escape))
		for until := time.Now().Add(10 * time.Second); open() >= n && time.Now().Before(until); {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// listItem is JavaScript finding the list's link of the item titled
// title (the link holding its checkbox).
func listItem(title string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("a")].find(a => a.innerText.includes(%s) && a.querySelector('input[type="checkbox"]'))`, js(title))
}

// selectItem ticks the list's checkbox of the item titled title.
func (w *walker) selectItem(title string) {
	w.t.Helper()
	w.click("the item "+title, listItem(title)+`?.querySelector('input[type="checkbox"]')`)
}

// openItem opens the item titled title from the list in the reader.
func (w *walker) openItem(title string) {
	w.t.Helper()
	w.click("the item "+title, listItem(title))
}

// highlight selects the first occurrence of text in the elements
// selector names, as a member's drag would (the app follows the
// document's selection), and clicks the Highlight button the app then
// shows above it. The selection is made again while the button is not
// there: the reader redraws its article while it loads.
func (w *walker) highlight(selector, text string) {
	w.t.Helper()
	w.waitFor("the Highlight button over "+text, fmt.Sprintf(`(() => {
		const text = %s;
		const b = [...document.querySelectorAll("[data-highlight-popover] button")].find(b => b.innerText.trim() === "Highlight");
		if (b && getSelection().toString() === text) {
			b.click();
			return true;
		}
		if (getSelection().toString() === text) return false;
		for (const el of document.querySelectorAll(%s)) {
			const tw = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
			for (let n = tw.nextNode(); n; n = tw.nextNode()) {
				const i = n.data.indexOf(text);
				if (i < 0) continue;
				const r = document.createRange();
				r.setStart(n, i);
				r.setEnd(n, i + text.length);
				getSelection().removeAllRanges();
				getSelection().addRange(r);
				return false;
			}
		}
		return false;
	})()`, js(text), js(selector)))
}

// screenshot saves the window as it shows now, as a PNG at name (the
// tree's build/screenshots, as the browser suite's): the window, not the
// whole page, since the app draws its lists for the window's height and a
// page-sized capture draws them again.
func (w *walker) screenshot(name string) {
	w.t.Helper()
	var png []byte
	w.run("screenshot", chromedp.CaptureScreenshot(&png))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(name, png, 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// awaitPromise makes chromedp.Evaluate wait for the promise's value.
func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }

// downloads are the browser's downloads, saved in a folder of the test.
type downloads struct {
	dir  string
	done chan download
}

type download struct{ name, path string }

// downloads lets the browser download into dir and reports each
// finished download.
func (w *walker) downloads(dir string) *downloads {
	w.t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		w.t.Fatal(err)
	}
	d := &downloads{dir: dir, done: make(chan download, 4)}
	names := map[string]string{} // guid -> suggested name; events come in order on one goroutine
	chromedp.ListenTarget(w.ctx, func(ev any) {
		switch ev := ev.(type) {
		case *browser.EventDownloadWillBegin:
			names[ev.GUID] = ev.SuggestedFilename
		case *browser.EventDownloadProgress:
			if ev.State == browser.DownloadProgressStateCompleted {
				d.done <- download{names[ev.GUID], filepath.Join(dir, ev.GUID)}
			}
		}
	})
	w.run("allow downloads", browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllowAndName).
		WithDownloadPath(dir).WithEventsEnabled(true))
	return d
}

// next waits for the next finished download and returns its name and
// content.
func (d *downloads) next(w *walker) (string, []byte) {
	w.t.Helper()
	select {
	case f := <-d.done:
		b, err := os.ReadFile(f.path)
		if err != nil {
			w.t.Fatal(err)
		}
		return f.name, b
	case <-time.After(60 * time.Second):
		w.t.Fatalf("nothing downloaded; the page says: %.1500s", w.text())
	}
	return "", nil
}

// checkExportZip checks the library's export: a ZIP whose saved items
// hold the walk's items, the highlight among them.
func checkExportZip(t *testing.T, name string, body []byte) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if !strings.HasSuffix(name, ".zip") || err != nil {
		t.Fatalf("the library export %s (%d bytes): %v", name, len(body), err)
	}
	f, err := zr.Open("saved_items.json")
	if err != nil {
		t.Fatalf("the library export %s: %v", name, err)
	}
	defer f.Close()
	var items []struct {
		Title      string
		Highlights []struct{ Text string }
	}
	if err := json.NewDecoder(f).Decode(&items); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, it := range items {
		seen[it.Title] = true
		if it.Title == articleTitle && (len(it.Highlights) != 1 || it.Highlights[0].Text != highlighted) {
			t.Fatalf("the exported article's highlights: %+v", it.Highlights)
		}
	}
	for _, title := range []string{articleTitle, pocketTitle, newsletterSubject} {
		if !seen[title] {
			t.Fatalf("the library export lacks %q: %+v", title, items)
		}
	}
}

// postMail posts a message to addr as a mail provider's inbound webhook
// does, to the URL the app shows, with the recipe's secret.
func postMail(t *testing.T, url, addr string) {
	t.Helper()
	postMessage(t, url, addr, newsletterSubject, "<issue7@bread.example>", "<p>"+breadText+"</p>")
}

// postMessage posts a message of subject, id and html to addr as postMail
// does.
func postMessage(t *testing.T, url, addr, subject, id, html string) {
	t.Helper()
	msg, _ := json.Marshal(map[string]string{
		"recipient": addr, "from": "Bread Weekly <news@bread.example>", "subject": subject,
		"messageId": id, "html": html, "text": breadText,
	})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Webhook-Secret", mailSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
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

// addNote adds text to the note of the item titled title as Omnivore's
// browser extension's "Add note" does: Omnivore's createHighlight of type
// NOTE on Omnivore's API URL.
func (c *apiClient) addNote(title, text string) {
	c.t.Helper()
	var id string
	for _, it := range c.items() {
		if it.Title == title {
			id = it.ID
		}
	}
	body, _ := json.Marshal(map[string]any{
		"query":     `mutation($input: CreateHighlightInput!) { createHighlight(input: $input) { ... on CreateHighlightSuccess { highlight { id type } } ... on CreateHighlightError { errorCodes } } }`,
		"variables": map[string]any{"input": map[string]any{"id": "walk-note", "shortId": "walk-note", "articleId": id, "type": "NOTE", "annotation": text}},
	})
	req, _ := http.NewRequest(http.MethodPost, mainSite+"/omnivore/api/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"type":"NOTE"`) {
		c.t.Fatalf("the note on %s: %d %s", title, resp.StatusCode, b)
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

// checkHighlightSegments checks the one highlight of the item titled
// title as Inboxt's web app writes it (highlightsDOM.ts @45f4314): one
// segment of the selected text at the end of its element's path, its
// offsets spanning the text, and the text around it, the characters
// nearest the selection where the paragraph is long.
func (c *apiClient) checkHighlightSegments(title string) {
	c.t.Helper()
	var id string
	for _, it := range c.items() {
		if it.Title == title {
			id = it.ID
		}
	}
	var one struct {
		SavedItem struct {
			Highlights []struct {
				Segments []struct {
					Xpath, Text, BeforeText, AfterText string
					StartOffset, EndOffset             int
				}
			}
		}
	}
	c.do(`query($id: String!) { savedItem(query: {id: $id}) { highlights { segments { xpath text beforeText afterText startOffset endOffset } } } }`, map[string]any{"id": id}, &one)
	hs := one.SavedItem.Highlights
	if len(hs) != 1 || len(hs[0].Segments) != 1 {
		c.t.Fatalf("highlights of %s: %+v", title, hs)
	}
	sg := hs[0].Segments[0]
	if sg.Text != highlighted || sg.EndOffset-sg.StartOffset != len(highlighted) || !strings.HasSuffix(sg.Xpath, "::0") ||
		!strings.HasSuffix(sg.BeforeText, "when you ") || !strings.HasPrefix(sg.AfterText, " slowly overnight.") || len([]rune(sg.AfterText)) != 1000 {
		c.t.Fatalf("the highlight's segment: %+v", sg)
	}
}

// waitItem waits until an item titled title (any, when "") satisfies ok.
func (c *apiClient) waitItem(what, title string, ok func(apiItem) bool) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
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
	deadline := time.Now().Add(60 * time.Second)
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

// picturesSubject is a newsletter with a tracking pixel and a picture
// before the text crumbHighlight, in its second paragraph.
const (
	picturesSubject = "Bread Weekly, issue 8"
	crumbHighlight  = "the crumb is open and glossy"
)

// pictures walks a newsletter with a tracking pixel and a picture, both
// of an origin of the test's, posted to Hearth's own host: the site
// stores the picture when the newsletter arrives (and never asks for the pixel), and the app's reader
// shows the stored copy from the site, loaded with its session, without
// the pixel, and the origin is asked for nothing more. A highlight
// anchored as the app anchors one on the newsletter as saved (the second
// paragraph's path, offsets into its text, which the pixel and the
// picture hold none of: highlightsDOM.ts @45f4314) is drawn on its text.
func pictures(t *testing.T, w *walker, api *apiClient, addr string) {
	t.Helper()
	var mu sync.Mutex
	asked := map[string]int{}
	origin := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path != "/loaf.png" {
			http.NotFound(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "image/png")
		_, _ = rw.Write(loafPNG)
	}))
	t.Cleanup(origin.Close)
	postMessage(t, mainSite+"/inbox/items/mail-webhook", addr, picturesSubject, "<issue8@bread.example>", `<p>First proof, then the second.</p>`+
		`<p>Before the pictures<img src="`+origin.URL+`/open.gif" width="1" height="1"><img src="`+origin.URL+`/loaf.png" alt="A loaf">`+
		` `+crumbHighlight+` after a long rise.</p>`)
	id := api.waitImage(picturesSubject)
	w.run("open the newsletters", chromedp.Navigate(appSite+"/"))
	w.clickNav("Newsletters")
	w.freshView("type%3Anewsletter")
	w.openItem(picturesSubject)
	stored := js(appSite + "/api/images/" + id + "/0")
	w.waitFor("the stored picture shown from the site", `(() => { const imgs = [...document.querySelectorAll("#highlight-container img")];
		return imgs.length === 1 && imgs[0].src === `+stored+` && imgs[0].complete && imgs[0].naturalWidth === 3 })()`)
	// The path of the app's container, as the app writes it.
	var container string
	w.run("the container's path", chromedp.Evaluate(`(() => { const parts = []; for (let el = document.querySelector("#highlight-container"); el; el = el.parentElement) {
		let n = 1; for (let s = el.previousElementSibling; s; s = s.previousElementSibling) if (s.tagName === el.tagName && !s.classList.contains("highlight")) n++;
		parts.unshift(el.tagName.toLowerCase() + "[" + n + "]") } return "/" + parts.join("/") })()`, &container))
	start := len("Before the pictures ")
	api.do(`mutation($data: CreateHighlightInput!) { createHighlight(data: $data) { id } }`, map[string]any{"data": map[string]any{
		"savedItemId": id, "segments": []any{map[string]any{"xpath": container + "/p[2]::0", "startOffset": start, "endOffset": start + len(crumbHighlight),
			"text": crumbHighlight, "beforeText": "Before the pictures ", "afterText": " after a long rise."}}}}, nil)
	w.run("reload the reader", chromedp.Reload())
	w.waitFor("the highlight drawn after the picture", `[...document.querySelectorAll("#highlight-container .highlight")].map(e => e.textContent).join("") === `+js(crumbHighlight))
	mu.Lock()
	defer mu.Unlock()
	if asked["/open.gif"] != 0 || asked["/loaf.png"] != 1 || len(asked) != 1 {
		t.Fatalf("the pictures' origin was asked %v; want the stored picture once, when the newsletter arrived", asked)
	}
}

// loafPNG is a PNG of 3×2 pixels.
var loafPNG = func() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(0, 0, color.RGBA{200, 150, 60, 255})
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}()

// waitImage waits until the item titled title has a stored image, and
// returns the item's id.
func (c *apiClient) waitImage(title string) string {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, it := range c.items() {
			if it.Title != title {
				continue
			}
			req, _ := http.NewRequest(http.MethodGet, mainSite+"/api/images/"+it.ID+"/0", nil)
			req.Header.Set("Authorization", "Bearer "+c.token)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return it.ID
				}
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no stored image of %q", title)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
