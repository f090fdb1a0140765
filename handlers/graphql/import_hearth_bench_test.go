package graphql_test

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Hearth's own export imported into an empty member: 1,000 items with
// content (as the Omnivore file's, without highlights), without images and
// with two images an item (48 KiB each, PNG by their bytes, stored in the
// zip as the export stores them), which the import stores one a
// transaction as the site's fetches do. Figures: bench/README.md.

func BenchmarkImportHearthZip1k(b *testing.B) {
	benchmarkImport(b, hearthExportZip(b, 1000, 0), 1000)
}

func BenchmarkImportHearthZip1kImages(b *testing.B) {
	benchmarkImport(b, hearthExportZip(b, 1000, 2), 1000)
}

// benchImageBytes is the size of each image of hearthExportZip.
const benchImageBytes = 48 << 10

// hearthExportZip writes a Hearth export of n items, each with images
// stored images, as handlers/export lays it out (labels.json,
// saved_items.json listing each item's images, images/<id>/<n>.png).
func hearthExportZip(b testing.TB, n, images int) string {
	b.Helper()
	p := filepath.Join(b.TempDir(), "hearth-export.zip")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	zw := zip.NewWriter(f)
	w, _ := zw.Create("labels.json")
	w.Write([]byte(`[{"name":"bread","color":"#aa5500","order":1}]`))
	para := "Sourdough needs patience, warm water and a lively starter that doubles in size overnight. "
	items := make([]map[string]any, 0, n)
	for i := range n {
		id := fmt.Sprintf("%d", 100000+i)
		u := fmt.Sprintf("https://site%d.example/a/%d", i%40, i)
		var html, text strings.Builder
		fmt.Fprintf(&html, "<h1>Article %d</h1>", i)
		for k := range 60 {
			fmt.Fprintf(&html, "<p>%s%d</p>", para, k)
			fmt.Fprintf(&text, "%s%d\n", para, k)
		}
		var list []map[string]string
		for k := range images {
			src := fmt.Sprintf("https://cdn%d.example/img/%d-%d.png", i%40, i, k)
			fmt.Fprintf(&html, `<p><img src="%s" alt="Picture %d"></p>`, src, k)
			list = append(list, map[string]string{"url": src, "file": fmt.Sprintf("images/%s/%d.png", id, k)})
		}
		it := map[string]any{
			"id": id, "type": "ARTICLE", "status": []string{"ACTIVE", "ARCHIVED"}[i%2], "title": fmt.Sprintf("Article %d", i),
			"url": u, "author": "A. Baker", "word_count": 900, "reading_progress": float64(i % 100), "read_at": nil,
			"created_at": time.Unix(1700000000+int64(i), 0).UTC(), "updated_at": time.Unix(1700000500+int64(i), 0).UTC(),
			"labels": []string{"bread"}, "highlights": []any{}, "content_html": html.String(), "content_text": text.String(),
		}
		if images > 0 {
			it["images"] = list
		}
		items = append(items, it)
	}
	w, _ = zw.Create("saved_items.json")
	if err := json.NewEncoder(w).Encode(items); err != nil {
		b.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, benchImageBytes)
	for i := range n {
		for k := range images {
			copy(data, "\x89PNG\r\n\x1a\n")
			for j := 8; j < len(data); j += 8 {
				v := rnd.Uint64()
				for x := 0; x < 8 && j+x < len(data); x++ {
					data[j+x] = byte(v >> (8 * x))
				}
			}
			w, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("images/%d/%d.png", 100000+i, k), Method: zip.Store})
			if err != nil {
				b.Fatal(err)
			}
			w.Write(data)
		}
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	return p
}
