package caddymodule

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// caddy hearth import sends the file through the admin API to the
// hearth_graphql handler's runner and waits for the import to end; the
// Import settings page then lists it. A file that is no export is refused
// with the importer's message and records nothing.
func TestCLIImportThroughAdminAPIAndImportPage(t *testing.T) {
	addr := startWithAlice(t, hearthCaddyfile(t.TempDir(), graphqlSites()))
	dir := t.TempDir()
	csv := filepath.Join(dir, "part_000000.csv")
	var b strings.Builder
	b.WriteString("title,url,time_added,cursor,tags,status\n")
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "Article %d,https://example.org/%d,%d,c%d,cli,archive\n", i, i, 1600000000+i, i)
	}
	b.WriteString("No URL,,1600000000,c,,unread\n")
	os.WriteFile(csv, []byte(b.String()), 0o600)

	// example.org is not reachable from the tests: --no-fetch-wait returns
	// once the entries are written (TestCLIImportFollowsTheFetches follows
	// the fetches).
	out, err := runHearth(t, "", "import", "--member", "alice", "--no-fetch-wait", csv, addr)
	if err != nil || !strings.Contains(out, "300 new, 0 already saved, 1 not imported") || !strings.Contains(out, "row 301: the row has no URL") {
		t.Fatalf("import: %q, %v", out, err)
	}
	out, err = runHearth(t, "", "import", "--member", "alice", "--format", "POCKET", "--no-fetch-wait", csv, addr)
	if err != nil || !strings.Contains(out, "0 new, 300 already saved") {
		t.Fatalf("second import: %q, %v", out, err)
	}
	notes := filepath.Join(dir, "notes.txt")
	os.WriteFile(notes, []byte("just some notes\n"), 0o600)
	if _, err := runHearth(t, "", "import", "--member", "alice", notes, addr); err == nil || !strings.Contains(err.Error(), "not an export") {
		t.Fatalf("a text file: %v", err)
	}
	if _, err := runHearth(t, "", "import", "--member", "nobody", csv, addr); err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Fatalf("unknown member: %v", err)
	}

	br := newBrowser(t, testSite)
	br.signIn("alice", "a good password")
	p := br.get("/settings/import")
	if p.StatusCode != 200 || !strings.Contains(p.body, "part_000000.csv") || strings.Count(p.body, "<article id=\"job-") != 2 ||
		!strings.Contains(p.body, `action="/api/import"`) || !strings.Contains(p.body, "300 new items") {
		t.Fatalf("import page: HTTP %d\n%s", p.StatusCode, p.body)
	}
}

// Without --no-fetch-wait, caddy hearth import follows the pages the
// import fetches in the background to the end, and says how they went.
func TestCLIImportFollowsTheFetches(t *testing.T) {
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gone" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<html><head><title>Page %s</title></head><body><article><p>%s</p></article></body></html>",
			r.URL.Path, strings.Repeat("Worth reading later. ", 40))
	}))
	defer pages.Close()
	// One hearth_graphql, which may fetch the test's pages on loopback
	// (the admin API's imports go to the first one provisioned).
	addr := startWithAlice(t, hearthCaddyfile(t.TempDir(), fmt.Sprintf("%s {\n\thearth_graphql {\n\t\tallow_private_addresses\n\t}\n}\n", testSite)))
	csv := filepath.Join(t.TempDir(), "part_000000.csv")
	os.WriteFile(csv, []byte(fmt.Sprintf("title,url,time_added,cursor,tags,status\n"+
		"One,%[1]s/one,1600000000,a,,unread\nTwo,%[1]s/two,1600000001,b,,unread\nGone,%[1]s/gone,1600000002,c,,unread\n", pages.URL)), 0o600)
	out, err := runHearth(t, "", "import", "--member", "alice", csv, addr)
	if err != nil || !strings.Contains(out, "3 new, 0 already saved, 0 not imported; 2 pages fetched, 1 could not be") ||
		!strings.Contains(out, pages.URL+"/gone: ") {
		t.Fatalf("import: %q, %v", out, err)
	}
}
