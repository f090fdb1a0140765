package caddymodule

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Each service's export, imported with caddy hearth import: detected from
// the file, its items counted as the import page counts them, and a second
// import of the same file adds nothing.
func TestCLIImportsEachServiceExport(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), graphqlSites()))
	addr := "--address=" + testAdmin
	if _, err := runHearth(t, "a good password\n", "member", "add", "alice", "--password-stdin", addr); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file            string
		created, failed int
	}{
		{"raindrop.csv", 3, 1}, {"readwise_reader.csv", 3, 1}, {"readwise.csv", 1, 1}, {"matter.csv", 2, 0},
		{"goodlinks.json", 2, 1}, {"karakeep.json", 2, 1}, {"linkwarden.json", 2, 1},
	} {
		file := filepath.Join("..", "handlers", "importer", "testdata", c.file)
		out, err := runHearth(t, "", "import", "--member", "alice", file, addr)
		if err != nil || !strings.Contains(out, fmt.Sprintf("%d new, 0 already saved, %d not imported", c.created, c.failed)) {
			t.Fatalf("%s: %q, %v", c.file, out, err)
		}
		out, err = runHearth(t, "", "import", "--member", "alice", file, addr)
		if err != nil || !strings.Contains(out, fmt.Sprintf("0 new, %d already saved", c.created)) {
			t.Fatalf("%s again: %q, %v", c.file, out, err)
		}
	}
}
