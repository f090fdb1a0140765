package account

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
)

//go:embed templates/*.html templates/style.css
var files embed.FS

var (
	layoutTmpl    = parse("layout.html")
	signInTmpl    = parse("sign_in.html")
	signUpTmpl    = parse("sign_up.html")
	signOutTmpl   = parse("sign_out.html")
	settingsTmpl  = parse("settings.html")
	messageTmpl   = parse("message.html")
	accountTmpl   = parse("account.html")
	twoFactorTmpl = parse("two_factor.html")
	resetTmpl     = parse("reset.html")

	// The stylesheet is inlined in every page and allowed by its hash, so
	// the policy needs neither 'unsafe-inline' nor a stylesheet route.
	styleSheet = mustRead("templates/style.css")
	styleHash  = func() string {
		sum := sha256.Sum256([]byte(styleSheet))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}()
)

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
	return "default-src 'none'; style-src " + styleHash + "; img-src 'self' data:; form-action " + fa +
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
	// Member pages are personal and carry forms: never cache them.
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/html; charset=utf-8")
}

type layoutData struct {
	SiteName      string
	Title         string
	CSS           template.CSS
	Member        *storage.Member
	SettingsPages []SettingsPage
	CurrentPath   string
	// OnSettings and OnAccount mark the current page in the menu (computed
	// here: a template's eq costs a reflective call per page view).
	OnSettings       bool
	OnAccount        bool
	OpenRegistration bool
	ReferrerPolicy   string
	Body             template.HTML
}

// Render writes a page: content, executed with data, inside the shared
// layout (site header, profile menu listing the settings pages, sign-out
// button), with status and the security headers.
func (p *Pages) Render(w http.ResponseWriter, r *http.Request, status int, title string, content *template.Template, data any) {
	var body bytes.Buffer
	if content != nil {
		if err := content.Execute(&body, data); err != nil {
			p.opts.Logger.Error("render page", zap.String("page", content.Name()), zap.Error(err))
			body.Reset()
			status, title = http.StatusInternalServerError, "Something went wrong"
			_ = messageTmpl.Execute(&body, message{Text: "This page could not be shown. Try again later."})
		}
	}
	ld := layoutData{
		SiteName:         p.opts.SiteName,
		Title:            title,
		CSS:              template.CSS(styleSheet),
		Member:           p.CurrentMember(r),
		CurrentPath:      r.URL.Path,
		OnSettings:       r.URL.Path == SettingsPath,
		OnAccount:        r.URL.Path == AccountPath,
		OpenRegistration: p.opts.OpenRegistration,
		ReferrerPolicy:   "same-origin",
		Body:             template.HTML(body.String()),
	}
	if rp := w.Header().Get("Referrer-Policy"); rp == "no-referrer" {
		ld.ReferrerPolicy = rp
	}
	if ld.Member != nil {
		ld.SettingsPages = p.SettingsPages()
	}
	var out bytes.Buffer
	if err := layoutTmpl.Execute(&out, ld); err != nil {
		p.opts.Logger.Error("render layout", zap.Error(err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	p.setHeaders(w)
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(out.Bytes())
	}
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
