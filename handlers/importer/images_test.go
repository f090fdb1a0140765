package importer_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// A member that expands too much (a zip bomb) or is compressed as not
// every zip reader can read it refuses the file, and, an image of a Hearth
// export, is skipped: for the same reason, said the same way.
func TestAnUnreadableMemberRefusesTheFileAndSkipsAnImageAlike(t *testing.T) {
	const zstd = 93 // a method archive/zip cannot read
	write := func(name string, method uint16) string {
		item := importer.HearthItem{ID: "1", Type: library.TypeArticle, Status: library.StatusActive, Title: "t", URL: "https://example.org/1",
			Labels: []string{}, Highlights: []importer.HearthHighlight{}, Images: []importer.HearthImage{{URL: "https://cdn.example/0.png", File: "images/1/0.png"}}}
		saved, _ := json.Marshal([]importer.HearthItem{item})
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for n, b := range map[string][]byte{"labels.json": []byte("[]"), "saved_items.json": saved} {
			w, _ := zw.Create(n)
			w.Write(b)
		}
		data, hdr := make([]byte, 4<<20), &zip.FileHeader{Name: name, Method: zip.Deflate} // 4 MiB of zeros: deflated, some 4 KiB
		create := zw.CreateHeader
		if method == zstd {
			data, hdr = []byte("png"), &zip.FileHeader{Name: name, Method: zstd, CompressedSize64: 3, UncompressedSize64: 3}
			create = zw.CreateRaw
		}
		w, err := create(hdr)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "export.zip")
		if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name   string
		method uint16
		says   string
	}{{"a zip bomb", zip.Deflate, "expands more than 100 times"}, {"an unknown method", zstd, "(93)"}} {
		_, refused := importer.Open(write("notes.txt", c.method), importer.Hearth, importer.Limits{})
		rd, err := importer.Open(write("images/1/0.png", c.method), importer.Hearth, importer.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		if _, err := rd.Next(); err != nil {
			t.Fatal(err)
		}
		_, err = rd.(importer.ImageSource).Image("images/1/0.png", 8<<20)
		var ee *importer.EntryError
		if !errors.As(err, &ee) || refused == nil {
			t.Fatalf("%s: image: %v; file: %v", c.name, err, refused)
		}
		why := strings.TrimSuffix(ee.Reason, ": skipped")
		if why == ee.Reason || !strings.Contains(why, c.says) || !strings.Contains(refused.Error(), why) {
			t.Errorf("%s: the image is skipped as %q, the file refused as %q: want the same reason", c.name, ee.Reason, refused)
		}
	}
}
