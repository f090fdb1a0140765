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
	addr := startWithAlice(t, hearthCaddyfile(t.TempDir(), graphqlSites()))
	for _, c := range []struct {
		file                      string
		created, existing, failed int
	}{
		// Readwise's highlights after its Reader export: the article is
		// there already, and gets the highlights.
		{"raindrop.csv", 4, 0, 1}, {"readwise_reader.csv", 3, 0, 1}, {"readwise.csv", 0, 1, 1}, {"matter.csv", 2, 0, 0},
		{"goodlinks.json", 3, 0, 1}, {"karakeep.json", 2, 0, 1}, {"linkwarden.json", 2, 0, 1},
	} {
		file := filepath.Join("..", "handlers", "importer", "testdata", c.file)
		out, err := runHearth(t, "", "import", "--member", "alice", file, addr)
		if err != nil || !strings.Contains(out, fmt.Sprintf("%d new, %d already saved, %d not imported", c.created, c.existing, c.failed)) {
			t.Fatalf("%s: %q, %v", c.file, out, err)
		}
		out, err = runHearth(t, "", "import", "--member", "alice", file, addr)
		if err != nil || !strings.Contains(out, fmt.Sprintf("0 new, %d already saved", c.created+c.existing)) {
			t.Fatalf("%s again: %q, %v", c.file, out, err)
		}
	}
}
