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
	startCaddy(t, recipe(t, t.TempDir(), web))
	req, _ := http.NewRequest(http.MethodPost, "http://"+admin+"/hearth/members", strings.NewReader(`{"username":"alice","password":"`+password+`"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("add alice: %v %v", err, resp)
	}
	resp.Body.Close()
	saveArticle(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.Flag("lang", "en-GB"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelTime := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// waitFor polls a JavaScript condition, as a member waits for the app.
	waitFor := func(what, cond string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var ok bool
			if err := chromedp.Run(ctx, chromedp.Evaluate(cond, &ok)); err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				var text string
				_ = chromedp.Run(ctx, chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &text))
				t.Fatalf("%s: not seen; the page says: %.600s", what, text)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	clickButton := func(text string) {
		t.Helper()
		waitFor("button "+text, fmt.Sprintf(`[...document.querySelectorAll("button")].some(b => b.innerText.trim() === %q)`, text))
		run("click "+text, chromedp.Evaluate(fmt.Sprintf(`[...document.querySelectorAll("button")].filter(b => b.innerText.trim() === %q).pop().click()`, text), nil))
	}

	// Sign in through the app's own form on localhost, with the address
	// Hearth reports there.
	run("open the app", chromedp.Navigate(appSite+"/"))
	clickButton("Sign In")
	waitFor("the sign-in form", `!!document.querySelector('input[placeholder="Email address"]')`)
	run("fill the form",
		chromedp.SendKeys(`input[placeholder="Email address"]`, "alice@localhost.invalid", chromedp.ByQuery),
		chromedp.SendKeys(`input[placeholder="Password"]`, password, chromedp.ByQuery))
	run("submit", chromedp.Click(`form button[type="submit"]`, chromedp.ByQuery))
	waitFor("the inbox with the saved article", `!document.querySelector('input[placeholder="Password"]') && document.body.innerText.includes(`+fmt.Sprintf("%q", articleTitle)+`)`)
	if strings.Contains(innerText(t, ctx), "Verify your email") {
		t.Fatal("the app shows the verification banner")
	}

	// Open the item: the reader shows its text.
	run("open the item", chromedp.Evaluate(fmt.Sprintf(`[...document.querySelectorAll("a, [role=link], h1, h2, h3, h4, p, span, div")].filter(e => e.children.length === 0 && e.innerText.trim() === %q)[0].click()`, articleTitle), nil))
	waitFor("the reader", `document.body.innerText.includes("knead the dough")`)

	// Hearth's own pages on the main host still answer in the same
	// browser: the app's service worker covers only its own host.
	run("open Hearth's sign-in page", chromedp.Navigate(mainSite+"/auth/sign_in"))
	waitFor("Hearth's sign-in page", `!!document.querySelector('main form input[name="username"]')`)
}

func innerText(t *testing.T, ctx context.Context) string {
	var s string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.body.innerText`, &s)); err != nil {
		t.Fatal(err)
	}
	return s
}

const articleTitle = "Baking Bread at Home"

// saveArticle saves an article for alice through Hearth's API with an API
// token made through the admin API, as an extension would.
func saveArticle(t *testing.T) {
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
	html := "<html><head><title>" + articleTitle + "</title></head><body><article><h1>" + articleTitle + "</h1>" +
		strings.Repeat("<p>Flour, water, salt and yeast make bread when you knead the dough and let it rise slowly overnight.</p>", 12) + "</article></body></html>"
	body, _ := json.Marshal(map[string]any{
		"query":     `mutation($data: AddArticleFromHtmlSnapshotInput!) { addArticleFromHtmlSnapshot(data: $data) }`,
		"variables": map[string]any{"data": map[string]any{"url": "https://bread.example/baking", "html": html}},
	})
	req, _ = http.NewRequest(http.MethodPost, mainSite+"/api/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || bytes.Contains(b, []byte(`"errors"`)) {
		t.Fatalf("addArticleFromHtmlSnapshot: %d %s", resp.StatusCode, b)
	}
}
