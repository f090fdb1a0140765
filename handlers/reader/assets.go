package reader

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
)

//go:embed templates/*.html assets/*
var files embed.FS

var (
	helpTmpl    = parse("help.html")
	addTmpl     = parse("add.html")
	messageTmpl = parse("message.html")
	savingTmpl  = parse("saving.html")
)

var funcs = template.FuncMap{
	"date": func(t time.Time) string { return t.UTC().Format("2 Jan 2006") },
	"iso":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
}

func parse(name string) *template.Template {
	return template.Must(template.New(name).Funcs(funcs).ParseFS(files, "templates/"+name, "templates/shortcuts.html"))
}

// asset is one embedded file served under a URL naming its version, so it
// may be cached for a year: a new Hearth has new URLs.
type asset struct {
	name, contentType string
	body              []byte
	url               string
}

var assets = map[string]*asset{}

func load(name, contentType string) *asset {
	b, err := files.ReadFile("assets/" + name)
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(b)
	base, ext, _ := strings.Cut(name, ".")
	a := &asset{name: name, contentType: contentType, body: b,
		url: Path + "/assets/" + base + "." + hex.EncodeToString(sum[:6]) + "." + ext}
	assets[strings.TrimPrefix(a.url, Path+"/assets/")] = a
	return a
}

var (
	scriptAsset = load("reader.js", "text/javascript; charset=utf-8")
	styleAsset  = load("reader.css", "text/css; charset=utf-8")
	iconAsset   = load("icon.svg", "image/svg+xml")

	// The policy of every library page: the shared one, plus this
	// package's script (by its hash, which the tag names as its
	// integrity) and stylesheet.
	policy = account.PolicyWith(account.CSPHash(string(scriptAsset.body)))

	headTags = template.HTML(fmt.Sprintf(`<link rel="stylesheet" href="%s">
<link rel="manifest" href="%s">
<link rel="icon" href="%s" type="image/svg+xml">
<script src="%s" integrity="%s" defer></script>`,
		html.EscapeString(styleAsset.url), html.EscapeString(Path+"/manifest.webmanifest"), html.EscapeString(iconAsset.url),
		html.EscapeString(scriptAsset.url), html.EscapeString(strings.Trim(account.CSPHash(string(scriptAsset.body)), "'"))))
)

func serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	a, ok := assets[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if !account.OnlyGet(w, r) {
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.contentType)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	if a.contentType == "image/svg+xml" {
		// An SVG opened on its own must not run anything.
		hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	}
	if r.Method == http.MethodGet {
		_, _ = w.Write(a.body)
	}
}

// serveManifest serves the web app manifest: the library as an installable
// app, and a share target that sends a shared link to the confirm page of
// the add form (a GET there only shows the form).
func (h *Handler) serveManifest(w http.ResponseWriter, r *http.Request) {
	name := h.pages.SiteName()
	m := map[string]any{
		"name":             name,
		"short_name":       name,
		"description":      "Your saved articles, newsletters and highlights",
		"start_url":        Path,
		"scope":            "/",
		"display":          "standalone",
		"background_color": "#fffdf9",
		"theme_color":      "#a63f1b",
		"icons": []map[string]string{
			{"src": iconAsset.url, "sizes": "any", "type": "image/svg+xml", "purpose": "any"},
		},
		"share_target": map[string]any{
			"action": Path + "/add",
			"method": "GET",
			"params": map[string]string{"url": "url", "text": "text", "title": "title"},
		},
	}
	w.Header().Set("Content-Type", "application/manifest+json")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_ = json.NewEncoder(w).Encode(m)
}

func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func retryAfter(d time.Duration) string {
	return fmt.Sprint(int(d.Seconds() + 0.999))
}
