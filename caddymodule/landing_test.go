package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func getRoot(t *testing.T, method string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, testSite+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, b := send(t, req)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// Every page is in the site's name (instance_title); /
// shows the landing page (the site's name, what runs
// there, a sign-in link) when nothing later in the route answers it, and
// what the site serves there otherwise: a file_server's index, a respond.
func TestLandingPageOnlyWhenNothingElseAnswersRoot(t *testing.T) {
	dir, www, empty := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(www, "index.html"), []byte("<h1>Our own home page</h1>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	site := func(rest string) string {
		return hearthCaddyfile(dir, fmt.Sprintf("%s {\n\thearth_oauth {\n\t\tinstance_title \"Maple Street Commons\"\n\t}\n\thearth_graphql\n\thearth_directory\n%s}\n", testSite, rest))
	}
	startHearth(t, site(""))
	status, ct, body := getRoot(t, http.MethodGet)
	if status != http.StatusOK || ct != "text/html; charset=utf-8" {
		t.Fatalf("GET / with nothing else at /: HTTP %d %s", status, ct)
	}
	for _, want := range []string{"<title>Maple Street Commons</title>", "<h1>Maple Street Commons</h1>", `href="/auth/sign_in"`,
		"Sign-in for apps", "Saved articles", "<code>/api/graphql</code>", `<a href="/directory"><strong>Agent directory</strong></a>`, "<code>/directory.json</code>"} {
		if !strings.Contains(body, want) {
			t.Errorf("landing page lacks %q:\n%s", want, body)
		}
	}
	// Every page says the site's name, whichever module serves it
	// (hearth_graphql serves the sign-in page here: it comes first).
	for path, want := range map[string]string{
		"/auth/sign_in": "<title>Sign in · Maple Street Commons</title>",
		"/agents/npub1sg6plzptd64u62a878hep2kev88swjh3tw00gjsfl8f237lmu63q0uf63m": "<title>Agent not found · Maple Street Commons</title>",
	} {
		resp, err := http.Get(testSite + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), want) || !strings.Contains(string(b), `<a class="brand" href="/">Maple Street Commons</a>`) {
			t.Errorf("GET %s: HTTP %d lacks %q and the site's name in its header", path, resp.StatusCode, want)
		}
	}
	if status, _, body := getRoot(t, http.MethodHead); status != http.StatusOK || body != "" {
		t.Errorf("HEAD /: HTTP %d, %d bytes", status, len(body))
	}
	if status, _, body := getRoot(t, http.MethodPost); status == http.StatusOK && strings.Contains(body, "Maple Street Commons") {
		t.Error("POST / got the landing page")
	}

	for _, tc := range []struct{ name, rest, want string }{
		{"file_server with an index", fmt.Sprintf("\troot * %q\n\tfile_server\n", www), "<h1>Our own home page</h1>\n"},
		{"respond", "\trespond \"the rest of the site\"\n", "the rest of the site"},
	} {
		loadCaddyfile(t, site(tc.rest))
		if status, _, body := getRoot(t, http.MethodGet); status != http.StatusOK || body != tc.want {
			t.Errorf("%s: GET / = HTTP %d %q, want the site's own answer %q", tc.name, status, body, tc.want)
		}
	}
	// A file server with nothing at / (its 404): the landing page.
	loadCaddyfile(t, site(fmt.Sprintf("\troot * %q\n\tfile_server\n", empty)))
	if status, _, body := getRoot(t, http.MethodGet); status != http.StatusOK || !strings.Contains(body, "<h1>Maple Street Commons</h1>") {
		t.Errorf("file_server without an index: GET / = HTTP %d, want the landing page:\n%s", status, body)
	}
}
