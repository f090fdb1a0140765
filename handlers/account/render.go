package account

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"unsafe"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage/members"
)

//go:embed templates/*.html templates/style.css templates/copy.js templates/passkey.js
var files embed.FS

var (
	signInTmpl    = parse("sign_in.html")
	signUpTmpl    = parse("sign_up.html")
	signOutTmpl   = parse("sign_out.html")
	settingsTmpl  = parse("settings.html")
	messageTmpl   = parse("message.html")
	landingTmpl   = parse("landing.html")
	accountTmpl   = parse("account.html")
	twoFactorTmpl = parse("two_factor.html")
	resetTmpl     = parse("reset.html")
	confirmTmpl   = parse("confirm.html")

	// The stylesheet is inlined in every page and allowed by its hash, so
	// the policy needs neither 'unsafe-inline' nor a stylesheet route.
	styleSheet = mustRead("templates/style.css")
	styleHash  = cspHash(styleSheet)

	// The copy-button script (templates/copy.js, kept free of comments
	// since every page loads it) gives each element with a data-copy
	// attribute a Copy button; without JavaScript the secret stays on the
	// page to select by hand. An element also marked data-download (the
	// recovery codes, shown only once: the server keeps their digests) gets
	// Download, a text file made in the page from the codes shown, and
	// Print. The script is a file (CopyScriptPath) allowed by its hash: the
	// script tag names the same hash as its integrity, so no other script,
	// even one served from this site, may run.
	copyScript     = mustRead("templates/copy.js")
	copyScriptHash = cspHash(copyScript)
	// Its URL names its version, so a browser that cached an older one for
	// a day (serveCopyScript) fetches the new one after an upgrade.
	copyScriptSrc = CopyScriptPath + "?v=" + url.QueryEscape(copyScriptHash[8:20])
	copyScriptTag = template.HTML(`<script src="` + html.EscapeString(copyScriptSrc) + `" integrity="` +
		html.EscapeString(strings.Trim(copyScriptHash, "'")) + `" defer></script>`)
)

func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

func parse(name string) *template.Template {
	return template.Must(template.New(name).ParseFS(files, "templates/"+name))
}

func mustRead(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// ContentSecurityPolicy is the policy Render sends. Pages that post a form
// which answers with a redirect to another origin (the OAuth approval page
// redirecting to a client's redirect URI) pass that origin in formActions,
// set the header themselves and then call Render, which keeps it: browsers
// apply form-action to the redirect too.
func (p *Pages) ContentSecurityPolicy(formActions ...string) string {
	fa := "'self'"
	for _, a := range formActions {
		if a = strings.Map(cspSafe, a); a != "" {
			fa += " " + a
		}
	}
	return policy(fa)
}

// policy is the pages' Content-Security-Policy with form-action fa.
func policy(fa string) string {
	return "default-src 'none'; script-src " + copyScriptHash + "; style-src " + styleHash + "; img-src 'self' data:; form-action " + fa +
		"; frame-ancestors 'none'; base-uri 'none'"
}

// cspSafe drops characters that would end or alter a CSP source expression.
func cspSafe(r rune) rune {
	if r <= ' ' || r == ';' || r == ',' || r == '\'' || r == 0x7f {
		return -1
	}
	return r
}

// setHeaders sets the security headers of every page. A page may already
// have set its own Content-Security-Policy (see ContentSecurityPolicy).
func (p *Pages) setHeaders(w http.ResponseWriter) {
	h := w.Header()
	if h.Get("Content-Security-Policy") == "" {
		h.Set("Content-Security-Policy", p.ContentSecurityPolicy())
	}
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	if h.Get("Referrer-Policy") == "" {
		h.Set("Referrer-Policy", "same-origin")
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
}

type layoutData struct {
	SiteName string
	// Script is the copy script's tag, built once (escaping its
	// attributes on every view cost allocations).
	Script template.HTML
	// Heading: the layout writes Title as the page's h1 (a page that
	// starts with its own leaves it false).
	Heading       bool
	Title         string
	FullTitle     string // Title · SiteName, or SiteName alone when they are the same
	CSS           template.CSS
	Member        *members.Member
	SettingsPages []SettingsPage
	CurrentPath   string
	// OnSettings and OnAccount mark the current page in the menu (computed
	// here: a template's eq costs a reflective call per page view).
	OnSettings       bool
	OnAccount        bool
	OpenRegistration bool
	ReferrerPolicy   string
	Body             template.HTML
	// writeBody, when set, writes the body instead of Body.
	writeBody func(*bytes.Buffer)
	// Head and Wide: see PageExtras.
	Head template.HTML
	Wide bool
	// Home is the site's library, linked first in the member menu (WithHome).
	Home string
	// NoLinks: see PageExtras.noLinks.
	NoLinks bool
}

// Render writes a page: content, executed with data, inside the shared
// layout (site header, profile menu listing the settings pages, sign-out
// button), with status and the security headers.
func (p *Pages) Render(w http.ResponseWriter, r *http.Request, status int, title string, content *template.Template, data any) {
	p.render(w, r, status, title, content, data, PageExtras{})
}

func (p *Pages) render(w http.ResponseWriter, r *http.Request, status int, title string, content *template.Template, data any, ex PageExtras) {
	body := getBuffer()
	defer putBuffer(body)
	if content != nil {
		if err := content.Execute(body, data); err != nil {
			p.opts.Logger.Error("render page", zap.String("page", content.Name()), zap.Error(err))
			body.Reset()
			status, title = http.StatusInternalServerError, "Something went wrong"
			_ = messageTmpl.Execute(body, message{Text: "This page could not be shown. Try again later."})
		}
	}
	// The body's bytes, not a copy: the layout copies them into the page
	// before the buffer goes back to the pool (deferred above).
	p.renderBody(w, r, status, title, template.HTML(unsafe.String(unsafe.SliceData(body.Bytes()), body.Len())), nil, ex)
}

// renderBody writes the page's content inside the layout: body, or what
// write writes (straight into the page, without a buffer of its own).
func (p *Pages) renderBody(w http.ResponseWriter, r *http.Request, status int, title string, body template.HTML, write func(*bytes.Buffer), ex PageExtras) {
	ld := layoutData{
		SiteName:         p.SiteName(),
		Title:            title,
		Heading:          true,
		CSS:              template.CSS(styleSheet),
		Member:           p.CurrentMember(r),
		CurrentPath:      r.URL.Path,
		OnSettings:       r.URL.Path == SettingsPath,
		OnAccount:        r.URL.Path == AccountPath,
		OpenRegistration: p.opts.OpenRegistration,
		ReferrerPolicy:   "same-origin",
		Body:             body,
		writeBody:        write,
		Head:             ex.Head,
		Wide:             ex.Wide,
		NoLinks:          ex.noLinks,
	}
	if ex.NoHeading {
		ld.Heading = false
	}
	if rp := w.Header().Get("Referrer-Policy"); rp == "no-referrer" {
		ld.ReferrerPolicy = rp
	}
	if ld.Member != nil {
		ld.SettingsPages = p.SettingsPages()
	}
	// Member pages are personal and carry forms: never cache them.
	p.writePage(w, r, status, "no-store", ld)
}

// RenderPublic writes a page that is the same for everyone who asks (an
// agent's profile in the directory): the shared layout without the
// member's menu (so a cache may keep it, as cacheControl says), and
// without a heading of its own: content starts with its h1. A nil *Pages
// renders with the default site name, for handlers built without member
// pages.
func (p *Pages) RenderPublic(w http.ResponseWriter, r *http.Request, status int, cacheControl, title string, content *template.Template, data any) {
	p.renderPublic(w, r, status, cacheControl, title, content, data, "'none'")
}

// RenderPublicSearch is RenderPublic for a page whose forms search it: GET
// forms back to the site (form-action 'self'), none that post.
func (p *Pages) RenderPublicSearch(w http.ResponseWriter, r *http.Request, status int, cacheControl, title string, content *template.Template, data any) {
	p.renderPublic(w, r, status, cacheControl, title, content, data, "'self'")
}

func (p *Pages) renderPublic(w http.ResponseWriter, r *http.Request, status int, cacheControl, title string, content *template.Template, data any, formAction string) {
	var body bytes.Buffer
	if err := content.Execute(&body, data); err != nil {
		p.logger().Error("render page", zap.String("page", content.Name()), zap.Error(err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	ld := layoutData{
		SiteName: p.SiteName(),
		Title:    title,
		CSS:      template.CSS(styleSheet),
		Body:     template.HTML(body.String()),
	}
	if p != nil {
		ld.OpenRegistration = p.opts.OpenRegistration
	}
	// The page has no member menu and no form that posts; it links out
	// (an agent's NIP-05 site) without telling where from.
	w.Header().Set("Content-Security-Policy", policy(formAction))
	w.Header().Set("Referrer-Policy", "no-referrer")
	ld.ReferrerPolicy = "no-referrer"
	p.writePage(w, r, status, cacheControl, ld)
}

func (p *Pages) writePage(w http.ResponseWriter, r *http.Request, status int, cacheControl string, ld layoutData) {
	ld.Script = copyScriptTag
	if ld.Member != nil {
		ld.Home = Home(r)
	}
	if ld.ReferrerPolicy == "" {
		ld.ReferrerPolicy = "same-origin"
	}
	ld.FullTitle = ld.SiteName
	if ld.Title != ld.SiteName {
		ld.FullTitle = ld.Title + " · " + ld.SiteName
	}
	out := getBuffer()
	defer putBuffer(out)
	// The page is the stylesheet, the body and about 2 KB of layout: one
	// allocation instead of a buffer doubled several times.
	out.Grow(len(styleSheet) + len(ld.Body) + 3<<10)
	writeLayout(out, &ld)
	p.setHeaders(w)
	w.Header().Set("Cache-Control", cacheControl)
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(out.Bytes())
	}
}

// buffers are the pages' render buffers, reused: a page is tens of KB,
// written twice (the content, then the layout around it).
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuffer() *bytes.Buffer { return buffers.Get().(*bytes.Buffer) }

// putBuffer returns b for reuse, unless a rare huge page grew it.
func putBuffer(b *bytes.Buffer) {
	if b.Cap() <= 1<<20 {
		b.Reset()
		buffers.Put(b)
	}
}

// serveCopyScript serves the copy-button script. It is the same for
// everyone and changes only with Hearth, so caches may keep it a day.
func serveCopyScript(w http.ResponseWriter, r *http.Request) { serveScript(w, r, copyScript) }

// serveScript serves one of the pages' scripts (the same for everyone).
func serveScript(w http.ResponseWriter, r *http.Request, src string) {
	if !OnlyGet(w, r) {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "public, max-age=86400")
	if r.Method == http.MethodGet {
		_, _ = io.WriteString(w, src)
	}
}

// Service is one thing a site offers, for the landing page.
type Service struct {
	Title, Text string
	// Path is where a program finds it, if anywhere (e.g. /api/graphql).
	Path string
	// Page is where people browse it, if anywhere (e.g. /directory).
	Page string
}

// RenderLanding writes the landing page at /: the site's name, what runs
// there, and how to sign in. The Caddy handlers show it only when nothing
// else in the site answers /.
func (p *Pages) RenderLanding(w http.ResponseWriter, r *http.Request, services []Service) {
	m := p.CurrentMember(r)
	if h := Home(r); m != nil && h != "" {
		// A signed-in member lands in the library.
		http.Redirect(w, r, h, http.StatusSeeOther)
		return
	}
	var body bytes.Buffer
	err := landingTmpl.Execute(&body, struct {
		SiteName         string
		Services         []Service
		Member           *members.Member
		OpenRegistration bool
	}{p.SiteName(), services, m, p.opts.OpenRegistration})
	if err != nil {
		p.logger().Error("render page", zap.String("page", "landing"), zap.Error(err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	ld := layoutData{
		SiteName:         p.SiteName(),
		Title:            p.SiteName(),
		CSS:              template.CSS(styleSheet),
		Member:           m,
		CurrentPath:      r.URL.Path,
		OpenRegistration: p.opts.OpenRegistration,
		Body:             template.HTML(body.String()),
	}
	if m != nil {
		ld.SettingsPages = p.SettingsPages()
	}
	p.writePage(w, r, http.StatusOK, "no-store", ld)
}

// SiteName is the name every page shows in its title and header: the
// site's instance_title (SetSiteName), or Options.SiteName.
func (p *Pages) SiteName() string {
	if p == nil {
		return DefaultSiteName
	}
	if n := p.siteName.Load(); n != nil {
		return *n
	}
	return p.opts.SiteName
}

// SetSiteName names the site on every page from now on. hearth_oauth calls
// it with its instance_title while Caddy provisions the configuration. It
// returns the name an earlier call set, if any ("" otherwise).
func (p *Pages) SetSiteName(name string) (previous string) {
	name = strings.TrimSpace(name)
	if name == "" {
		return ""
	}
	if old := p.siteName.Swap(&name); old != nil {
		return *old
	}
	return ""
}

func (p *Pages) logger() *zap.Logger {
	if p == nil || p.opts.Logger == nil {
		return zap.NewNop()
	}
	return p.opts.Logger
}

// message is the data of the message page.
type message struct {
	Text     string
	LinkHref string
	LinkText string
}

func (p *Pages) renderError(w http.ResponseWriter, r *http.Request, status int, title, text string) {
	p.Render(w, r, status, title, messageTmpl, message{Text: text})
}
