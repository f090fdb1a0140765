package caddymodule

import (
	"fmt"
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
	startHearth(t, hearthCaddyfile(t.TempDir(), graphqlSites()))
	addr := "--address=" + testAdmin
	if _, err := runHearth(t, "a good password\n", "member", "add", "alice", "--password-stdin", addr); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	csv := filepath.Join(dir, "part_000000.csv")
	var b strings.Builder
	b.WriteString("title,url,time_added,cursor,tags,status\n")
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "Article %d,https://example.org/%d,%d,c%d,cli,archive\n", i, i, 1600000000+i, i)
	}
	b.WriteString("No URL,,1600000000,c,,unread\n")
	os.WriteFile(csv, []byte(b.String()), 0o600)

	out, err := runHearth(t, "", "import", "--member", "alice", csv, addr)
	if err != nil || !strings.Contains(out, "300 new, 0 already saved, 1 not imported") || !strings.Contains(out, "row 301: the row has no URL") {
		t.Fatalf("import: %q, %v", out, err)
	}
	out, err = runHearth(t, "", "import", "--member", "alice", "--format", "POCKET", csv, addr)
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
