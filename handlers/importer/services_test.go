package importer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Each service's export, detected from its content, read with the fields
// each keeps (testdata/README.md names where each shape comes from).
func TestServiceExportsAreDetectedAndRead(t *testing.T) {
	iso := func(s string) time.Time { v, _ := time.Parse(time.RFC3339Nano, s); return v.UTC() }
	cases := []struct {
		file    string
		format  importer.Format
		items   int
		skipped []string
		check   func(t *testing.T, items []*importer.Item)
	}{{
		"raindrop.csv", importer.Raindrop, 4, []string{"row 3: the row has no URL"},
		func(t *testing.T, items []*importer.Item) {
			it := items[0]
			if it.URL != "https://example.org/levain" || it.Title != "Le pain au levain, pas à pas" || it.Description != "Farine, eau, sel — et du temps." ||
				!it.SavedAt.Equal(iso("2024-03-02T09:15:27.512Z")) || strings.Join(it.Labels, "|") != "pain|levain|Cuisine/Pain|Starred" ||
				it.LeadImage != "https://example.org/levain.jpg" {
				t.Errorf("first row: %+v", it)
			}
			// The bookmark's note first, as the item's note (no quote, no
			// segments), then the highlights of the quoted multi-line cell
			// with their notes.
			hs := it.Highlights
			if len(hs) != 3 || hs[0].Note != "Relire avant dimanche" || hs[0].Quote != "" || hs[0].Segments != nil ||
				hs[1].Quote != "Le levain double de volume en quatre heures." || hs[1].Note != "à vérifier" || hs[2].Quote != "Cuire à 250 °C" || hs[2].Note != "" {
				t.Errorf("highlights: %+v", hs)
			}
			if g := items[1]; len(g.Labels) != 0 || len(g.Highlights) != 0 {
				t.Errorf("Unsorted and empty columns: %+v", g)
			}
			if j := items[2]; j.Title != "東京の朝、静かな通り" || strings.Join(j.Labels, "|") != "旅行|Travel" {
				t.Errorf("Unicode row: %+v", j)
			}
			// A cell without "Highlight:" lines: one highlight a paragraph.
			if p := items[3].Highlights; len(p) != 2 || p[0].Quote != "First passage, kept whole." || p[1].Quote != "Second passage\nover two lines." {
				t.Errorf("plain highlights: %+v", p)
			}
		},
	}, {
		"readwise_reader.csv", importer.ReadwiseReader, 3, []string{"row 3: a feed document"},
		func(t *testing.T, items []*importer.Item) {
			pg := items[0]
			if pg.Title != "How to Do Great Work" || strings.Join(pg.Labels, "|") != "essays|career" || pg.ReadingProgress != 42 ||
				!pg.SavedAt.Equal(iso("2024-01-31T08:15:02.123456Z")) || pg.Status != library.StatusActive {
				t.Errorf("first row: %+v", pg)
			}
			if q := items[1]; q.Title != `Quoted, with a "comma"` || q.Status != library.StatusArchived || q.ReadingProgress != 100 || len(q.Labels) != 0 {
				t.Errorf("archived row: %+v", q)
			}
			if c := items[2]; c.URL != "https://example.fr/café" || strings.Join(c.Labels, "|") != "l'été" || c.ReadingProgress != 0 {
				t.Errorf("Unicode row: %+v", c)
			}
		},
	}, {
		// Readwise's export names documents by title only: each group of
		// rows is one item to find by its title in the library.
		"readwise.csv", importer.ReadwiseHighlight, 2, nil,
		func(t *testing.T, items []*importer.Item) {
			it := items[0]
			hs := it.Highlights
			if it.URL != "" || !it.ByTitle || it.Title != "How to Do Great Work" || it.Author != "Paul Graham" || len(hs) != 2 ||
				hs[0].Note != "Start small.\nThen iterate." || !hs[0].CreatedAt.Equal(iso("2024-02-01T09:00:00Z")) || hs[1].Quote != "Curiosity is the key." ||
				!it.SavedAt.Equal(hs[0].CreatedAt) || strings.Join(it.Labels, "|") != "essays" {
				t.Errorf("grouped rows: %+v", it)
			}
			if b := items[1]; b.Title != "Middlemarch" || !b.ByTitle || len(b.Highlights) != 1 {
				t.Errorf("book row: %+v", b)
			}
		},
	}, {
		"matter.csv", importer.Matter, 2, nil,
		func(t *testing.T, items []*importer.Item) {
			if s := items[0]; s.Status != library.StatusArchived || s.Author != "Jack Cheng" || s.WordCount != 1830 ||
				strings.Join(s.Labels, "|") != "web|essays|Starred" || !s.SavedAt.Equal(iso("2024-05-06T07:08:09Z")) {
				t.Errorf("first row: %+v", s)
			}
			if n := items[1]; n.Status != library.StatusActive || n.Author != "Zoë Ç." || len(n.Labels) != 0 {
				t.Errorf("queued row: %+v", n)
			}
		},
	}, {
		"goodlinks.json", importer.GoodLinks, 3, []string{"item 4: the entry has no url"},
		func(t *testing.T, items []*importer.Item) {
			v := items[0]
			if v.URL != "https://daringfireball.net/2024/01/vision_pro" || v.Status != library.StatusArchived || v.ReadAt == nil ||
				!v.ReadAt.Equal(time.Unix(1706100000, 0)) || !v.SavedAt.Equal(time.Unix(1706000000, 0)) ||
				strings.Join(v.Labels, "|") != "apple|hardware|Starred" || v.Description != "First impressions." {
				t.Errorf("read entry: %+v", v)
			}
			// readAt absent: unread; an HTML summary kept as its text.
			if u := items[1]; u.Status != library.StatusActive || u.ReadAt != nil || u.Description != "A summary kept as the page gave it." {
				t.Errorf("unread entry: %+v", u)
			}
			if n := items[2]; n.Title != "" || len(n.Labels) != 0 || n.URL != "https://example.org/untitled" {
				t.Errorf("entry without title or tags: %+v", n)
			}
		},
	}, {
		"karakeep.json", importer.Karakeep, 2, []string{"bookmarks item 3: a text or file bookmark"},
		func(t *testing.T, items []*importer.Item) {
			s := items[0]
			if !s.SavedAt.Equal(time.Unix(1719000000, 0)) || strings.Join(s.Labels, "|") != "databases|sqlite" || len(s.Highlights) != 1 ||
				s.Highlights[0].Note != "Read the WAL part again" || s.Highlights[0].Quote != "" { // the item's note
				t.Errorf("first bookmark: %+v", s)
			}
			if a := items[1]; a.Status != library.StatusArchived || a.Title != "" {
				t.Errorf("archived bookmark: %+v", a)
			}
		},
	}, {
		"linkwarden.json", importer.Linkwarden, 2, []string{"collections item 1 link 2: the link has no url"},
		func(t *testing.T, items []*importer.Item) {
			a := items[0]
			if a.Title != "Attention Is All You Need" || a.Description != "The transformer paper" || strings.Join(a.Labels, "|") != "Research|ml" ||
				!a.SavedAt.Equal(iso("2024-02-03T04:05:06.789Z")) {
				t.Errorf("first link: %+v", a)
			}
			// importDate (when it was saved before Linkwarden) wins, as importFromLinkwarden.
			if b := items[1]; !b.SavedAt.Equal(iso("2019-05-06T07:08:09Z")) || strings.Join(b.Labels, "|") != "Unorganized" {
				t.Errorf("imported link: %+v", b)
			}
		},
	}}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			f, items, skipped := readAll(t, "testdata/"+c.file, importer.Auto)
			if f != c.format || len(items) != c.items || len(skipped) != len(c.skipped) {
				t.Fatalf("format %s, %d items, skipped %v", f, len(items), skipped)
			}
			for i, s := range c.skipped {
				if !strings.Contains(skipped[i], s) {
					t.Errorf("skipped %q, want %q", skipped[i], s)
				}
			}
			c.check(t, items)
		})
	}
}
