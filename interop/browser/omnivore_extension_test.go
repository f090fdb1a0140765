//go:build browser

package browser

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/hearthkit/caddy-hearth/internal/testcaddy"
)

// omnivoreExtension is Omnivore's self-hosted browser extension as Omnivore
// built it (web-extensions/extension-v3/extension, omnivore-app/omnivore
// @322ce62), kept unchanged (third_party/omnivore-extension-v3/SOURCE.md).
const omnivoreExtension = "third_party/omnivore-extension-v3/extension"

// TestOmnivoreExtensionInChromium loads Omnivore's extension into
// Chromium, sets it up as a member does (its options page: the site's
// origin and an API key made on the settings page), and saves a page with
// it: its toolbar button pressed on the page (clickToolbarButton), from
// there on it is the extension's own code: content.js sends the page's
// HTML and title to its service worker, which sends savePage to the site
// and tells the page's toolbar how it went. Then, with its API URL at
// Hearth's Omnivore endpoint (/omnivore, docs/omnivore.md), the member
// picks a label from the toolbar's list of theirs and adds a note.
func TestOmnivoreExtensionInChromium(t *testing.T) {
	testcaddy.Start(t, caddyfile(t.TempDir()))
	testcaddy.AddMember(t, admin, "erin", password)
	ext, err := filepath.Abs(omnivoreExtension)
	if err != nil {
		t.Fatal(err)
	}
	s := newSuite(t,
		chromedp.Flag("disable-extensions", false),
		chromedp.Flag("load-extension", ext),
		chromedp.Flag("disable-extensions-except", ext),
		chromedp.Flag("disable-features", "site-per-process,Translate,BlinkGenPropertyTrees,DisableLoadExtensionCommandLineSwitch"),
	)

	// An API key, made on the settings page.
	s.signIn("erin", password)
	s.open("/settings/api_tokens")
	s.run("name a token", chromedp.SendKeys("#name", "Omnivore extension", chromedp.ByID))
	s.submit(`form input[name=action][value=create] ~ p button[type=submit]`)
	token := s.text("#secret")

	// A page on a site of its own.
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/blank" {
			// Nothing readable: Hearth refuses to save it.
			fmt.Fprint(w, `<html><head><title>Blank</title></head><body><main></main></body></html>`)
			return
		}
		fmt.Fprint(w, article("Proofing baskets"))
	}))
	t.Cleanup(page.Close)
	pageURL := page.URL + "/proofing"

	// The extension's options page, filled in as the member does.
	id := extensionID(t, s.ctx)
	opts, cancel := chromedp.NewContext(s.ctx)
	defer cancel()
	setKey := func(apiURL, key string) {
		t.Helper()
		var loaded, stored bool
		err := chromedp.Run(opts,
			chromedp.Navigate("chrome-extension://"+id+"/views/options.html"),
			// The page fills its fields from the extension's storage
			// once loaded: typing before that would be overwritten.
			chromedp.Evaluate(untilJS(`const v = await chrome.storage.local.get(null);
				return document.getElementById('api-key').value === (v.omnivoreApiKey ?? '') && document.getElementById('api-url').value === (v.omnivoreApiUrl ?? '');`), &loaded, awaitPromise),
			chromedp.SetValue("#api-url", apiURL, chromedp.ByID),
			chromedp.Click("#save-api-url-btn", chromedp.ByID),
			chromedp.SetValue("#api-key", key, chromedp.ByID),
			chromedp.Click("#save-api-key-btn", chromedp.ByID),
			// The toolbar stays until the test has read it.
			chromedp.Evaluate(`chrome.storage.local.set({autoDismissTime: "600000"})`, nil, awaitPromise),
			chromedp.Evaluate(untilJS(`const v = await chrome.storage.local.get(null);
				return v.omnivoreApiKey === `+jsString(key)+` && v.omnivoreApiUrl === `+jsString(apiURL)+`;`), &stored, awaitPromise),
		)
		if err != nil || !loaded || !stored {
			t.Fatalf("the options page: %v (fields loaded %v, stored %v)", err, loaded, stored)
		}
	}
	// press presses the toolbar button on the tab, showing pageURL.
	press := func(pageURL string) {
		t.Helper()
		s.run("open the page", chromedp.Navigate(pageURL), chromedp.WaitReady("body", chromedp.ByQuery))
		clickToolbarButton(t, s.ctx, pageURL)
	}
	// toolbar waits until the page's toolbar (the extension's shadow
	// root) satisfies cond, a JavaScript expression on its root.
	toolbar := func(what, cond string) {
		t.Helper()
		var ok bool
		err := chromedp.Run(s.ctx, chromedp.Evaluate(untilJS(`const root = document.querySelector('#omnivore-extension-root')?.shadowRoot;
			return !!root && (`+cond+`);`), &ok, awaitPromise))
		if err == nil && !ok {
			err = errors.New("not within a minute")
		}
		if err != nil {
			var html string
			ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
			defer cancel()
			_ = chromedp.Run(ctx, chromedp.Evaluate(`(() => { const root = document.querySelector('#omnivore-extension-root')?.shadowRoot; return root ? 'status: ' + root.querySelector('.omnivore-toast-statusBox')?.innerHTML + ' logged out: ' + root.querySelector('#omnivore-logged-out-status')?.textContent : 'no toolbar'; })()`, &html))
			t.Fatalf("the toolbar never showed %s: %v\n%.2000s", what, err, html)
		}
	}

	setKey(site, token)
	press(pageURL)
	// The status box turns to Omnivore's success mark (its green).
	toolbar("success", `root.querySelector('.omnivore-toast-statusBox').innerHTML.includes('#32D74B')`)
	var found struct {
		Search struct {
			Edges []struct {
				Node struct {
					ID, Title, URL string
					IsArchived     bool
				}
			}
		}
	}
	gql(t, token, `{ search(query: "in:inbox") { ... on SearchSuccess { edges { node { id title url isArchived } } } } }`, &found)
	if len(found.Search.Edges) != 1 || found.Search.Edges[0].Node.Title != "Proofing baskets" || found.Search.Edges[0].Node.URL != pageURL {
		t.Fatalf("the inbox after saving: %+v", found)
	}
	var item struct {
		SavedItem struct {
			Article struct{ ContentText string }
		}
	}
	gql(t, token, fmt.Sprintf(`{ savedItem(query: {id: %q}) { article { contentText } } }`, found.Search.Edges[0].Node.ID), &item)
	if !strings.Contains(item.SavedItem.Article.ContentText, "The first paragraph of Proofing baskets") {
		t.Fatalf("the saved article: %+v", item)
	}

	// A page Hearth refuses (nothing readable in it): the status box
	// turns to Omnivore's failure mark (its red), and nothing is saved.
	press(page.URL + "/blank")
	toolbar("failure", `root.querySelector('.omnivore-toast-statusBox').innerHTML.includes('#C7372F')`)

	// A key the site does not know (revoked, mistyped): the toolbar says
	// so, and nothing more is saved.
	setKey(site, token[:len(token)-4]+"zzzz")
	press(pageURL)
	toolbar("that the member is not logged in", `root.querySelector('#omnivore-logged-out-status').textContent.includes('You are not logged in.')`)
	gql(t, token, `{ search(query: "in:all") { ... on SearchSuccess { edges { node { id title url isArchived } } } } }`, &found)
	if len(found.Search.Edges) != 1 {
		t.Fatalf("saved with an unknown key: %+v", found)
	}

	// The API URL at Hearth's Omnivore endpoint, where Omnivore's labels
	// and createHighlight are served; the member has two labels.
	gql(t, token, `mutation { a: createLabel(data: {name: "Rye", color: "#aa5500"}) { id } b: createLabel(data: {name: "Spelt", color: "#55aa00"}) { id } }`, nil)
	setKey(site+"/omnivore", token)
	levain := page.URL + "/levain"
	press(levain)
	toolbar("success at the Omnivore endpoint", `root.querySelector('.omnivore-toast-statusBox').innerHTML.includes('#32D74B')`)
	gql(t, token, `{ search(query: "in:inbox sort:saved-desc") { ... on SearchSuccess { edges { node { id title url isArchived } } } } }`, &found)
	if len(found.Search.Edges) != 2 || found.Search.Edges[0].Node.URL != levain {
		t.Fatalf("the inbox after saving at the Omnivore endpoint: %+v", found)
	}
	levainID := found.Search.Edges[0].Node.ID
	inShadow := func(js string) {
		t.Helper()
		s.run(js, chromedp.Evaluate(`(() => { const root = document.querySelector('#omnivore-extension-root').shadowRoot; `+js+`; })()`, nil))
	}

	// Labels: the toolbar lists the member's (fetched with Omnivore's
	// labels), and picking one sets it on the item.
	inShadow(`root.querySelector('#omnivore-toast-edit-labels-btn').click()`)
	toolbar("the member's labels", `[...root.querySelectorAll('#omnivore-edit-labels-list button')].map(b => b.textContent.trim()).join(',') === 'Rye,Spelt'`)
	inShadow(`[...root.querySelectorAll('#omnivore-edit-labels-list button')].find(b => b.textContent.trim() === 'Spelt').click()`)
	toolbar("the labels updated", `root.querySelector('#omnivore-edit-labels-status').textContent.includes('Labels Updated')`)
	var labelled struct {
		Search struct {
			Edges []struct{ Node struct{ ID string } }
		}
	}
	gql(t, token, `{ search(query: "label:Spelt") { ... on SearchSuccess { edges { node { id } } } } }`, &labelled)
	if len(labelled.Search.Edges) != 1 || labelled.Search.Edges[0].Node.ID != levainID {
		t.Fatalf("label:Spelt after picking it in the toolbar: %+v", labelled)
	}

	// "Add note": the note is saved on the item, where the reader and
	// the plugins' search show it.
	// (Typed, then Ctrl+Enter: the form's Save button submits the form
	// before the extension's handler stops it, which reloads the page.)
	inShadow(`root.querySelector('#omnivore-toast-add-note-btn').click()`)
	toolbar("the note's field", `root.querySelector('#omnivore-add-note-row').getAttribute('data-state') === 'open' && root.activeElement === root.querySelector('#omnivore-add-note-textarea')`)
	s.run("write the note", chromedp.KeyEvent("Feed the levain twice a day."), chromedp.KeyEvent("\r", chromedp.KeyModifiers(input.ModifierCtrl)))
	toolbar("the note saved", `root.querySelector('#omnivore-add-note-status').textContent.includes('Note updated.')`)
	var noted struct {
		Search struct {
			Edges []struct {
				Node struct {
					ID         string
					Highlights []struct {
						Type       string
						Annotation string
					}
				}
			}
		}
	}
	gql(t, token, `{ search(query: "has:highlights") { ... on SearchSuccess { edges { node { id highlights { type annotation } } } } } }`, &noted)
	if e := noted.Search.Edges; len(e) != 1 || e[0].Node.ID != levainID || len(e[0].Node.Highlights) != 1 ||
		e[0].Node.Highlights[0].Type != "NOTE" || e[0].Node.Highlights[0].Annotation != "Feed the levain twice a day." {
		t.Fatalf("the note in search: %+v", noted)
	}
	s.open("/library/item/" + levainID)
	var shown []string
	s.run("read the reader's notes", chromedp.Evaluate(`[...document.querySelectorAll('#hl-list li')].map(li => (li.querySelector('blockquote') ? 'quote ' : '') + li.querySelector('textarea').value)`, &shown))
	if len(shown) != 1 || shown[0] != "Feed the levain twice a day." {
		t.Fatalf("the reader's highlights and notes: %q", shown)
	}
}

// clickToolbarButton does what pressing the extension's toolbar button on
// the tab showing tabURL does: Chromium's toolbar cannot be clicked
// through DevTools, so its action.onClicked listener (background.ts) is
// dispatched in the extension's service worker with that tab. The
// listener injects content.js, makes the task queue the toolbar's later
// actions run in, and sends the tab savePage.
func clickToolbarButton(t *testing.T, ctx context.Context, tabURL string) {
	t.Helper()
	targets, err := chromedp.Targets(ctx)
	if err != nil {
		t.Fatalf("list targets: %v", err)
	}
	for _, tg := range targets {
		if strings.HasPrefix(tg.URL, "chrome-extension://") && tg.Type == "service_worker" {
			// Attached until the test ends: closing the attachment
			// stops the worker, and the queue with it.
			sw, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(tg.TargetID))
			t.Cleanup(cancel)
			var tabs string
			err := chromedp.Run(sw, chromedp.Evaluate(`(async () => {
				const tabs = await chrome.tabs.query({});
				const tab = tabs.find(t => t.url === `+jsString(tabURL)+`);
				if (!tab) return tabs.map(t => t.url).join(' ');
				chrome.action.onClicked.dispatch(tab);
				return '';
			})()`, &tabs, awaitPromise))
			if err != nil || tabs != "" {
				t.Fatalf("press the toolbar button: %v (no tab at %s among %s)", err, tabURL, tabs)
			}
			return
		}
	}
	t.Fatal("the extension's service worker is not running")
}

// extensionID waits for the loaded extension's service worker and returns
// the extension's id (the host of its chrome-extension:// URL).
func extensionID(t *testing.T, ctx context.Context) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		targets, err := chromedp.Targets(ctx)
		if err != nil {
			t.Fatalf("list targets: %v", err)
		}
		for _, tg := range targets {
			if rest, ok := strings.CutPrefix(tg.URL, "chrome-extension://"); ok && tg.Type == "service_worker" {
				return strings.SplitN(rest, "/", 2)[0]
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the extension's service worker never started: is it loaded (--load-extension)?")
	return ""
}

// untilJS is a JavaScript expression awaiting until body (an async
// function's body) returns true, trying every 100 ms for a minute at most
// (a backstop, not a duration asserted); it is true when body was.
func untilJS(body string) string {
	return `(async () => { const f = async () => { ` + body + ` };
		for (let i = 0; i < 600; i++) { if (await f()) return true; await new Promise(r => setTimeout(r, 100)); }
		return false; })()`
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return fmt.Sprintf("%q", s)
}
