//go:build browser

// Package browser is Hearth's browser suite:
// a Caddy built from this tree, started in this process from a Caddyfile
// on 127.0.0.1:18280 (admin localhost:12219), driven by Debian's Chromium
// through the DevTools protocol (github.com/chromedp/chromedp). Every page
// a member or visitor sees is checked with axe-core (npm, this folder's
// package-lock.json) at 360 px and 1280 px, in light and dark mode, and
// must not scroll sideways at 360 px; a screenshot of each goes to
// build/screenshots/ at the top of the tree (a CI artefact, not committed).
//
// Run it (see README.md): npm ci here, then from the top of the tree
//
//	go test -tags nobadger,nomysql,nopgx,browser ./interop/browser/
//
// Chromium is found as $HEARTH_CHROMIUM or chromium on PATH. When it is
// missing the suite fails, unless HEARTH_BROWSER_SKIP=1 says to skip it
// (for a machine that cannot install it; CI never sets it).
package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip19"
	"github.com/pquerna/otp/totp"

	_ "github.com/hearthkit/caddy-hearth/caddymodule"
	"github.com/hearthkit/caddy-hearth/internal/testcaddy"
)

const (
	site      = "http://127.0.0.1:18280"
	admin     = "localhost:12219"
	siteTitle = "Maple Street Commons"
	member    = "alice"
	password  = "correct horse battery"
)

// caddyfile is the suite's site: every Hearth service in one site block,
// nothing else answering /, so the landing page shows.
func caddyfile(dir string) string {
	return testcaddy.GlobalOptions(admin, dir, "\n\t\topen_registration") + fmt.Sprintf(`http://127.0.0.1:18280 {
	bind 127.0.0.1
	hearth_oauth {
		instance_title %q
	}
	hearth_graphql {
		# The image suite saves an article from a loopback origin.
		allow_private_addresses
	}
	hearth_directory
}
`, siteTitle)
}

// chromium finds the browser, or fails (skips only when told to).
func chromium(t *testing.T) string {
	t.Helper()
	path := testcaddy.Chromium()
	if path == "" {
		if os.Getenv("HEARTH_BROWSER_SKIP") == "1" {
			t.Skip("browser suite skipped: HEARTH_BROWSER_SKIP=1 and no Chromium (apt-get install chromium)")
		}
		t.Fatal("Chromium not found: apt-get install chromium, or set HEARTH_CHROMIUM (HEARTH_BROWSER_SKIP=1 skips the suite)")
	}
	return path
}

// axeSource is axe-core from this folder's node_modules (npm ci).
func axeSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("node_modules/axe-core/axe.min.js")
	if err != nil {
		t.Fatalf("axe-core: %v (run npm ci in interop/browser)", err)
	}
	return string(b)
}

// suite is one Chromium tab on the site, with what each check needs.
type suite struct {
	// base is the site the tab opens (site unless a test serves another).
	base     string
	t        *testing.T
	ctx      context.Context
	axe      string
	shotsDir string
}

// newSuite starts Chromium with the suite's options and more (a test's
// own flags, such as an extension to load).
func newSuite(t *testing.T, more ...chromedp.ExecAllocatorOption) *suite {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.Flag("lang", "en-GB"),
	)
	opts = append(opts, more...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelTime := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "build", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &suite{base: site, t: t, ctx: ctx, axe: axeSource(t), shotsDir: dir}
}

func (s *suite) run(what string, actions ...chromedp.Action) {
	s.t.Helper()
	if err := chromedp.Run(s.ctx, actions...); err != nil {
		s.t.Fatalf("%s: %v", what, err)
	}
}

// open navigates to path and waits for the page's main element. The waits
// of the suite are a minute: a backstop for Chromium on a loaded machine,
// never a duration asserted.
func (s *suite) open(path string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.Navigate(s.base+path), chromedp.WaitReady("main", chromedp.ByQuery)); err != nil {
		s.t.Fatalf("open %s (a page with a main element): %v", path, err)
	}
}

// submit clicks the button matching sel and waits for the next page.
func (s *suite) submit(sel string) {
	s.t.Helper()
	var before string
	s.run("read location", chromedp.Evaluate(`String(performance.timeOrigin)`, &before))
	s.run("click "+sel, chromedp.Click(sel, chromedp.ByQuery, chromedp.NodeVisible))
	s.awaitNewPage(before, "clicking "+sel)
}

// awaitNewPage waits until the document that started at before (its
// performance.timeOrigin) is replaced by a new one with a main element.
// Evaluating while the old one goes away fails; that is tried again.
func (s *suite) awaitNewPage(before, after string) {
	s.t.Helper()
	cond := fmt.Sprintf(`document.readyState === "complete" && String(performance.timeOrigin) !== %q && !!document.querySelector("main")`, before)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var done bool
		err := chromedp.Run(s.ctx, chromedp.Evaluate(cond, &done))
		if err == nil && done {
			return
		}
		if time.Now().After(deadline) {
			var status string
			_ = chromedp.Run(s.ctx, chromedp.Evaluate(`[...document.querySelectorAll("[role=alert]")].map(e => e.textContent).join(" ")`, &status))
			s.t.Fatalf("no new page after %s (%v; the page alerts %q)", after, err, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *suite) text(sel string) string {
	s.t.Helper()
	var v string
	s.run("read "+sel, chromedp.Text(sel, &v, chromedp.ByQuery, chromedp.NodeVisible))
	return strings.TrimSpace(v)
}

// copyButtonWorks checks that the copy-button script ran under the page's
// Content-Security-Policy (allowed by its hash): the secret at sel has a
// Copy button, and pressing it says what happened.
func (s *suite) copyButtonWorks(sel string) {
	s.t.Helper()
	// The button row the script put right after the secret's [data-copy]
	// element (sel itself or the block around it).
	row := fmt.Sprintf(`(() => { const e = document.querySelector(%q); const c = e && e.closest("[data-copy]"); const r = c && c.nextElementSibling; return r && r.querySelector("button.copy") ? r : null; })()`, sel)
	var found bool
	s.run(sel+": copy button", chromedp.Evaluate(row+` !== null`, &found))
	if !found {
		s.t.Fatalf("%s has no Copy button (did the script run?)", sel)
	}
	s.run(sel+": press Copy", chromedp.Evaluate(row+`.querySelector("button.copy").click()`, nil))
	s.run(sel+": wait for the copy status", chromedp.Poll(row+`.querySelector("[role=status]").textContent.trim() !== ""`, nil,
		chromedp.WithPollingTimeout(60*time.Second)))
}

// focusIsVisible tabs through the page as a keyboard user does: each
// element that gets the focus shows a focus ring (an outline), and the
// skip link comes first (on a page without autofocus, skipFirst) and is
// on screen when focused.
func (s *suite) focusIsVisible(name string, skipFirst bool) {
	s.t.Helper()
	for i := 0; i < 12; i++ {
		var f struct {
			Tag     string  `json:"tag"`
			Text    string  `json:"text"`
			Outline string  `json:"outline"`
			Width   float64 `json:"width"`
			Left    float64 `json:"left"`
		}
		s.run(name+": tab", chromedp.KeyEvent(kb.Tab), chromedp.Evaluate(`(() => { const e = document.activeElement, c = getComputedStyle(e); return {tag: e.tagName.toLowerCase(), text: (e.textContent || e.name || "").trim().slice(0, 40), outline: c.outlineStyle, width: parseFloat(c.outlineWidth) || 0, left: e.getBoundingClientRect().left}; })()`, &f))
		if f.Tag == "body" {
			break
		}
		if f.Outline == "none" || f.Width < 2 {
			s.t.Errorf("%s: %s %q has the focus without a visible focus ring (outline %s %gpx)", name, f.Tag, f.Text, f.Outline, f.Width)
		}
		if skipFirst && i == 0 && (f.Text != "Skip to content" || f.Left < 0) {
			s.t.Errorf("%s: the first Tab reaches %s %q at x=%g, want the skip link on screen", name, f.Tag, f.Text, f.Left)
		}
	}
}

// count is how many elements match sel on the page.
func (s *suite) count(sel string) int {
	s.t.Helper()
	var n int
	s.run("count "+sel, chromedp.Evaluate(fmt.Sprintf(`document.querySelectorAll(%q).length`, sel), &n))
	return n
}

func (s *suite) location() string {
	s.t.Helper()
	var v string
	s.run("read location", chromedp.Location(&v))
	return v
}

type violation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// check runs the page checks on the page shown now, named name: at 360
// and 1280 px, light and dark, axe-core finds no violation (WCAG 2.1 AA
// and best practices), at 360 px nothing scrolls sideways, the title
// names the site; a screenshot of each goes to build/screenshots.
func (s *suite) check(name string) {
	s.t.Helper()
	var title string
	s.run(name+": title", chromedp.Title(&title))
	if !strings.Contains(title, siteTitle) {
		s.t.Errorf("%s: title %q does not name the site %q", name, title, siteTitle)
	}
	for _, width := range []int64{360, 1280} {
		for _, scheme := range []string{"light", "dark"} {
			variant := fmt.Sprintf("%s-%d-%s", name, width, scheme)
			s.run(variant+": emulate",
				chromedp.EmulateViewport(width, 800),
				emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}),
				// Two frames: the new size and colours are laid out.
				chromedp.Evaluate(`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, nil, awaitPromise),
			)
			s.axeClean(variant)
			s.controlsUseAccent(variant)
			// No broken image: every img is drawn (an image not stored is
			// a placeholder without an address, not an img).
			var broken string
			s.run(variant+": images", chromedp.Poll(`[...document.images].every(i => i.complete)`, nil, chromedp.WithPollingTimeout(60*time.Second)),
				chromedp.Evaluate(`[...document.images].filter(i => i.naturalWidth === 0).map(i => i.outerHTML.slice(0, 120)).join(", ")`, &broken))
			if broken != "" {
				s.t.Errorf("%s: broken images: %s", variant, broken)
			}
			// Nothing shown may stick out on the left either (that does
			// not scroll: it is cut off).
			var cut string
			s.run(variant+": left edge", chromedp.Evaluate(`[...document.querySelectorAll("body *")].filter(e => { const r = e.getBoundingClientRect(); return r.width > 1 && r.height > 1 && r.left < -1 && !e.closest(".skip") && e.checkVisibility(); }).map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className ? "." + e.className : "")).slice(0, 8).join(", ")`, &cut))
			if cut != "" {
				s.t.Errorf("%s: cut off on the left: %s", variant, cut)
			}
			if width == 360 {
				var sw, cw int64
				s.run(variant+": widths",
					chromedp.Evaluate(`document.scrollingElement.scrollWidth`, &sw),
					chromedp.Evaluate(`document.scrollingElement.clientWidth`, &cw))
				if sw > cw {
					var wide string
					s.run(variant+": widest", chromedp.Evaluate(`[...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > document.scrollingElement.clientWidth).map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className ? "." + e.className : "")).slice(0, 8).join(", ")`, &wide))
					s.t.Errorf("%s: scrolls sideways at 360 px: scrollWidth %d > clientWidth %d (too wide: %s)", variant, sw, cw, wide)
				}
			}
			var png []byte
			s.run(variant+": screenshot", chromedp.FullScreenshot(&png, 100))
			if err := os.WriteFile(filepath.Join(s.shotsDir, variant+".png"), png, 0o644); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	s.run(name+": reset", emulation.SetEmulatedMedia().WithFeatures(nil), chromedp.EmulateViewport(1280, 800))
}

// controlsUseAccent checks that the native controls drawn in the
// browser's own colour (checkboxes, radio buttons, progress bars, sliders)
// take the site's accent (--accent) in the colour scheme shown: by default
// Chromium draws them in its blue, which clashes with the pages.
func (s *suite) controlsUseAccent(name string) {
	s.t.Helper()
	var off string
	s.run(name+": accent of controls", chromedp.Evaluate(`(() => {
	const probe = document.createElement("span");
	probe.style.color = "var(--accent)";
	document.body.append(probe);
	const accent = getComputedStyle(probe).color;
	probe.remove();
	return [...document.querySelectorAll("input[type=checkbox], input[type=radio], input[type=range], progress")]
		.filter(e => getComputedStyle(e).accentColor !== accent)
		.map(e => e.outerHTML.slice(0, 80) + " is " + getComputedStyle(e).accentColor + ", not " + accent).slice(0, 4).join("; ");
})()`, &off))
	if off != "" {
		s.t.Errorf("%s: controls not in the site's accent: %s", name, off)
	}
}

// axeClean runs axe-core on the page as it is now (a state of it: a
// dialog or popup open) and reports each violation as named.
func (s *suite) axeClean(name string) {
	s.t.Helper()
	var loaded bool
	s.run(name+": axe-core loaded", chromedp.Evaluate(`typeof axe !== "undefined"`, &loaded))
	if !loaded {
		// Through the DevTools protocol, as an extension would: the
		// page's own CSP stays as it is.
		s.run(name+": inject axe-core", chromedp.Evaluate(s.axe+";true", nil))
	}
	var violations []violation
	s.run(name+": axe-core", chromedp.Evaluate(`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => ({target: n.target, html: n.html}))})))`, &violations, awaitPromise))
	for _, v := range violations {
		for _, n := range v.Nodes {
			s.t.Errorf("%s: axe %s (%s): %s at %v: %s", name, v.ID, v.Impact, v.Help, n.Target, n.HTML)
		}
	}
}

func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }

// api is a plain HTTP client for what an app (not the browser) does.
func api(t *testing.T, method, path, bearer string, form url.Values, out any) int {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, site+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// graphql posts query with bearer and returns the answer's errors' codes
// and its data.
func graphql(t *testing.T, bearer, query string) (codes []string, data string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, site+"/api/graphql", strings.NewReader(fmt.Sprintf(`{"query":%q}`, query)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Extensions struct {
				Code string `json:"code"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("graphql: HTTP %d: %v", resp.StatusCode, err)
	}
	for _, e := range r.Errors {
		codes = append(codes, e.Extensions.Code)
	}
	return codes, string(r.Data)
}

// registerAgent registers an agent in the directory with a signed
// registration event and returns its npub.
func registerAgent(t *testing.T) string {
	t.Helper()
	sk := nostr.GeneratePrivateKey()
	pk, err := nostr.GetPublicKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	evt := nostr.Event{PubKey: pk, Kind: 31339, CreatedAt: nostr.Now(), Tags: nostr.Tags{
		{"d", "agent"}, {"name", "Archivist"},
		{"purpose", "Keeps records of https://example.org/a/very/long/path/that/does/not/break/anywhere/at/all/on/a/phone"},
		{"capability", "archive"}, {"operator", "Library Co"},
	}}
	if err := evt.Sign(sk); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(evt)
	resp, err := http.Post(site+"/api/v1/agents/register", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("register an agent: HTTP %d %s", resp.StatusCode, b)
	}
	npub, err := nip19.EncodePublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	return npub
}

// registerApp registers an OAuth app as a Mastodon client does.
func registerApp(t *testing.T, name, website, redirectURI, scopes string) (clientID, clientSecret string) {
	t.Helper()
	var app struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	form := url.Values{"client_name": {name}, "redirect_uris": {redirectURI}, "scopes": {scopes}}
	if website != "" {
		form.Set("website", website)
	}
	if st := api(t, http.MethodPost, "/api/v1/apps", "", form, &app); st != http.StatusOK {
		t.Fatalf("register app: HTTP %d", st)
	}
	return app.ClientID, app.ClientSecret
}

const oob = "urn:ietf:wg:oauth:2.0:oob"

func authorizePath(clientID, scope string, extra ...string) string {
	q := url.Values{"client_id": {clientID}, "redirect_uri": {oob}, "response_type": {"code"}, "scope": {scope}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return "/oauth/authorize?" + q.Encode()
}

// exchange trades an authorization code for an access token.
func exchange(t *testing.T, clientID, clientSecret, code string) string {
	t.Helper()
	var tok struct {
		AccessToken string `json:"access_token"`
		Scope       string `json:"scope"`
	}
	st := api(t, http.MethodPost, "/oauth/token", "", url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "client_id": {clientID},
		"client_secret": {clientSecret}, "redirect_uri": {oob},
	}, &tok)
	if st != http.StatusOK || tok.AccessToken == "" {
		t.Fatalf("exchange the code: HTTP %d", st)
	}
	return tok.AccessToken
}

// startSite starts the suite's site (caddyfile) on a new store with the
// member username, and opens a Chromium tab.
func startSite(t *testing.T, username string) *suite {
	t.Helper()
	testcaddy.Start(t, caddyfile(t.TempDir()))
	testcaddy.AddMember(t, admin, username, password)
	return newSuite(t)
}

func TestMemberPagesInChromium(t *testing.T) {
	s := startSite(t, member)

	// A visitor: the landing page (nothing else answers /), the sign-in
	// page, a wrong password, the sign-up page.
	s.open("/")
	if h := s.text("main h1"); h != siteTitle {
		t.Fatalf("the landing page's heading is %q", h)
	}
	s.check("landing")
	s.focusIsVisible("landing", true)
	s.open("/auth/sign_in")
	s.check("sign-in")
	s.focusIsVisible("sign-in", false)
	s.run("type a wrong password",
		chromedp.SendKeys("#username", member, chromedp.ByID),
		chromedp.SendKeys("#password", "not the password", chromedp.ByID))
	s.submit(`main button[type=submit]`)
	if got := s.text("#form-error"); got == "" {
		t.Fatal("a wrong password shows no error")
	}
	s.check("sign-in-error")
	s.open("/auth/sign_up")
	s.check("sign-up")

	// Sign in.
	s.signIn(member, password)
	// The site serves the library (hearth_graphql): members land there.
	if loc := s.location(); loc != site+"/library" {
		t.Fatalf("after signing in the browser is at %s", loc)
	}
	s.open("/settings")
	s.check("settings")
	s.run("open the member menu", chromedp.Click(`details.menu > summary`, chromedp.ByQuery, chromedp.NodeVisible))
	s.check("member-menu")

	// An API token made on the settings page, shown once.
	s.open("/settings/api_tokens")
	s.check("api-tokens")
	s.run("name a token", chromedp.SendKeys("#name", "laptop script", chromedp.ByID))
	s.submit(`form input[name=action][value=create] ~ p button[type=submit]`)
	secret := s.text("#secret")
	if codes, data := graphql(t, secret, `query { me { username } }`); len(codes) > 0 || !strings.Contains(data, member) {
		t.Fatalf("the token the page showed: %v %s", codes, data)
	}
	s.check("api-token-created")
	s.copyButtonWorks("#secret")
	// Under it, where to paste it: the browser extension's API URL, copyable.
	if got := s.text("#extension-url"); got != site+"/omnivore" {
		t.Fatalf("the extension's API URL on the page is %q, want %q", got, site+"/omnivore")
	}
	s.copyButtonWorks("#extension-url")
	// The member's own e-mail address (for the site's OpenID apps).
	s.open("/settings/email")
	s.check("email")
	s.open("/settings/export")
	s.check("export")
	// The Import page, and a wallabag export (with its content, so nothing
	// is fetched) uploaded through its form.
	s.open("/settings/import")
	s.check("import")
	wallabag, err := filepath.Abs("../../handlers/importer/testdata/wallabag.json")
	if err != nil {
		t.Fatal(err)
	}
	s.run("choose the file", chromedp.SetUploadFiles("#file", []string{wallabag}, chromedp.ByID))
	s.submit(`form[enctype="multipart/form-data"] button[type=submit]`)
	if n := s.count(`article[id^="job-"]`); n != 1 {
		t.Fatalf("%d imports listed after uploading one", n)
	}
	if n := s.count("progress"); n != 1 {
		t.Fatalf("%d progress bars for one import, want 1 (its check of the controls' accent would check none)", n)
	}
	s.check("import-job")

	// An app registered as a Mastodon client does, approved in the browser.
	clientID, clientSecret := registerApp(t, "Pinecone for Mastodon", "https://pinecone.example/about", oob, "read write")
	s.open(authorizePath(clientID, "read write"))
	s.check("consent")
	s.submit(`button[name=decision][value=approve]`)
	code := s.text("#authorization-code")
	s.check("code")
	s.copyButtonWorks("#authorization-code")
	access := exchange(t, clientID, clientSecret, code)
	var acct struct {
		Username string `json:"username"`
	}
	if st := api(t, http.MethodGet, "/api/v1/accounts/verify_credentials", access, nil, &acct); st != http.StatusOK || acct.Username != member {
		t.Fatalf("verify_credentials with the app's token: HTTP %d %+v", st, acct)
	}
	// Point 1: the app cannot make itself an API token that would outlive it.
	if codes, data := graphql(t, access, `mutation { createApiToken(data: {name: "forever", expiry: NEVER}) { secret } }`); len(codes) != 1 || codes[0] != "FORBIDDEN" || strings.Contains(data, "hat_") {
		t.Fatalf("createApiToken with the app's OAuth token: %v %s", codes, data)
	}

	// The app asks again for what it holds: no consent page, the code at
	// once (Mastodon's matching token); it works too.
	s.open(authorizePath(clientID, "read"))
	if n := s.count(`button[name=decision]`); n != 0 {
		t.Fatalf("asking again for granted scopes shows the consent page")
	}
	exchange(t, clientID, clientSecret, s.text("#authorization-code"))

	// The member revokes the app on Authorized applications: its token
	// is refused at once; the member's own API token still works.
	s.open("/oauth/authorized_applications")
	s.check("authorized-apps")
	// Revoking asks first (a details element, no script needed).
	s.run("open the revoke step", chromedp.Click(`summary[aria-label="Revoke Pinecone for Mastodon…"]`, chromedp.ByQuery, chromedp.NodeVisible))
	s.check("authorized-apps-confirm")
	s.submit(`details.confirm[open] button.danger`)
	s.check("authorized-apps-revoked")
	if st := api(t, http.MethodGet, "/api/v1/accounts/verify_credentials", access, nil, nil); st != http.StatusUnauthorized {
		t.Fatalf("verify_credentials after revoking the app: HTTP %d, want 401", st)
	}
	if codes, _ := graphql(t, access, `query { me { username } }`); len(codes) == 0 {
		t.Fatal("the revoked app's token still reads saved items")
	}
	if codes, data := graphql(t, secret, `query { me { username } }`); len(codes) > 0 || !strings.Contains(data, member) {
		t.Fatalf("the member's own API token after revoking the app: %v %s", codes, data)
	}

	// The member deletes the API token, confirming first: it stops working.
	s.open("/settings/api_tokens")
	s.run("open the delete step", chromedp.Click(`summary[aria-label="Delete laptop script…"]`, chromedp.ByQuery, chromedp.NodeVisible))
	s.check("api-token-confirm-delete")
	s.submit(`details.confirm[open] button.danger`)
	if codes, _ := graphql(t, secret, `query { me { username } }`); len(codes) == 0 {
		t.Fatal("a deleted API token still works")
	}

	// Deny: the page says so in plain words, without the protocol's code.
	otherID, _ := registerApp(t, "Quill", "", oob, "read")
	s.open(authorizePath(otherID, "read"))
	s.submit(`button[name=decision][value=deny]`)
	if body := s.text("main"); !strings.Contains(body, "You denied Quill access") || strings.Contains(body, "access_denied") {
		t.Fatalf("the page after denying says %q", body)
	}
	s.check("authorize-denied")

	// A page with an error a person reads.
	s.open("/oauth/authorize?client_id=nobody&response_type=code&redirect_uri=" + url.QueryEscape(oob))
	s.check("authorize-error")

	// Directory profile pages: an agent registered as agents do (a signed
	// Nostr event, go-nostr), with long unbroken text, and one not listed.
	npub := registerAgent(t)
	s.open("/agents/" + npub)
	if h := s.text("main h1"); !strings.HasPrefix(h, "Archivist") {
		t.Fatalf("the agent's page is headed %q", h)
	}
	s.check("agent")
	s.open("/agents/npub1sg6plzptd64u62a878hep2kev88swjh3tw00gjsfl8f237lmu63q0uf63m")
	s.check("agent-not-found")
	// The browse page, filtered through its form as a person does. It
	// lists the served document, rebuilt a moment after a registration
	// (regenerate_delay, 1 s by default, later on a busy machine): reloaded
	// until it shows the agent, as a person would.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		s.open("/directory")
		body := s.text("main")
		if strings.Contains(body, "One agent.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the directory of one agent says %q", body)
		}
	}
	s.check("directory")
	s.run("search the directory", chromedp.SendKeys("#q", "records", chromedp.ByID))
	s.submit(`main form[role=search] button[type=submit]`)
	if body := s.text("main"); !strings.Contains(body, "1 of 1 agent matches") || !strings.Contains(body, "Archivist") {
		t.Fatalf("the directory searched for records says %q", body)
	}
	s.check("directory-search")
	// A path nothing answers, a member's public page, and the API's page
	// for a browser.
	s.open("/settingz")
	s.check("not-found")
	s.open("/@alice")
	s.check("member-profile")
	s.open("/api/graphql")
	s.check("graphql-endpoint")

	// Sign out: the page the member lands on says so.
	s.open("/auth/sign_out")
	s.check("sign-out")
	s.submit(`main button[type=submit]`)
	if got := s.text(`main p.notice[role=status]`); got != "You are signed out." {
		t.Errorf("after signing out the page says %q", got)
	}
	s.check("signed-out")
	s.open("/settings")
	if loc := s.location(); !strings.HasPrefix(loc, site+"/auth/sign_in") {
		t.Fatalf("after signing out /settings shows %s", loc)
	}

	s.accountFlows()
}

// accountFlows is bob's account page: end a session, change the password,
// two-factor sign-in with its recovery codes, a reset link's page, and
// deleting the account.
func (s *suite) accountFlows() {
	t := s.t
	const bob, newPassword = "bob", "a new and longer password"
	testcaddy.AddMember(t, admin, bob, password)
	s.signIn(bob, password)
	s.open("/settings/api_tokens")
	s.run("name a token", chromedp.SendKeys("#name", "bob's script", chromedp.ByID))
	s.submit(`form input[name=action][value=create] ~ p button[type=submit]`)
	bobToken := s.text("#secret")
	s.open("/settings/account")
	s.check("account")
	// In sections with in-page links, and no taller than two screens at
	// 1280×800 (the forms fold until asked for).
	var height int64
	var anchors []string
	s.run("the account page's height and links",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Evaluate(`document.scrollingElement.scrollHeight`, &height),
		chromedp.Evaluate(`[...document.querySelectorAll('nav.toc a')].filter(a => !document.getElementById(a.hash.slice(1))).map(a => a.hash)`, &anchors))
	if height > 1600 || len(anchors) != 0 || s.count(`nav.toc a[href^="#"]`) < 5 {
		t.Errorf("account page: %d px tall at 1280×800 (want at most 1600), %d in-page links, broken: %v", height, s.count(`nav.toc a`), anchors)
	}

	// Confirming the password again (what GraphQL's updateAccount and
	// deleteAccount need when the sign-in is not recent): the page, then
	// back to the account page with its notice.
	s.open("/settings/account/confirm")
	s.check("account-confirm")
	s.run("type the password", chromedp.SendKeys("#current_password", password, chromedp.ByID))
	s.submit(`form[action="/settings/account/confirm"] button[type=submit]`)
	if loc := s.location(); loc != site+"/settings/account?done=confirmed" {
		t.Fatalf("after confirming the password: %s", loc)
	}

	// A session elsewhere (a program signing in), ended from the page
	// after its confirm step: that session is signed out.
	other := signInHTTP(t, bob, password)
	if !signedIn(t, other) {
		t.Fatal("the second session of bob does not work")
	}
	s.open("/settings/account")
	s.run("open the end-session step", chromedp.Click(`summary[aria-label^="End the session on"]`, chromedp.ByQuery, chromedp.NodeVisible))
	s.check("account-end-session")
	s.submit(`details.confirm[open] button.danger`)
	if signedIn(t, other) {
		t.Fatal("the session ended on the account page still works")
	}

	// Changing the password signs out the other sessions; the old
	// password no longer signs in, the new one does.
	other = signInHTTP(t, bob, password)
	s.open("/settings/account")
	s.run("open the password form", chromedp.Click(`details.fold:has(form[action="/settings/account/password"]) > summary`, chromedp.ByQuery, chromedp.NodeVisible))
	s.run("type the passwords",
		chromedp.SendKeys("#current_password", password, chromedp.ByID),
		chromedp.SendKeys("#new_password", newPassword, chromedp.ByID),
		chromedp.SendKeys("#password_confirmation", newPassword, chromedp.ByID))
	s.submit(`form[action="/settings/account/password"] button[type=submit]`)
	s.check("account-password-changed")
	if signedIn(t, other) {
		t.Fatal("another session survived the password change")
	}
	if signedIn(t, signInHTTP(t, bob, password)) || !signedIn(t, signInHTTP(t, bob, newPassword)) {
		t.Fatal("after the change the old password works or the new one does not")
	}

	// Two-factor sign-in: the setup page (QR code, key with a Copy
	// button), a code from the key (pquerna/otp, as an authenticator app
	// computes it), then the recovery codes shown once.
	s.open("/settings/account")
	s.run("type the password", chromedp.SendKeys("#start_password", newPassword, chromedp.ByID))
	s.submit(`form[action="/settings/account/two_factor/start"] button[type=submit]`)
	s.check("account-two-factor-setup")
	s.copyButtonWorks("#totp-key")
	code, err := totp.GenerateCode(s.text("#totp-key"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.run("type the code", chromedp.SendKeys("#confirm_code", code, chromedp.ByID))
	s.submit(`form[action="/settings/account/two_factor/confirm"] button[type=submit]`)
	var recovery []string
	s.run("read the recovery codes", chromedp.Evaluate(`[...document.querySelectorAll("#recovery-codes code")].map(c => c.textContent)`, &recovery))
	if len(recovery) != 10 {
		t.Fatalf("%d recovery codes shown, want 10", len(recovery))
	}
	s.check("account-recovery-codes")
	s.copyButtonWorks("#recovery-codes")
	// Shown once, so also offered as a file (made in the page from the codes
	// shown) and for printing.
	var file string
	s.run("read the recovery codes' download", chromedp.Evaluate(`(() => {
		const a = document.querySelector("#recovery-codes + p a.download");
		if (!a || a.getAttribute("download") !== "recovery-codes.txt") return "no download link";
		const [head, body] = a.href.split(",");
		return head === "data:text/plain;charset=utf-8" ? decodeURIComponent(body) : "not a text file: " + head;
	})()`, &file))
	if file != strings.Join(recovery, "\n")+"\n" {
		t.Fatalf("the recovery codes' file is %q, want the %d codes shown, one a line", file, len(recovery))
	}
	var printable bool
	s.run("find the Print button", chromedp.Evaluate(`document.querySelector("#recovery-codes + p button.print") !== null`, &printable))
	if !printable {
		t.Fatal("the recovery codes have no Print button")
	}

	// Signing in again asks for the second factor; a recovery code does.
	s.signOut()
	s.signIn(bob, newPassword)
	if loc := s.location(); !strings.HasPrefix(loc, site+"/auth/two_factor") {
		t.Fatalf("with two-factor sign-in on, the password leads to %s", loc)
	}
	s.check("two-factor")
	s.run("type a recovery code", chromedp.SendKeys("#code", recovery[0], chromedp.ByID))
	s.submit(`main button[type=submit]`)
	if loc := s.location(); loc != site+"/library" {
		t.Fatalf("after the recovery code the browser is at %s", loc)
	}

	// The page of a reset link the operator made (admin API, as `caddy
	// hearth member reset-link bob` does).
	var link struct {
		Path string `json:"path"`
	}
	resp, err := http.Post("http://"+admin+"/hearth/members/bob/reset_link", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&link); err != nil || resp.StatusCode != http.StatusCreated || link.Path == "" {
		t.Fatalf("reset link: HTTP %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	s.open(link.Path)
	s.check("reset-link")

	// Deleting the account: the username typed, the password; then
	// nothing of it works.
	s.open("/settings/account")
	s.run("open the deletion form", chromedp.Click(`details.fold:has(form[action="/settings/account/delete"]) > summary`, chromedp.ByQuery, chromedp.NodeVisible))
	s.run("confirm the deletion",
		chromedp.SendKeys("#confirm_username", bob, chromedp.ByID),
		chromedp.SendKeys("#delete_password", newPassword, chromedp.ByID))
	s.submit(`form[action="/settings/account/delete"] button.danger`)
	s.check("account-deleted")
	if codes, _ := graphql(t, bobToken, `query { me { username } }`); len(codes) == 0 {
		t.Fatal("the deleted member's API token still works")
	}
	if signedIn(t, signInHTTP(t, bob, newPassword)) {
		t.Fatal("the deleted member still signs in")
	}
}

// signIn signs in through the page.
func (s *suite) signIn(username, pw string) {
	s.t.Helper()
	s.open("/auth/sign_in")
	s.run("type the password",
		chromedp.SendKeys("#username", username, chromedp.ByID),
		chromedp.SendKeys("#password", pw, chromedp.ByID))
	s.submit(`main button[type=submit]`)
}

// signOut signs out through the page.
func (s *suite) signOut() {
	s.t.Helper()
	s.open("/auth/sign_out")
	s.submit(`main button[type=submit]`)
}

// signInHTTP signs in with a program's cookie jar (another device), as the
// sign-in form would; the client may be signed in or not (signedIn).
func signInHTTP(t *testing.T, username, pw string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodPost, site+"/auth/sign_in", strings.NewReader(url.Values{"username": {username}, "password": {pw}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", site)
	req.Header.Set("User-Agent", "hearth-browser-suite")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return c
}

// signedIn reports whether c's session opens the settings page.
func signedIn(t *testing.T, c *http.Client) bool {
	t.Helper()
	resp, err := c.Get(site + "/settings")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
