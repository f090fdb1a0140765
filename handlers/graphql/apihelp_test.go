package graphql_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
)

func getWith(t *testing.T, url, accept string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, b := send(t, req)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// A browser opening the endpoint gets a short page pointing to the docs,
// the token page and the schema; a program's GET keeps the JSON error.
// The schema is downloadable as SDL, unless introspection is off.
func TestEndpointInABrowserAndTheSchemaAsSDL(t *testing.T) {
	e := newEnv(t, options{})
	status, ct, body := getWith(t, e.srv.URL+graphql.Path, "text/html,application/xhtml+xml,*/*;q=0.8")
	if status != http.StatusOK || ct != "text/html; charset=utf-8" || !strings.Contains(body, graphql.DocsURL) ||
		!strings.Contains(body, `href="`+graphql.SchemaPath+`"`) || !strings.Contains(body, `href="/settings/api_tokens"`) ||
		!strings.Contains(body, "curl -sS "+e.srv.URL+"/api/graphql") {
		t.Fatalf("browser GET: HTTP %d %s\n%s", status, ct, body)
	}
	if status, ct, body := getWith(t, e.srv.URL+graphql.Path, "application/json"); status != http.StatusMethodNotAllowed ||
		!strings.HasPrefix(ct, "application/json") || !strings.Contains(body, "use POST") {
		t.Errorf("program GET: HTTP %d %s %s", status, ct, body)
	}
	status, ct, sdl := getWith(t, e.srv.URL+graphql.SchemaPath, "")
	if status != http.StatusOK || ct != "application/graphql; charset=utf-8" || !strings.Contains(sdl, "type Query {") ||
		!strings.Contains(sdl, "addArticleFromUrl(data: AddArticleFromUrlInput!): Void!") || !strings.Contains(sdl, "input CreateLabelInput") {
		t.Fatalf("schema: HTTP %d %s\n%.300s", status, ct, sdl)
	}
	closed := newEnv(t, options{NoIntrospection: true})
	if status, _, _ := getWith(t, closed.srv.URL+graphql.SchemaPath, ""); status != http.StatusNotFound {
		t.Errorf("schema with introspection off: HTTP %d", status)
	}
	if _, _, body := getWith(t, closed.srv.URL+graphql.Path, "text/html"); strings.Contains(body, graphql.SchemaPath) {
		t.Error("the page links the schema with introspection off")
	}
}

// addArticleFromUrl answers Inboxt's { success } and, Hearth's addition,
// the saved item's id, the one the item is then listed with.
func TestAddArticleFromUrlGivesTheItemsID(t *testing.T) {
	e := newEnv(t, options{Fetcher: localFetcher()})
	site := articleSite(t, "Bread")
	var out struct {
		AddArticleFromUrl struct {
			Success bool
			ID      *string
		}
	}
	e.do(`mutation($u: String!) { addArticleFromUrl(data: {url: $u}) { success id } }`, map[string]any{"u": site.URL + "/bread"}, &out)
	items := e.waitFetched()
	if !out.AddArticleFromUrl.Success || out.AddArticleFromUrl.ID == nil || len(items) != 1 || items[0].ID != *out.AddArticleFromUrl.ID {
		t.Fatalf("answer %+v, items %+v", out, items)
	}
}
