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
// it. Chromium's toolbar button cannot be clicked from DevTools, so the
// test runs what the button's handler runs (background.ts's
// action.onClicked: inject content.js into the tab, then send it savePage
// with a new clientRequestId) from the extension's options page, which
// holds the same extension APIs; from there on it is the extension's own
// code: content.js sends the page's HTML and title to its service worker,
// which sends savePage to the site and tells the page's toolbar how it
// went.
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
	setKey := func(key string) {
		t.Helper()
		var loaded, stored bool
		err := chromedp.Run(opts,
			chromedp.Navigate("chrome-extension://"+id+"/views/options.html"),
			// The page fills its fields from the extension's storage
			// once loaded: typing before that would be overwritten.
			chromedp.Evaluate(untilJS(`const v = await chrome.storage.local.get(null);
				return document.getElementById('api-key').value === (v.omnivoreApiKey ?? '') && document.getElementById('api-url').value === (v.omnivoreApiUrl ?? '');`), &loaded, awaitPromise),
			chromedp.SetValue("#api-url", site, chromedp.ByID),
			chromedp.Click("#save-api-url-btn", chromedp.ByID),
			chromedp.SetValue("#api-key", key, chromedp.ByID),
			chromedp.Click("#save-api-key-btn", chromedp.ByID),
			// The toolbar stays until the test has read it.
			chromedp.Evaluate(`chrome.storage.local.set({autoDismissTime: "600000"})`, nil, awaitPromise),
			chromedp.Evaluate(untilJS(`const v = await chrome.storage.local.get(null);
				return v.omnivoreApiKey === `+jsString(key)+` && v.omnivoreApiUrl === `+jsString(site)+`;`), &stored, awaitPromise),
		)
		if err != nil || !loaded || !stored {
			t.Fatalf("the options page: %v (fields loaded %v, stored %v)", err, loaded, stored)
		}
	}
	// press does what the toolbar button's handler does, on the tab
	// showing pageURL.
	press := func(pageURL string) {
		t.Helper()
		s.run("open the page", chromedp.Navigate(pageURL), chromedp.WaitReady("body", chromedp.ByQuery))
		err := chromedp.Run(opts, chromedp.Evaluate(`(async () => {
			const tab = (await chrome.tabs.query({})).find(t => t.url === `+jsString(pageURL)+`);
			await chrome.scripting.executeScript({target: {tabId: tab.id}, files: ['content.js']});
			chrome.tabs.sendMessage(tab.id, {message: 'savePage', clientRequestId: crypto.randomUUID()}).catch(() => {});
		})()`, nil, awaitPromise))
		if err != nil {
			t.Fatalf("press the toolbar button: %v", err)
		}
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

	setKey(token)
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
	setKey(token[:len(token)-4] + "zzzz")
	press(pageURL)
	toolbar("that the member is not logged in", `root.querySelector('#omnivore-logged-out-status').textContent.includes('You are not logged in.')`)
	gql(t, token, `{ search(query: "in:all") { ... on SearchSuccess { edges { node { id title url isArchived } } } } }`, &found)
	if len(found.Search.Edges) != 1 {
		t.Fatalf("saved with an unknown key: %+v", found)
	}
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
