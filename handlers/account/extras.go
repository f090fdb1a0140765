package account

import (
	"bytes"
	"context"
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
	// noLinks: the header names the site without linking anywhere (no
	// home link, no sign-in or member menu), for a page served under a
	// host name where every path answers with that same page.
	noLinks bool
}

// RenderWith is Render with extras. The caller sets the page's
// Content-Security-Policy first (PolicyWith), so its scripts may run.
func (p *Pages) RenderWith(w http.ResponseWriter, r *http.Request, status int, title string, content *template.Template, data any, ex PageExtras) {
	p.render(w, r, status, title, content, data, ex)
}

// RenderHTML is RenderWith for content written in Go rather than by a
// template (pages every member opens all the time, where a template's
// reflective actions were much of the page's time): write writes the
// content, escaping every value as html/template would (WriteEscaped,
// WriteURL).
func (p *Pages) RenderHTML(w http.ResponseWriter, r *http.Request, status int, title string, write func(*bytes.Buffer), ex PageExtras) {
	p.renderBody(w, r, status, title, "", write, ex)
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

type homeKey struct{}

// WithHome is r on a site whose signed-in members land on path (its
// library) when nothing else answers / and after signing in without a page
// to go back to; the member menu links to it. The member pages are shared
// by every site of a configuration, but a library is on some sites only, so
// the site says it on each request (Caddy's handlers do). Without it, the
// settings are where members land.
func WithHome(r *http.Request, path string) *http.Request {
	if path == "" {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), homeKey{}, path))
}

// Home is the page r's site set with WithHome, or "".
func Home(r *http.Request) string {
	h, _ := r.Context().Value(homeKey{}).(string)
	return h
}
