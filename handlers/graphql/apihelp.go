package graphql

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"

	"github.com/hearthkit/caddy-hearth/handlers/account"
)

// SchemaPath serves the schema as SDL (the schema files, in name order),
// for code generators and editors; off with the introspection option.
const SchemaPath = Path + "/schema.graphql"

// DocsURL is where the first requests are explained, for people who
// open the endpoint in a browser.
const DocsURL = "https://github.com/hearthkit/caddy-hearth/blob/main/docs/graphql-first-requests.md"

//go:embed schema/*.graphqls
var schemaFiles embed.FS

var schemaSDL = sync.OnceValue(func() []byte {
	names, _ := fs.Glob(schemaFiles, "schema/*.graphqls") // sorted
	var b strings.Builder
	for _, n := range names {
		src, _ := schemaFiles.ReadFile(n)
		b.WriteString("# " + strings.TrimPrefix(n, "schema/") + "\n")
		b.Write(src)
		b.WriteString("\n")
	}
	return []byte(b.String())
})

func (s *Server) serveSchema(w http.ResponseWriter, r *http.Request) {
	if s.opts.NoIntrospection {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/graphql; charset=utf-8")
	w.Header().Set("Content-Disposition", `inline; filename="schema.graphql"`)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.Method == http.MethodGet {
		_, _ = w.Write(schemaSDL())
	}
}

// wantsPage reports whether r is a browser opening the endpoint (GET,
// HTML accepted, no query): it gets a short page pointing to the docs
// instead of a JSON error it cannot use.
func wantsPage(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.RawQuery == "" &&
		strings.Contains(r.Header.Get("Accept"), "text/html")
}

//go:embed templates/api_help.html
var templates embed.FS

var apiHelpTmpl = template.Must(template.New("api_help.html").ParseFS(templates, "templates/api_help.html"))

func (s *Server) serveAPIHelp(w http.ResponseWriter, r *http.Request) {
	if s.opts.Pages == nil {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, "use POST with a JSON body")
		return
	}
	site := "http://" + r.Host
	if r.TLS != nil {
		site = "https://" + r.Host
	}
	s.opts.Pages.Render(w, r, http.StatusOK, "GraphQL API", apiHelpTmpl, struct {
		Endpoint, SchemaPath, TokensPath, DocsURL string
		Introspection                             bool
	}{site + Path, SchemaPath, account.APITokensPath, DocsURL, !s.opts.NoIntrospection})
}
