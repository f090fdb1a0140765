package graphql_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/handlers/omnivore"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// What a client sees of one route with one credential.
const (
	allowed      = "ok"
	forbidden    = "forbidden"    // GraphQL FORBIDDEN, HTTP 403
	unauthorized = "unauthorized" // GraphQL UNAUTHORIZED, HTTP 401
	noMember     = "no member"    // Mastodon's 422 for an application's token
	toSignIn     = "sign in"      // a member page's redirect to the sign-in page
)

// The credentials every route is asked with: no credential, the session
// cookie, an API token, OAuth tokens of a member with each kind of scope,
// and an application's own token (client_credentials, every scope).
var scopeCredentials = []string{
	"none", "session", "API token",
	"read", "write", "read write", "profile",
	"read:accounts", "read:statuses", "read:bookmarks", "write:bookmarks", "write:statuses", "follow",
	"client_credentials",
}

// withoutRead are the credentials that may see nothing of the library.
var withoutRead = map[string]bool{
	"none": true, "write": true, "profile": true, "read:accounts": true, "read:statuses": true,
	"read:bookmarks": true, "write:bookmarks": true, "write:statuses": true, "follow": true, "client_credentials": true,
}

// Words only the library holds: an article's text, a highlight's note and
// a label's name. No answer to a credential without read carries them.
const libraryMarker = "Quillwort"

// outcomes lists, for some credentials, what a probe sees; every other
// credential gets rest.
func outcomes(rest string, some map[string]string) map[string]string {
	out := map[string]string{}
	for _, c := range scopeCredentials {
		out[c] = rest
		if o, ok := some[c]; ok {
			out[c] = o
		}
	}
	return out
}

// scopeWorld is a member with an article, a highlight and a label, the
// GraphQL API, the OAuth server and the member pages on one HTTP server,
// and one credential of each kind.
type scopeWorld struct {
	t      *testing.T
	store  *storage.Store
	base   string
	member *members.Member
	item   *library.SavedItem
	creds  map[string]func(*http.Request)
}

func newScopeWorld(t *testing.T) *scopeWorld {
	store := graphql.StoreForTest(t, t.TempDir())
	pages := account.New(store, account.Options{})
	api := newAPI(store, options{Pages: pages, NoImportFetch: true})
	t.Cleanup(func() { api.Close() })
	oa := oauth.New(store, oauth.Options{Pages: pages})
	pages.AddSettingsPage(api.Exports().Page(pages))
	srv := httptest.NewServer(served(api, oa, pages))
	t.Cleanup(srv.Close)
	w := &scopeWorld{t: t, store: store, base: srv.URL, creds: map[string]func(*http.Request){}}
	ctx := t.Context()
	var err error
	if w.member, err = members.Of(store).CreateMember(ctx, "alice", "Alice", "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	w.item, _, err = library.Of(store).SaveItem(ctx, w.member.ID, library.NewItem{
		URL: "https://example.com/fern", Title: "Ferns", HTML: "<p>" + libraryMarker + " grows in ponds.</p>", Text: libraryMarker + " grows in ponds.",
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(store).CreateHighlight(ctx, w.member.ID, w.item.ID,
		[]library.HighlightSegment{{XPath: "/p[1]", StartOffset: 0, EndOffset: 9, Text: libraryMarker}}, "note on "+libraryMarker); err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(store).CreateLabel(ctx, w.member.ID, libraryMarker+" label", "#112233"); err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(store).StoreItemImage(ctx, w.member.ID, w.item.ID, "https://example.com/fern.png", []byte("\x89PNG\r\n\x1a\n"+libraryMarker), 1<<20); err != nil {
		t.Fatal(err)
	}

	sessionID, err := members.Of(store).CreateSession(ctx, w.member.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	w.creds["none"] = func(*http.Request) {}
	w.creds["session"] = func(r *http.Request) {
		r.AddCookie(&http.Cookie{Name: account.CookieName, Value: sessionID})
		r.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	_, apiToken, err := apitokens.Of(store).Create(ctx, w.member.ID, "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	w.creds["API token"] = bearerHeader(apiToken)
	app, _, err := grants.Of(store).CreateApp(ctx, "Reader", "", []string{"urn:ietf:wg:oauth:2.0:oob"}, grants.Scopes)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range scopeCredentials {
		if w.creds[c] != nil || c == "client_credentials" {
			continue
		}
		scopes := strings.Fields(c)
		code, err := grants.Of(store).CreateCode(ctx, app.ClientID, w.member, "urn:ietf:wg:oauth:2.0:oob", scopes, "")
		if err != nil {
			t.Fatal(err)
		}
		_, tok, err := grants.Of(store).ExchangeCode(ctx, code, func(*grants.Code) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		w.creds[c] = bearerHeader(tok)
	}
	_, appTok, err := grants.Of(store).CreateAppToken(ctx, app.ClientID, grants.Scopes)
	if err != nil {
		t.Fatal(err)
	}
	w.creds["client_credentials"] = bearerHeader(appTok)
	return w
}

func bearerHeader(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

// send makes a request with credential cred and returns the status, the
// Location and the body.
func (w *scopeWorld) send(cred, method, path, contentType string, body []byte) (int, string, []byte) {
	w.t.Helper()
	req, _ := http.NewRequest(method, w.base+path, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	w.creds[cred](req)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), b
}

// graphQL posts an operation and tells what the client saw.
func (w *scopeWorld) graphQL(cred, query string, vars map[string]any) (string, []byte) {
	w.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	status, _, b := w.send(cred, http.MethodPost, graphql.Path, "application/json", body)
	var r struct {
		Data   map[string]json.RawMessage
		Errors []gqlError
	}
	if err := json.Unmarshal(b, &r); err != nil || status != http.StatusOK {
		w.t.Fatalf("%s: HTTP %d %s", cred, status, b)
	}
	if len(r.Errors) == 0 {
		return allowed, b
	}
	switch r.Errors[0].Code() {
	case "FORBIDDEN":
		return forbidden, b
	case "UNAUTHORIZED":
		return unauthorized, b
	}
	w.t.Fatalf("%s: unexpected answer %s", cred, b)
	return "", nil
}

// rest tells what a REST client saw from status.
func rest(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return unauthorized
	case http.StatusForbidden:
		return forbidden
	case http.StatusUnprocessableEntity:
		return noMember
	}
	return fmt.Sprintf("HTTP %d", status)
}

// scopeProbe asks one route (or one kind of operation on it) with a
// credential and tells what the client saw.
type scopeProbe struct {
	name string
	// routes are the declarations (access.Route names) it covers.
	routes []string
	ask    func(w *scopeWorld, cred string) (string, []byte)
	want   map[string]string
}

func scopeProbes() []scopeProbe {
	gql := "POST " + graphql.Path
	readers := outcomes(forbidden, map[string]string{"none": unauthorized, "client_credentials": unauthorized,
		"session": allowed, "API token": allowed, "read": allowed, "read write": allowed})
	writers := outcomes(forbidden, map[string]string{"none": unauthorized, "client_credentials": unauthorized,
		"session": allowed, "API token": allowed, "write": allowed, "read write": allowed})
	readWriters := outcomes(forbidden, map[string]string{"none": unauthorized, "client_credentials": unauthorized,
		"session": allowed, "API token": allowed, "read write": allowed})
	mastodon := func(ok ...string) map[string]string {
		m := map[string]string{"none": unauthorized, "session": unauthorized, "API token": unauthorized, "client_credentials": noMember}
		for _, c := range ok {
			m[c] = allowed
		}
		return outcomes(forbidden, m)
	}
	return []scopeProbe{{
		name:   "GraphQL query",
		routes: []string{gql, gql + " query"},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			return w.graphQL(cred, `query($id: String!) { me { username } labels { name }
				savedItem(query: {id: $id}) { title article { contentText } highlights { note } } }`, map[string]any{"id": w.item.ID})
		},
		want: readers,
	}, {
		name:   "GraphQL mutation selecting ids",
		routes: []string{gql + " mutation"},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			return w.graphQL(cred, `mutation($name: String!) { createLabel(data: {name: $name, color: "#445566"}) { __typename id } }`,
				map[string]any{"name": "made by " + cred})
		},
		want: writers,
	}, {
		name:   "GraphQL mutation selecting success",
		routes: []string{gql + " mutation"},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			return w.graphQL(cred, `mutation($id: String!) { setSavedItemLabels(data: {id: $id, addLabelIds: []}) { success } }`,
				map[string]any{"id": w.item.ID})
		},
		want: writers,
	}, {
		name:   "GraphQL mutation selecting content",
		routes: []string{gql + " mutation result"},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			return w.graphQL(cred, `mutation($id: String!) { updateSavedItemMetadata(data: {id: $id, author: "A"}) {
				id ...on SavedItem { article { contentText } } highlights { note } labels { name } } }`, map[string]any{"id": w.item.ID})
		},
		want: readWriters,
	}, {
		// Every answer that passes the credentials check is the file's
		// own error (none is sent): nothing is imported.
		name:   "POST " + importer.UploadPath,
		routes: []string{"POST " + importer.UploadPath},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			var body bytes.Buffer
			mw := multipart.NewWriter(&body)
			_ = mw.WriteField("type", "POCKET")
			mw.Close()
			status, _, b := w.send(cred, http.MethodPost, importer.UploadPath, mw.FormDataContentType(), body.Bytes())
			if status == http.StatusBadRequest && bytes.Contains(b, []byte("File is required")) {
				return allowed, b
			}
			return rest(status), b
		},
		want: outcomes(forbidden, map[string]string{"none": unauthorized, "client_credentials": unauthorized,
			"session": allowed, "API token": allowed, "write": allowed, "read write": allowed}),
	}, {
		// Omnivore's content endpoint: API tokens (sent alone, as
		// Omnivore's clients do, or as Bearer) and OAuth tokens with read;
		// not the session.
		name:   "POST " + omnivore.ContentPath,
		routes: []string{"POST " + omnivore.ContentPath},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			body, _ := json.Marshal(map[string]any{"libraryItemIds": []string{w.item.ID}, "format": "html"})
			status, _, b := w.send(cred, http.MethodPost, omnivore.ContentPath, "application/json", body)
			if status == http.StatusOK && bytes.Contains(b, []byte(`"downloadUrl"`)) {
				return allowed, b
			}
			return rest(status), b
		},
		want: outcomes(forbidden, map[string]string{"none": unauthorized, "client_credentials": unauthorized,
			"session": unauthorized, "API token": allowed, "read": allowed, "read write": allowed}),
	}, {
		name:   "GET " + export.APIPath,
		routes: []string{"GET " + export.APIPath},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			status, _, b := w.send(cred, http.MethodGet, export.APIPath, "", nil)
			if status == http.StatusOK && bytes.HasPrefix(b, []byte("PK")) {
				return allowed, b
			}
			return rest(status), b
		},
		want: readers,
	}, {
		name:   "GET " + export.EPUBPath,
		routes: []string{"GET " + export.EPUBPath},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			status, _, b := w.send(cred, http.MethodGet, export.EPUBPath+"?id="+w.item.ID, "", nil)
			if status == http.StatusOK && bytes.HasPrefix(b, []byte("PK")) {
				return allowed, b
			}
			return rest(status), b
		},
		want: readers,
	}, {
		name:   "GET " + export.ImageAPIPath,
		routes: []string{"GET " + export.ImageAPIPath},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			status, _, b := w.send(cred, http.MethodGet, export.ImageAPIPath+w.item.ID+"/0", "", nil)
			if status == http.StatusOK && bytes.HasPrefix(b, []byte("\x89PNG")) {
				return allowed, b
			}
			return rest(status), b
		},
		want: readers,
	}, {
		name:   "GET " + export.FeedsAPIPath,
		routes: []string{"GET " + export.FeedsAPIPath},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			status, _, b := w.send(cred, http.MethodGet, export.FeedsAPIPath, "", nil)
			if status == http.StatusOK && bytes.Contains(b, []byte(`"help"`)) {
				return allowed, b
			}
			return rest(status), b
		},
		want: readers,
	}, {
		// A new secret gives URLs that read the library: read and write.
		name:   "POST " + export.FeedsAPIPath,
		routes: []string{"POST " + export.FeedsAPIPath},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			status, _, b := w.send(cred, http.MethodPost, export.FeedsAPIPath, "", nil)
			if status == http.StatusOK && bytes.Contains(b, []byte(`"secret":"fd_`)) {
				return allowed, b
			}
			return rest(status), b
		},
		want: readWriters,
	}, {
		// A revocation needs write; a refused one leaves the URLs working.
		name: "DELETE " + export.FeedsAPIPath,
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			tokens := apitokens.Of(w.store)
			if _, err := tokens.RenewFeedSecret(w.t.Context(), w.member.ID); err != nil {
				w.t.Fatal(err)
			}
			status, _, b := w.send(cred, http.MethodDelete, export.FeedsAPIPath, "", nil)
			_, err := tokens.FeedSecretInfo(w.t.Context(), w.member.ID)
			revoked := errors.Is(err, storage.ErrNotFound)
			if err != nil && !revoked {
				w.t.Fatal(err)
			}
			switch {
			case status == http.StatusOK && bytes.Contains(b, []byte(`"help"`)) && revoked:
				return allowed, b
			case revoked:
				return "revoked by a " + rest(status), b
			}
			return rest(status), b
		},
		want: writers,
	}, {
		// A member page: only the session, every token is sent to sign in.
		name: "GET " + export.FilePath,
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			status, loc, b := w.send(cred, http.MethodGet, export.FilePath, "", nil)
			switch {
			case status == http.StatusOK && len(b) > 0:
				return allowed, b
			case status == http.StatusSeeOther && strings.HasPrefix(loc, account.SignInPath):
				return toSignIn, b
			}
			return rest(status), b
		},
		want: outcomes(toSignIn, map[string]string{"session": allowed}),
	}, {
		name:   "GET " + oauth.VerifyCredentialsPath,
		routes: []string{"GET " + oauth.VerifyCredentialsPath},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			status, _, b := w.send(cred, http.MethodGet, oauth.VerifyCredentialsPath, "", nil)
			if status == http.StatusOK && bytes.Contains(b, []byte(`"username":"alice"`)) {
				return allowed, b
			}
			return rest(status), b
		},
		want: mastodon("read", "read write", "profile", "read:accounts"),
	}, {
		name:   "GET " + oauth.UserinfoPath,
		routes: []string{"GET " + oauth.UserinfoPath},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			status, _, b := w.send(cred, http.MethodGet, oauth.UserinfoPath, "", nil)
			if status == http.StatusOK && bytes.Contains(b, []byte(`"preferred_username":"alice"`)) {
				return allowed, b
			}
			return rest(status), b
		},
		want: mastodon("profile"),
	}, {
		name:   "GET " + oauth.AppsVerifyPath,
		routes: []string{"GET " + oauth.AppsVerifyPath},
		ask: func(w *scopeWorld, cred string) (string, []byte) {
			status, _, b := w.send(cred, http.MethodGet, oauth.AppsVerifyPath, "", nil)
			if status == http.StatusOK && bytes.Contains(b, []byte(`"name":"Reader"`)) {
				return allowed, b
			}
			return rest(status), b
		},
		want: outcomes(allowed, map[string]string{"none": unauthorized, "session": unauthorized, "API token": unauthorized}),
	}}
}

// declaredRoutes is every package's declarations: the GraphQL API's, the
// routes hearth_graphql serves beside it, and the Mastodon routes
// (TestEveryDeclaredRouteIsListed checks that none is left out).
func declaredRoutes() []access.Route {
	return slices.Concat(graphql.Routes(), []access.Route{importer.Route, omnivore.Route,
		export.APIRoute, export.EPUBRoute, export.ImageRoute, export.FeedsRoute, export.FeedsChangeRoute}, oauth.Routes())
}

// Every route that takes credentials, asked with every kind of credential:
// a query needs read, a mutation write (and read for anything its result
// shows beyond ids and success), an import write; the Mastodon routes keep
// Mastodon's scopes; and no answer to a credential without read carries
// anything of the library.
func TestEveryRouteHoldsItsScopes(t *testing.T) {
	w := newScopeWorld(t)
	probes := scopeProbes()
	covered := map[string]bool{}
	for _, p := range probes {
		for _, r := range p.routes {
			covered[r] = true
		}
	}
	for _, r := range declaredRoutes() {
		if !covered[r.Name] {
			t.Errorf("route %q is declared but no probe asks it", r.Name)
		}
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			w.t = t
			for _, cred := range scopeCredentials {
				got, body := p.ask(w, cred)
				if got != p.want[cred] {
					t.Errorf("%s: %s, want %s (%.300s)", cred, got, p.want[cred], body)
				}
				if withoutRead[cred] && bytes.Contains(body, []byte(libraryMarker)) {
					t.Errorf("%s: the answer shows the library: %.300s", cred, body)
				}
			}
		})
	}
	// The refused mutations changed nothing (labels are listed in the
	// order they were made).
	it, err := library.Of(w.store).SavedItem(t.Context(), w.member.ID, w.item.ID)
	if err != nil {
		t.Fatal(err)
	}
	labels, err := library.Of(w.store).Labels(t.Context(), w.member.ID)
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, l := range labels {
		if name, ok := strings.CutPrefix(l.Name, "made by "); ok {
			made = append(made, name)
		}
	}
	if it.Author != "A" || strings.Join(made, ",") != "session,API token,write,read write" {
		t.Fatalf("author %q, labels made by %v", it.Author, made)
	}
}
