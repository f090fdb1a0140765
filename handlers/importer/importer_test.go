package importer_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// zipDir zips testdata/dir (its files at the archive's root) into a temp file.
func zipDir(t testing.TB, dir string) string {
	t.Helper()
	root := filepath.Join("testdata", dir)
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return writeZip(t, files)
}

func writeZip(t testing.TB, files map[string][]byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "export.zip")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, b := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

// readAll scans and reads path, returning the items and the skipped refs.
func readAll(t *testing.T, path string, format importer.Format) (importer.Format, []*importer.Item, []string) {
	t.Helper()
	got, n, err := importer.Scan(path, format, importer.Limits{})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	r, err := importer.Open(path, got, importer.Limits{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	var items []*importer.Item
	var skipped []string
	for {
		it, err := r.Next()
		if err == io.EOF {
			break
		}
		var ee *importer.EntryError
		if errors.As(err, &ee) {
			skipped = append(skipped, ee.Error())
			continue
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		items = append(items, it)
	}
	if len(items)+len(skipped) != n {
		t.Fatalf("Scan counted %d entries, reading gave %d items and %d skipped", n, len(items), len(skipped))
	}
	return got, items, skipped
}

func byURL(items []*importer.Item, u string) *importer.Item {
	for _, it := range items {
		if it.URL == u {
			return it
		}
	}
	return nil
}

func at(sec int64) time.Time { return time.Unix(sec, 0).UTC() }

func TestPocketZipIsDetectedAndKeepsDatesTagsAndStatus(t *testing.T) {
	f, items, skipped := readAll(t, zipDir(t, "pocket"), importer.Auto)
	if f != importer.PocketCSV || len(items) != 5 || len(skipped) != 1 || !strings.Contains(skipped[0], "part_000000.csv row 3") {
		t.Fatalf("format %s, %d items, skipped %v", f, len(items), skipped)
	}
	m := byURL(items, "https://www.monde-diplomatique.fr/2020/09/HALIMI/62165")
	if m == nil || m.Status != library.StatusArchived || !m.SavedAt.Equal(at(1599806347)) ||
		strings.Join(m.Labels, ";") != "history;long reads" || !strings.HasPrefix(m.Title, "Avec les accusés") {
		t.Fatalf("archived row: %+v", m)
	}
	g := byURL(items, "https://go.dev/doc/go1.26")
	if g == nil || g.Status != library.StatusActive || strings.Join(g.Labels, ";") != "go;Release Notes" {
		t.Fatalf("second part: %+v", g)
	}
	// annotations/part_000000.json: the highlights join their rows by URL,
	// with Pocket's created_at (Unix seconds), quotes with line breaks and
	// typographic quotes as written.
	if len(m.Highlights) != 2 || m.Highlights[0].Quote != "Je n’ai jamais plaidé « l’innocence » de mes clients" ||
		!m.Highlights[0].CreatedAt.Equal(at(1599900000)) || m.Highlights[1].Quote != "La guerre d’Algérie\n\nn’était pas une « opération de police »" {
		t.Fatalf("highlights of a row: %+v", m.Highlights)
	}
	if len(g.Highlights) != 1 || !g.Highlights[0].CreatedAt.Equal(at(1739500000)) {
		t.Fatalf("highlights of a row of the second part: %+v", g.Highlights)
	}
	// An entry whose URL no row has is an item of its own, after the rows,
	// saved when it was first highlighted.
	if h := items[4]; h.URL != "https://example.org/hidden-from-the-list" || len(h.Highlights) != 1 || h.Status != library.StatusActive ||
		!h.SavedAt.Equal(at(1600000000)) {
		t.Fatalf("highlights without a row: %+v", h)
	}
}

// Pocket's annotation files are read as the list is: a malformed entry is
// skipped (its row is imported without it), a file that is no JSON list
// refuses the export before anything is written.
func TestPocketAnnotationsThatAreNotAListRefuseTheFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "pocket.zip")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("part_000000.csv")
	w.Write([]byte("title,url,time_added,cursor,tags,status\nA,https://example.org/a,1600000000,x,,unread\n"))
	w, _ = zw.Create("annotations/part_000000.json")
	w.Write([]byte(`{"url":"https://example.org/a"}`))
	zw.Close()
	os.WriteFile(p, buf.Bytes(), 0o600)
	if _, _, err := importer.Scan(p, importer.Auto, importer.Limits{}); !importer.IsFileError(err) || !strings.Contains(err.Error(), "annotations/part_000000.json") {
		t.Fatalf("Scan: %v", err)
	}
}

func TestPocketCSVWithoutCursorAndAsCSVType(t *testing.T) {
	f, items, _ := readAll(t, "testdata/pocket_2020.csv", importer.CSV)
	if f != importer.PocketCSV || len(items) != 3 || items[1].Labels[0] != "agile" || items[2].Status != library.StatusArchived {
		t.Fatalf("%s %+v", f, items)
	}
}

func TestPocketHTML(t *testing.T) {
	f, items, _ := readAll(t, "testdata/ril_export.html", importer.Auto)
	if f != importer.PocketHTML || len(items) != 3 {
		t.Fatalf("%s: %d items", f, len(items))
	}
	if it := items[0]; it.Status != library.StatusActive || !it.SavedAt.Equal(at(1688628695)) ||
		strings.Join(it.Labels, ",") != "ifttt,new_entry_simple" || !strings.HasPrefix(it.Title, "Tarn : Des lapins") {
		t.Fatalf("first: %+v", it)
	}
	if it := items[2]; it.Status != library.StatusArchived || it.Labels[0] != "tech" {
		t.Fatalf("archive: %+v", it)
	}
}

func TestOmnivoreZipKeepsContentHighlightsProgressAndState(t *testing.T) {
	f, items, _ := readAll(t, zipDir(t, "omnivore"), importer.ZIP)
	if f != importer.Omnivore || len(items) != 3 {
		t.Fatalf("%s: %d items", f, len(items))
	}
	b := items[0]
	if b.Status != library.StatusArchived || b.ReadingProgress != 100 || b.Author != "Juliette Garnier" ||
		!b.SavedAt.Equal(time.Date(2024, 10, 29, 16, 30, 11, 0, time.UTC)) || b.Labels[0] != "RSS" ||
		!strings.Contains(b.HTML, "Champs-Elysées") {
		t.Fatalf("first item: %+v", b)
	}
	if len(b.Highlights) != 2 || b.Highlights[0].Quote != "La marque suisse, peu présente en Chine, veut s’étendre ailleurs en Asie." ||
		b.Highlights[0].Note != "Worth following up" ||
		b.Highlights[1].Quote != "En France, après s’être installée sur les Champs-Elysées,\nelle ouvre boutique à Lille et à Monaco." {
		t.Fatalf("highlights: %+v", b.Highlights)
	}
	if e := items[1]; e.ReadingProgress != 42.5 || len(e.Labels) != 2 || e.Status != library.StatusActive {
		t.Fatalf("second: %+v", e)
	}
	if n := items[2]; n.HTML != "" || n.URL != "https://example.com/omnivore/no-content" {
		t.Fatalf("content-less item: %+v", n)
	}
}

func TestWallabagJSON(t *testing.T) {
	f, items, skipped := readAll(t, "testdata/wallabag.json", importer.Auto)
	if f != importer.Wallabag || len(items) != 2 || len(skipped) != 1 {
		t.Fatalf("%s: %d items, skipped %v", f, len(items), skipped)
	}
	m := items[0]
	if !m.SavedAt.Equal(time.Date(2016, 9, 8, 9, 55, 58, 0, time.UTC)) || strings.Join(m.Labels, ",") != "mediapart,blog,Starred" ||
		len(m.Highlights) != 1 || m.Highlights[0].Note != "to discuss" || m.Highlights[0].Segments[0].XPath != "/div[1]/p[1]" ||
		m.Highlights[0].Segments[0].EndOffset != 46 {
		t.Fatalf("first: %+v", m)
	}
	if items[1].Status != library.StatusArchived {
		t.Fatalf("is_archived 1: %+v", items[1])
	}
}

func TestInstapaperCSV(t *testing.T) {
	f, items, _ := readAll(t, "testdata/instapaper.csv", importer.Auto)
	if f != importer.Instapaper || len(items) != 4 {
		t.Fatalf("%s: %d items", f, len(items))
	}
	if a := items[1]; a.Status != library.StatusArchived || a.Description != "A selection from the page" ||
		strings.Join(a.Labels, ",") != "web,javascript" || !a.SavedAt.Equal(at(1474329600)) {
		t.Fatalf("archived: %+v", a)
	}
	if items[2].Labels[0] != "Starred" || items[3].Labels[0] != "test_tag" || items[3].Status != library.StatusActive {
		t.Fatalf("folders: %+v %+v", items[2], items[3])
	}
}

func TestNetscapeBookmarks(t *testing.T) {
	f, items, _ := readAll(t, "testdata/bookmarks.html", importer.Auto)
	if f != importer.Bookmarks || len(items) != 4 {
		t.Fatalf("%s: %d items %+v", f, len(items), items)
	}
	p := byURL(items, "https://blog.golang.org/pipelines")
	if p == nil || p.Description != "Pipelines in Go, with cancellation." || strings.Join(p.Labels, ",") != "go,concurrency" ||
		!p.SavedAt.Equal(at(1700000004)) || !p.UpdatedAt.Equal(at(1700000500)) || p.Title != "Go Concurrency Patterns: Pipelines and cancellation" {
		t.Fatalf("pipelines: %+v", p)
	}
	if c := byURL(items, "https://caddyserver.com/docs/"); c == nil || c.Description != "" || c.Title != "Caddy Documentation" {
		t.Fatalf("caddy: %+v", c)
	}
}

func TestInboxtCSV(t *testing.T) {
	f, items, skipped := readAll(t, "testdata/inboxt.csv", importer.CSV)
	if f != importer.InboxtCSV || len(items) != 2 || len(skipped) != 1 || !strings.Contains(skipped[0], "not a date") {
		t.Fatalf("%s: %+v %v", f, items, skipped)
	}
	if b := items[0]; b.Title != "Baking Bread" || b.Description != "How to bake bread" || strings.Join(b.Labels, ",") != "kitchen,weekend" ||
		!b.SavedAt.Equal(time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("%+v", b)
	}
	if items[1].Title != `Quotes, "and" commas` {
		t.Fatalf("%+v", items[1])
	}
}

func TestInboxtZip(t *testing.T) {
	p := zipDir(t, "inboxt")
	f, items, skipped := readAll(t, p, importer.ZIP)
	if f != importer.InboxtZIP || len(items) != 3 || len(skipped) != 2 {
		t.Fatalf("%s: %d items, skipped %v", f, len(items), skipped)
	}
	s := items[0]
	if s.Status != library.StatusArchived || s.Labels[0] != "Cooking" || s.HTML != "<p>Feed it flour and water daily.</p>\n" ||
		len(s.Highlights) != 1 || s.Highlights[0].Quote != "flour and water" {
		t.Fatalf("article: %+v", s)
	}
	if n := items[1]; n.Type != library.TypeNewsletter || n.URL != "" || n.Author != "The Bread Letter" {
		t.Fatalf("newsletter: %+v", n)
	}
	if h := items[2]; h.URL != "https://example.net/saved-page" || h.Title != "Saved page" {
		t.Fatalf("standalone HTML: %+v", h)
	}
	r, _ := importer.Open(p, f, importer.Limits{})
	defer r.Close()
	if ll, ok := r.(importer.LabelLister); !ok || len(ll.ExportLabels()) != 1 || ll.ExportLabels()[0] != (importer.Label{Name: "Cooking", Color: "#e8590c"}) {
		t.Fatalf("labels not read")
	}
}

func refusal(t *testing.T, path string, format importer.Format, lim importer.Limits, want string) {
	t.Helper()
	_, _, err := importer.Scan(path, format, lim)
	if !importer.IsFileError(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Scan = %v, want a refusal saying %q", err, want)
	}
}

func writeFile(t *testing.T, b []byte) string {
	p := filepath.Join(t.TempDir(), "upload")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFilesThatAreNoExportAreRefused(t *testing.T) {
	refusal(t, writeFile(t, []byte("\x89PNG\r\n\x1a\nrest of an image")), importer.Auto, importer.Limits{}, "not an export")
	refusal(t, writeFile(t, []byte("just,some,columns\n1,2,3\n")), importer.Auto, importer.Limits{}, "not an export")
	refusal(t, writeFile(t, []byte("<html><body>hello</body></html>")), importer.Auto, importer.Limits{}, "not an export")
	refusal(t, writeFile(t, []byte("title,url,time_added,tags,status\n")), importer.Auto, importer.Limits{}, "no saved items")
	refusal(t, writeZip(t, map[string][]byte{"notes.txt": []byte("hello")}), importer.Auto, importer.Limits{}, "not an export")
	refusal(t, "testdata/wallabag.json", importer.Omnivore, importer.Limits{}, "not a zip")
	refusal(t, zipDir(t, "omnivore"), importer.PocketCSV, importer.Limits{}, "not a Pocket export")
	refusal(t, "testdata/instapaper.csv", importer.Wallabag, importer.Limits{}, "not JSON")
	refusal(t, writeFile(t, []byte(`[{"name":"a list of something else"},{"name":"b"}]`)), importer.Auto, importer.Limits{}, "no entry of the file reads as a saved item of wallabag (item 1: the entry has no url")
}

func TestZipBombTraversalAndLimitsAreRefused(t *testing.T) {
	bomb := writeZip(t, map[string][]byte{"metadata_0_to_1.json": bytes.Repeat([]byte(" "), 50<<20)})
	refusal(t, bomb, importer.Auto, importer.Limits{}, "zip bomb")
	refusal(t, writeZip(t, map[string][]byte{"../../etc/cron.d/x.html": []byte("<p>x</p>")}), importer.Auto, importer.Limits{}, "outside the archive")
	refusal(t, writeZip(t, map[string][]byte{"/abs/page.html": []byte("<p>x</p>")}), importer.Auto, importer.Limits{}, "outside the archive")
	refusal(t, "testdata/pocket_2020.csv", importer.Auto, importer.Limits{MaxUploadBytes: 100}, "larger than 100 bytes")
	refusal(t, "testdata/pocket_2020.csv", importer.Auto, importer.Limits{MaxEntries: 2}, "more than 2 entries")
	long := "title,url,time_added,tags,status\n" + strings.Repeat("x", 3000) + ",https://example.com/,1,,unread\n"
	refusal(t, writeFile(t, []byte(long)), importer.Auto, importer.Limits{MaxEntryBytes: 1000}, "longer than 1000 bytes")
	refusal(t, writeFile(t, []byte(`[{"url":"https://e.com/","content":"`+strings.Repeat("x", 3000)+`"}]`)), importer.Auto, importer.Limits{MaxEntryBytes: 1000}, "larger than 1000 bytes")
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]importer.Format{"": importer.Auto, "csv": importer.CSV, "ZIP_ARCHIVE": importer.ZIP, "pocket": importer.PocketCSV, "omnivore": importer.Omnivore} {
		if got, err := importer.ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := importer.ParseFormat("delicious"); err == nil || !strings.Contains(err.Error(), "POCKET") {
		t.Errorf("unknown format: %v", err)
	}
}

// A link's title or description made of many short pieces between tags is
// one entry too: it is bounded by MaxEntryBytes like a single long token,
// not by the upload's size (memory stays bounded per entry).
func TestBookmarkTitleOfManyPiecesIsBounded(t *testing.T) {
	head := "<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n"
	pieces := strings.Repeat("xxxxxxxxxx<b>", 300)
	title := head + `<DT><A HREF="https://example.com/">` + pieces + "</A>\n</DL>\n"
	refusal(t, writeFile(t, []byte(title)), importer.Auto, importer.Limits{MaxEntryBytes: 1000}, "longer than the import limit")
	desc := head + `<DT><A HREF="https://example.com/">t</A>` + "\n<DD>" + pieces + "\n</DL>\n"
	refusal(t, writeFile(t, []byte(desc)), importer.Auto, importer.Limits{MaxEntryBytes: 1000}, "longer than the import limit")
	pocket := "<!DOCTYPE html><html><body><h1>" + pieces + "</h1><ul><li><a href=\"https://example.com/\" time_added=\"1\">t</a></li></ul></body></html>"
	refusal(t, writeFile(t, []byte(pocket)), importer.PocketHTML, importer.Limits{MaxEntryBytes: 1000}, "longer than the import limit")
}

// A zip's entry count is checked from its end record before archive/zip
// reads the directory: a directory of many tiny entries (a 256 MiB upload
// holds millions) costs a few hundred bytes of memory per entry once read,
// so it is refused without being read. The allocations are counted, not
// timed.
func TestZipWithTooManyEntriesIsRefusedBeforeItsDirectoryIsRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "many.zip")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	const n = 70_000 // past 65535: the count is in the zip64 end record
	for i := range n {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: strconv.FormatInt(int64(i), 36), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	lim := importer.Limits{MaxEntries: 10}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err = importer.Scan(p, importer.Auto, lim)
	runtime.ReadMemStats(&after)
	if !importer.IsFileError(err) || !strings.Contains(err.Error(), "70000 files, more than an import takes (140)") {
		t.Fatalf("Scan = %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Fatalf("Scan allocated %d bytes refusing the archive: it read the directory", got)
	}
	// Under 65535 entries the count is in the plain end record.
	small := map[string][]byte{}
	for i := range 200 {
		small[strconv.Itoa(i)+".html"] = nil
	}
	refusal(t, writeZip(t, small), importer.Auto, lim, "200 files, more than an import takes (140)")
}

// archive/zip reads directory headers until one is not a header, and
// compares their number with the end record's only modulo 65536: an end
// record declaring 10 entries passes the count above on a directory of
// 65546. Such a directory is counted as it is walked, stopping past the
// limit, before archive/zip reads it. The directory is written by hand (a
// zip writer records the true count); the allocations are counted, not
// timed.
func TestZipDeclaringFewerEntriesThanItHoldsIsRefusedBeforeItsDirectoryIsRead(t *testing.T) {
	const n = 1<<16 + 10
	// One local header first, as a zip begins.
	b := make([]byte, 30, 31)
	copy(b, "PK\x03\x04")
	binary.LittleEndian.PutUint16(b[26:], 1)
	b = append(b, 'a')
	local := len(b)
	for i := range n {
		h := make([]byte, 46)
		copy(h, "PK\x01\x02")
		binary.LittleEndian.PutUint16(h[28:], 1) // a one-byte name
		b = append(append(b, h...), byte('a'+i%26))
	}
	end := make([]byte, 22)
	copy(end, "PK\x05\x06")
	binary.LittleEndian.PutUint16(end[8:], n%(1<<16))
	binary.LittleEndian.PutUint16(end[10:], n%(1<<16))
	binary.LittleEndian.PutUint32(end[12:], uint32(len(b)-local))
	binary.LittleEndian.PutUint32(end[16:], uint32(local))
	p := writeFile(t, append(b, end...))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := importer.Scan(p, importer.Auto, importer.Limits{MaxEntries: 10})
	runtime.ReadMemStats(&after)
	if !importer.IsFileError(err) || !strings.Contains(err.Error(), "has more files than an import takes (140)") {
		t.Fatalf("Scan = %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Fatalf("Scan allocated %d bytes refusing the archive: it read the directory", got)
	}
}

// An item's labels stop at library.MaxLabels (a member has no more): the
// de-duplication of an entry's tags compared each tag with every one kept,
// so the 2 million tags a 16 MiB entry holds took hours of the upload
// request's CPU.
func TestLabelsOfAnItemAreBounded(t *testing.T) {
	var tags []string
	for i := range 3 * library.MaxLabels {
		tags = append(tags, "tag"+strconv.Itoa(i))
	}
	doc := "<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n<DT><A HREF=\"https://example.com/\" TAGS=\"" + strings.Join(tags, ",") + "\">x</A>\n</DL>\n"
	_, items, _ := readAll(t, writeFile(t, []byte(doc)), importer.Auto)
	if len(items) != 1 || len(items[0].Labels) != library.MaxLabels || items[0].Labels[0] != "tag0" {
		t.Fatalf("bookmark labels: %d", len(items[0].Labels))
	}
	wb, _ := json.Marshal([]map[string]any{{"url": "https://example.com/", "title": "x", "tags": tags}})
	_, items, _ = readAll(t, writeFile(t, wb), importer.Wallabag)
	if len(items) != 1 || len(items[0].Labels) != library.MaxLabels {
		t.Fatalf("wallabag labels: %d", len(items[0].Labels))
	}
}
