package account

import (
	"html/template"
	"net/http"
	"strings"
)

// PageExtras is what a service's own pages add to the shared layout (the
// library and reader of hearth_graphql): tags for the head, and a wider
// main column.
type PageExtras struct {
	// Head is written in the head after the shared stylesheet: the
	// service's stylesheet, scripts and manifest links, all from this site.
	// Each script must be allowed by the page's policy (PolicyWith).
	Head template.HTML
	// Wide lets main use the window's width (lists, the reader).
	Wide bool
	// NoHeading: the content starts with its own h1.
	NoHeading bool
}

// RenderWith is Render with extras. The caller sets the page's
// Content-Security-Policy first (PolicyWith), so its scripts may run.
func (p *Pages) RenderWith(w http.ResponseWriter, r *http.Request, status int, title string, content *template.Template, data any, ex PageExtras) {
	p.render(w, r, status, title, content, data, ex)
}

// PolicyWith is the pages' Content-Security-Policy that also allows the
// scripts whose CSP hashes ('sha256-…') are given (each loaded from this
// site with the same hash as its integrity), stylesheets and web app
// manifests from this site, and script requests (fetch) to this site. No
// inline script or style other than the shared ones ever runs.
func PolicyWith(scriptHashes ...string) string {
	return "default-src 'none'; script-src " + strings.Join(append([]string{copyScriptHash}, scriptHashes...), " ") +
		"; style-src 'self' " + styleHash + "; img-src 'self' data:; connect-src 'self'; manifest-src 'self'; form-action 'self'" +
		"; frame-ancestors 'none'; base-uri 'none'"
}

// CSPHash is the CSP source expression ('sha256-…') of a script or style.
func CSPHash(s string) string { return cspHash(s) }

// SetHome names the page signed-in members land on (the library) when
// nothing else answers / and after signing in without a page to go back
// to; the member menu links to it. "" (the default) keeps the settings.
func (p *Pages) SetHome(path string) { p.home.Store(&path) }

// Home is the page set by SetHome, or "".
func (p *Pages) Home() string {
	if p == nil {
		return ""
	}
	if h := p.home.Load(); h != nil {
		return *h
	}
	return ""
}
