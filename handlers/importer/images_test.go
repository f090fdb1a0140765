package importer_test

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// A small zip that lists a great many images it lacks (short names, 40 an
// item) costs the reader a count, not a message each: it keeps the first
// MaxImportFailures of them, all a job shows, and counts every one.
func TestMissingImagesOfManyItemsAreCountedNotKept(t *testing.T) {
	const items, each = 3000, 40
	list := make([]importer.HearthItem, items)
	for i := range list {
		imgs := make([]importer.HearthImage, each)
		for k := range imgs {
			imgs[k] = importer.HearthImage{URL: fmt.Sprintf("https://cdn.example/%d", k), File: fmt.Sprint(k)}
		}
		list[i] = importer.HearthItem{ID: fmt.Sprint(i), Type: library.TypeArticle, Status: library.StatusActive, Title: "t",
			URL: fmt.Sprintf("https://example.org/%d", i), Labels: []string{}, Highlights: []importer.HearthHighlight{}, Images: imgs}
	}
	saved, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"labels.json": []byte("[]"), "saved_items.json": saved}
	for i := range 5 {
		files[fmt.Sprintf("images/x%d/0.png", i)] = []byte("png") // no item has the id
	}
	rd, err := importer.Open(writeZip(t, files), importer.Hearth, importer.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	n := 0
	for {
		_, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	kept, more := rd.(importer.ImageSource).StrayImages()
	if n != items || len(kept) != library.MaxImportFailures || len(kept)+more != items*each+5 {
		t.Fatalf("%d items; %d strays kept and %d more, want %d and %d", n, len(kept), more, library.MaxImportFailures, items*each+5-library.MaxImportFailures)
	}
	if !sort.SliceIsSorted(kept, func(i, j int) bool { return kept[i].Ref < kept[j].Ref }) ||
		!strings.Contains(kept[0].Reason, "listed for item 0 but not in the zip") {
		t.Errorf("strays kept: %+v", kept[:3])
	}
}
