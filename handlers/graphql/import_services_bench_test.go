package graphql_test

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A 10,000-row Readwise Reader CSV, and Pocket's zip of 10,000 rows with
// 5,000 highlights (annotations/part_000000.json), imported as
// BenchmarkImportPocketCSV10k is (rows written, no fetches). Figures:
// bench/README.md.
func BenchmarkImportReadwiseReaderCSV10k(b *testing.B) {
	var s strings.Builder
	s.WriteString("\ufeffTitle,URL,ID,Document tags,Saved date,Reading progress,Location,Seen\r\n")
	for i := range 10000 {
		fmt.Fprintf(&s, "Article %d,https://example.org/r/%d,01h%d,\"['tag%d', 'reading']\",2024-01-31 08:15:02.123456+00:00,0.%d,later,True\r\n", i, i, i, i%20, i%10)
	}
	p := filepath.Join(b.TempDir(), "readwise.csv")
	if err := os.WriteFile(p, []byte(s.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	benchmarkImport(b, p, 10000)
}

func BenchmarkImportPocketZipHighlights10k(b *testing.B) {
	p := filepath.Join(b.TempDir(), "pocket.zip")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	zw := zip.NewWriter(f)
	w, _ := zw.Create("part_000000.csv")
	fmt.Fprintln(w, "title,url,time_added,cursor,tags,status")
	type hl struct {
		Quote     string `json:"quote"`
		CreatedAt int64  `json:"created_at"`
	}
	type entry struct {
		URL        string `json:"url"`
		Title      string `json:"title"`
		Highlights []hl   `json:"highlights"`
	}
	var ann []entry
	for i := range 10000 {
		fmt.Fprintf(w, "Article %d,https://example.org/p/%d,%d,c%d,tag%d,unread\n", i, i, 1600000000+i, i, i%20)
		if i%4 == 0 {
			ann = append(ann, entry{URL: fmt.Sprintf("https://example.org/p/%d", i), Title: fmt.Sprintf("Article %d", i),
				Highlights: []hl{{fmt.Sprintf("A passage of article %d worth keeping.", i), 1600000500}, {"Another one.", 1600000600}}})
		}
	}
	w, _ = zw.Create("annotations/part_000000.json")
	if err := json.NewEncoder(w).Encode(ann); err != nil {
		b.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	benchmarkImport(b, p, 10000)
}
