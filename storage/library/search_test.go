package library

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library/textindex"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// waitIndexed waits until the indexer has no pending text for the member
// and the member's index is built.
func waitIndexed(t testing.TB, st *storage.Store, memberID string) {
	t.Helper()
	for i := 0; ; i++ {
		n, err := Of(st).SearchIndexBacklog(t.Context(), memberID)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if i > 3000 {
			t.Fatalf("the search index is not built after a minute (%d left)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Words of the random corpora: ASCII, letters whose case folds to another
// length or to one of several characters, punctuation.
var propWords = []string{"bread", "Bread", "BREAD", "rye", "sourdough", "crumb", "école", "ÉCOLE", "Straße", "STRASSE",
	"ΣΟΦΙΑ", "σοφια", "σοφιας", "ς", "Kelvin", "\u212Aelvin", "ſ", "İstanbul", "ıi", "naïve", "NAÏVE", "日本語", "😀",
	"a", "ab", "abc", "-", ",", ".", "!?", "o'clock", "x/y", "100%", "\"quoted\"", "tab\there"}

func propText(r *rand.Rand, words int) string {
	var b strings.Builder
	for i := 0; i < words; i++ {
		if i > 0 {
			b.WriteString([]string{" ", " ", " ", ", ", ". ", "\n"}[r.Intn(6)])
		}
		if r.Intn(20) == 0 { // a word of its own
			fmt.Fprintf(&b, "Ü%x", r.Int31())
			continue
		}
		b.WriteString(propWords[r.Intn(len(propWords))])
	}
	return b.String()
}

// propNeedle is a piece of an existing text (across word boundaries, in
// another case), or random words.
func propNeedle(r *rand.Rand, texts []string) string {
	if r.Intn(4) == 0 || len(texts) == 0 {
		return strings.TrimSpace(propText(r, 1+r.Intn(2)))
	}
	s := []rune(texts[r.Intn(len(texts))])
	if len(s) == 0 {
		return "bread"
	}
	i := r.Intn(len(s))
	j := min(len(s), i+1+r.Intn(12))
	n := string(s[i:j])
	switch r.Intn(3) {
	case 0:
		n = strings.ToUpper(n)
	case 1:
		n = strings.ToLower(n)
	}
	if strings.TrimSpace(n) == "" {
		return "rye"
	}
	return n
}

type propItem struct {
	it                       *SavedItem
	title, desc, text, label string
}

// bruteForce lists, in page order, the items of all that match.
func bruteForce(all map[string]*propItem, f ItemFilter, field SortField, desc bool) []string {
	needle := FoldText(strings.TrimSpace(f.Text))
	type hit struct {
		id  string
		suf []byte
	}
	var hits []hit
	for id, p := range all {
		it := p.it
		if f.Status != StatusAll && it.Status != f.Status {
			continue
		}
		if f.Type != "" && it.Type != f.Type {
			continue
		}
		if f.Site != "" && !strings.Contains(strings.ToLower(it.SourceDomain), strings.ToLower(f.Site)) {
			continue
		}
		if len(f.LabelsAll) > 0 && p.label != f.LabelsAll[0][0] {
			continue
		}
		if f.HasHighlights != nil && (it.HighlightCount > 0) != *f.HasHighlights {
			continue
		}
		if (f.SavedFrom != nil && it.CreatedAt.Before(*f.SavedFrom)) || (f.SavedTo != nil && !it.CreatedAt.Before(*f.SavedTo)) {
			continue
		}
		if (f.UpdatedFrom != nil && it.UpdatedAt.Before(*f.UpdatedFrom)) || (f.UpdatedTo != nil && !it.UpdatedAt.Before(*f.UpdatedTo)) {
			continue
		}
		if needle != "" && !strings.Contains(FoldText(p.title), needle) && !strings.Contains(FoldText(p.desc), needle) &&
			!strings.Contains(FoldText(p.text), needle) {
			continue
		}
		hits = append(hits, hit{id, itemSortValue(it, field)})
	}
	sort.Slice(hits, func(a, b int) bool {
		c := bytes.Compare(hits[a].suf, hits[b].suf)
		if desc {
			return c > 0
		}
		return c < 0
	})
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.id
	}
	return out
}

// allPages pages through SavedItemsPage and returns the ids in order.
func allPages(t *testing.T, st *storage.Store, memberID string, f ItemFilter, field SortField, desc bool, size int) []string {
	t.Helper()
	var out []string
	after := ""
	for n := 0; n < 1000; n++ {
		page, err := Of(st).SavedItemsPage(t.Context(), memberID, f, PageRequest{Field: field, Desc: desc, First: size, After: after})
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		for _, it := range page.Items {
			out = append(out, it.ID)
		}
		if !page.HasNext {
			return out
		}
		after = page.Cursors[len(page.Cursors)-1]
	}
	t.Fatal("more than 1000 pages")
	return nil
}

// Indexed answers equal a brute-force scan on random corpora and queries:
// substrings across word boundaries, other cases, non-ASCII folding,
// punctuation, with filters and every sort order, while items are added,
// changed and deleted (before and after the indexer caught up).
func TestSearchMatchesBruteForce(t *testing.T) {
	for seed := int64(1); seed <= 9; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			o := testOptions()
			if seed%2 == 0 {
				// Candidate sets over the limit: the scan along the sort
				// order, with the filters' ids as a prefilter.
				o.candidateFloor = 1
			}
			if seed%3 == 0 {
				// Filters over the id cap: narrowed by point lookups in
				// their keys, or left to the match of each item.
				o.maxSourceItems = 6 + int(seed)
			}
			switch seed % 4 {
			case 1, 3:
				// Every combination of filters by candidates (read one
				// by one), or by a prefilter of the walk, whatever the
				// cost model would choose; narrowed by reading and by
				// point lookups in turn.
				o.forcePlan = []planKind{planCandidates, planPrefilter}[seed%4/2]
			case 2:
				// Pages in the order of createdAt with a type or
				// has:highlights: the walk of that filter's ordered
				// keys, the others probed by key or matched in turn.
				o.forcePlan = planOrdered
			}
			r := rand.New(rand.NewSource(seed))
			st := openTest(t, o)
			m, err := members.Of(st).CreateMember(t.Context(), "alice", "", "correct horse")
			if err != nil {
				t.Fatal(err)
			}
			var labels []*Label
			for _, name := range []string{"one", "two", "three"} {
				l, err := Of(st).CreateLabel(t.Context(), m.ID, name, "#000000")
				if err != nil {
					t.Fatal(err)
				}
				labels = append(labels, l)
			}
			domains := []string{"bread.example", "www-rye.example", "ÉCOLE.example", "crumb.org"}
			all := map[string]*propItem{}
			var texts []string
			save := func(n int) {
				p := &propItem{title: propText(r, 1+r.Intn(4)), desc: propText(r, r.Intn(6)), text: propText(r, r.Intn(60))}
				in := NewItem{URL: fmt.Sprintf("https://%s/%d", domains[r.Intn(len(domains))], n), Title: p.title,
					Description: p.desc, Text: p.text, HTML: "<p>" + p.text + "</p>", SourceDomain: domains[r.Intn(len(domains))]}
				if r.Intn(5) == 0 {
					in.Type, in.URL = TypeNewsletter, ""
				}
				if r.Intn(2) == 0 {
					l := labels[r.Intn(len(labels))]
					in.LabelIDs, p.label = []string{l.ID}, l.Name
				}
				it, _, err := Of(st).SaveItem(t.Context(), m.ID, in)
				if err != nil {
					t.Fatal(err)
				}
				p.title, p.desc = strings.TrimSpace(p.title), strings.TrimSpace(p.desc)
				p.it = it
				all[it.ID] = p
				texts = append(texts, p.title, p.desc, p.text)
			}
			refresh := func() {
				for id, p := range all {
					it, err := Of(st).SavedItem(t.Context(), m.ID, id)
					if err != nil {
						t.Fatal(err)
					}
					p.it = it
				}
			}
			check := func(round int) {
				for q := 0; q < 40; q++ {
					f := ItemFilter{Status: StatusAll, Text: propNeedle(r, texts)}
					var some []*SavedItem
					for _, p := range all {
						some = append(some, p.it)
					}
					sort.Slice(some, func(a, b int) bool { return some[a].ID < some[b].ID })
					switch r.Intn(9) {
					case 7, 8:
						// Two filters with keys of their own (any
						// pair, whatever their selectivity).
						yes := true
						pairs := []func(){
							func() { f.Type = []string{TypeArticle, TypeNewsletter}[r.Intn(2)] },
							func() { f.LabelsAll = append(f.LabelsAll, []string{labels[r.Intn(len(labels))].Name}) },
							func() { f.Site = []string{"bread", "rye", "école", "org", ".example"}[r.Intn(5)] },
							func() { f.HasHighlights = &yes },
							func() {
								a, b := some[r.Intn(len(some))].CreatedAt, some[r.Intn(len(some))].CreatedAt
								if b.Before(a) {
									a, b = b, a
								}
								f.SavedFrom, f.SavedTo = &a, &b
							},
						}
						for _, i := range r.Perm(len(pairs))[:2] {
							pairs[i]()
						}
						if r.Intn(3) == 0 { // in: besides
							f.Status = []string{StatusActive, StatusArchived, StatusDeleted}[r.Intn(3)]
						}
						if r.Intn(3) > 0 {
							f.Text = ""
						}
					case 5:
						a, b := some[r.Intn(len(some))].CreatedAt, some[r.Intn(len(some))].CreatedAt
						f.SavedFrom, f.SavedTo = &a, &b
						if r.Intn(2) == 0 {
							f.Text = ""
						}
					case 6:
						a, b := some[r.Intn(len(some))].UpdatedAt, some[r.Intn(len(some))].UpdatedAt
						f.UpdatedFrom = &a
						if r.Intn(2) == 0 {
							f.UpdatedTo = &b
						}
					case 0:
						f.Status = []string{StatusActive, StatusArchived, StatusDeleted}[r.Intn(3)]
					case 1:
						f.Type = []string{TypeArticle, TypeNewsletter}[r.Intn(2)]
						if r.Intn(2) == 0 {
							f.Status = []string{StatusActive, StatusArchived, StatusDeleted}[r.Intn(3)]
						}
					case 2:
						f.Site = []string{"bread", "rye", "école", "org", "nothing"}[r.Intn(5)]
					case 3:
						f.LabelsAll = [][]string{{labels[r.Intn(len(labels))].Name}}
					case 4:
						yes := true
						f.HasHighlights = &yes
						if r.Intn(2) == 0 {
							f.Text = ""
						}
					}
					field := []SortField{SortCreatedAt, SortUpdatedAt, SortTitle, SortWordCount, SortReadingProgress}[r.Intn(5)]
					desc := r.Intn(2) == 0
					want := bruteForce(all, f, field, desc)
					got := allPages(t, st, m.ID, f, field, desc, 1+r.Intn(7))
					if !slices.Equal(got, want) {
						t.Fatalf("round %d, %q (%+v), %s desc %v:\n got %v\nwant %v", round, f.Text, f, field, desc, got, want)
					}
				}
			}
			Of(st).state().indexPaused.Store(true)
			defer Of(st).state().indexPaused.Store(false)
			for n := 0; n < 30; n++ {
				save(n)
			}
			check(0) // every text pending
			Of(st).state().indexPaused.Store(false)
			Of(st).textIndex().Notify(m.ID)
			waitIndexed(t, st, m.ID)
			Of(st).state().indexPaused.Store(true)
			for n := 30; n < 60; n++ {
				save(n)
			}
			check(1) // half pending
			Of(st).state().indexPaused.Store(false)
			Of(st).textIndex().Notify(m.ID)
			waitIndexed(t, st, m.ID)
			check(4)
			// The index keeps no copy of the texts.
			if err := st.View(t.Context(), func(tx *storage.Tx) error {
				return tx.Scan(textKey(m.ID, ""), nil, false, true, func(k, _ []byte) (bool, error) {
					return false, fmt.Errorf("a text record %q", k)
				})
			}); err != nil {
				t.Fatal(err)
			}
			// Changes: new texts, new titles, statuses, highlights, deletions.
			var ids []string
			for id := range all {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for i, id := range ids {
				p := all[id]
				switch i % 6 {
				case 0:
					title, desc := propText(r, 2), propText(r, 3)
					if _, err := Of(st).UpdateItemMetadata(t.Context(), m.ID, id, ItemMetadata{Title: &title, Description: &desc}); err != nil {
						t.Fatal(err)
					}
					p.title, p.desc = strings.TrimSpace(title), strings.TrimSpace(desc)
					texts = append(texts, p.title, p.desc)
				case 1:
					if p.it.OriginalURL != "" {
						text := propText(r, 30)
						if _, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: p.it.OriginalURL, Title: p.title, Description: p.desc, Text: text,
							SourceDomain: p.it.SourceDomain}); err != nil {
							t.Fatal(err)
						}
						p.text = text
						texts = append(texts, text)
					}
				case 2:
					if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{id}, []string{StatusArchived, StatusDeleted}[r.Intn(2)]); err != nil {
						t.Fatal(err)
					}
				case 3:
					if _, err := Of(st).CreateHighlight(t.Context(), m.ID, id, []HighlightSegment{{XPath: "/p[1]", StartOffset: 0, EndOffset: 1, Text: "x"}}, ""); err != nil {
						t.Fatal(err)
					}
				case 4:
					if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{id}, StatusDeleted); err != nil {
						t.Fatal(err)
					}
					if err := Of(st).PermanentlyDeleteItems(t.Context(), m.ID, []string{id}); err != nil {
						t.Fatal(err)
					}
					delete(all, id)
				}
			}
			Of(st).state().indexPaused.Store(true)
			for n := 60; n < 80; n++ {
				save(n)
			}
			refresh()
			check(2) // the changes pending
			Of(st).state().indexPaused.Store(false)
			Of(st).textIndex().Notify(m.ID)
			waitIndexed(t, st, m.ID)
			check(3)
			checkFilterCounts(t, st, m.ID)
		})
	}
}

func pageIDs(p *ItemPage) []string {
	var out []string
	for _, it := range p.Items {
		out = append(out, it.ID)
	}
	return out
}

// A search that would read more than the budget answers
// ErrSearchTooBroad and does not scan on.
func TestSearchBudget(t *testing.T) {
	st, m := openAlice(t)
	var err error
	// Short needles cannot use trigrams: a two-byte string in no item
	// scans, and past maxVerified the scan stops.
	for i := 0; i < maxVerified+10; i += 500 {
		err := st.Update(t.Context(), func(tx *storage.Tx) error {
			for j := i; j < i+500; j++ {
				it := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeArticle, Status: StatusActive, Title: "t", CreatedAt: storage.Now(), UpdatedAt: storage.Now()}
				if err := writeItem(tx, itemChange{it: it, content: &ItemContent{Text: "plain words"}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Update(t.Context(), func(tx *storage.Tx) error { return tx.Put(textReadyKey(m.ID), []byte{searchIndexVersion}, 0) }); err != nil {
		t.Fatal(err)
	}
	_, err = Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: "qz"}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
	if !errors.Is(err, ErrSearchTooBroad) {
		t.Fatalf("a two-letter search over %d items: %v, want ErrSearchTooBroad", maxVerified+10, err)
	}
	// A frequent short needle fills its page long before the budget.
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: "wo"}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
	if err != nil || len(page.Items) != 10 {
		t.Fatalf("frequent two-letter search: %v, %v", page, err)
	}
	// A rare three-letter needle uses the index once indexed.
	waitIndexed(t, st, m.ID)
	page, err = Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: "xyz"}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("rare word: %v, %v", page, err)
	}
}

// Case folding as documented: simple Unicode folding, one character for
// one; no multi-character folds, no removal of diacritics.
func TestSearchCaseFolding(t *testing.T) {
	st, m := openAlice(t)
	texts := map[string]string{"sigma": "ΣΟΦΙΑΣ ΚΑΙ", "kelvin": "300 \u212Aelvin", "strasse": "Straße", "naive": "naïve", "ascii": "Sourdough Bread"}
	ids := map[string]string{}
	for name, text := range texts {
		it, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/" + name, Title: "t", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = it.ID
	}
	cases := map[string]string{"σοφιας": "sigma", "σοφιασ": "sigma", "ΣΟΦΙΑς": "sigma", "kelvin": "kelvin", "KELVIN": "kelvin",
		"STRASSE": "", "strasse": "", "STRAßE": "strasse", "naive": "", "NAÏVE": "naive", "dOUGH br": "ascii"}
	for round := 0; round < 2; round++ { // pending, then indexed
		for q, want := range cases {
			page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: q}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
			if err != nil {
				t.Fatal(err)
			}
			var w []string
			if want != "" {
				w = []string{ids[want]}
			}
			if got := pageIDs(page); !slices.Equal(got, w) {
				t.Fatalf("round %d: %q found %v, want %v (%s)", round, q, got, w, want)
			}
		}
		waitIndexed(t, st, m.ID)
	}
}

// Imported items are searchable like saved ones (the import writes their
// text records and queues them in its own transactions).
func TestSearchFindsImportedItems(t *testing.T) {
	st, m := openSavedTest(t)
	if _, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/first", Title: "First", Text: "plain"}); err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, st, m.ID)
	var entries []ImportEntry
	for i := 0; i < 30; i++ {
		entries = append(entries, ImportEntry{Pos: i + 1, Ref: fmt.Sprint("row ", i), Item: &ImportItem{
			URL: fmt.Sprintf("https://example.com/imported/%d", i), Title: fmt.Sprint("Imported ", i),
			CreatedAt: time.Date(2020, 1, 1, 0, i, 0, 0, time.UTC), Status: StatusActive,
			HTML: "<p>x</p>", Text: fmt.Sprintf("an imported article with the word Quokka%02d in it", i)}})
	}
	j, err := Of(st).CreateImportJob(t.Context(), &ImportJob{MemberID: m.ID, Format: "POCKET", FileName: "x.zip", Staged: "/tmp/x", Total: 30})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, entries, nil, 0); err != nil {
		t.Fatal(err)
	}
	for pass := 0; pass < 2; pass++ { // queued, then indexed
		for _, q := range []string{"quokka07", "QUOKKA2", "imported article with"} {
			page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: q}, PageRequest{Field: SortCreatedAt, Desc: true, First: 50})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"quokka07": 1, "QUOKKA2": 10, "imported article with": 30}[q]
			if len(page.Items) != want {
				t.Fatalf("pass %d: %q found %d imported items, want %d", pass, q, len(page.Items), want)
			}
		}
		waitIndexed(t, st, m.ID)
	}
}

// TestContentTextFolded: the text of a content record read by
// appendContentTextFolded is the folded text encoding/json decodes, for
// texts with every kind of escape (quotes, backslashes, control
// characters, HTML's <>&, U+2028, characters outside the BMP as surrogate
// pairs, invalid UTF-8), and for records of another form.
func TestContentTextFolded(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	parts := []string{"a", "Bread", "\"", "\\", "\n", "\t", "\x00", "\x1f", "<p class=\"x\">", "&amp;", "\u2028", "😀", "ΣΟΦΙΑ",
		"\u212Aelvin", "\xff", "\xc3", "/", "\\u0041", "ſ", " "}
	for n := 0; n < 2000; n++ {
		var text, html strings.Builder
		for range r.Intn(30) {
			text.WriteString(parts[r.Intn(len(parts))])
			html.WriteString(parts[r.Intn(len(parts))])
		}
		rec, err := json.Marshal(ItemContent{HTML: html.String(), Text: text.String()})
		if err != nil {
			t.Fatal(err)
		}
		var c ItemContent
		if err := json.Unmarshal(rec, &c); err != nil {
			t.Fatal(err)
		}
		want := textindex.AppendFold(nil, c.Text)
		got, err := appendContentTextFolded([]byte("x"), rec)
		if err != nil || !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Fatalf("%s:\n got %q (%v)\nwant %q", rec, got, err, want)
		}
	}
	for _, rec := range []string{`{"text":"Abc","html":"<p>"}`, `{"html":"x", "text":"Abc"}`, `{"text":"Abc"}`} {
		if got, err := appendContentTextFolded(nil, []byte(rec)); err != nil || string(got) != "abc" {
			t.Errorf("%s: %q (%v), want \"abc\"", rec, got, err)
		}
	}
	if _, err := appendContentTextFolded(nil, []byte(`{"html":"x","text":"unterminated`)); err == nil {
		t.Error("a damaged record read without error")
	}
}

// A word in more items than a page reads one by one, but in few of them:
// the walk along the sort order reads the text only of the items the text
// index lets through (textindex.Filter), and of those whose text waits in
// its queue, and finds exactly what reading every text finds.
func TestSearchWalkFilteredByTheTextIndex(t *testing.T) {
	st, m := openSavedTest(t)
	const n = 1600
	base := storage.Now().Add(-time.Hour)
	has := map[string]bool{} // the items whose text holds the word
	var ids []string
	write := func(tx *storage.Tx, old *SavedItem, i int, text string) error {
		it := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeArticle, Status: StatusActive, Title: "t",
			CreatedAt: base.Add(time.Duration(i) * time.Second)}
		if old != nil {
			c := *old
			it = &c
		}
		it.UpdatedAt = storage.Now()
		has[it.ID] = strings.Contains(text, "quillwort")
		return writeItem(tx, itemChange{old: old, it: it, content: &ItemContent{Text: text}})
	}
	for i := 0; i < n; i += 400 {
		if err := st.Update(t.Context(), func(tx *storage.Tx) error {
			for j := i; j < i+400; j++ {
				text := fmt.Sprintf("plain words of item %d", j)
				switch {
				case j%16 == 0:
					text += " a quillwort"
				case j%40 == 5:
					text += " quill illwort" // every trigram, not the word
				}
				if err := write(tx, nil, j, text); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		return tx.Scan(itemIndexPrefix(m.ID, StatusActive, SortCreatedAt), nil, true, true, func(k, _ []byte) (bool, error) {
			ids = append(ids, strconv.FormatUint(binary.BigEndian.Uint64(k[len(k)-8:]), 10))
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, st, m.ID)
	// Texts changed while the indexer waits: the word added to two items
	// and taken from one, their new texts in the queue.
	Of(st).state().indexPaused.Store(true)
	defer Of(st).state().indexPaused.Store(false)
	if err := st.Update(t.Context(), func(tx *storage.Tx) error {
		for _, c := range []struct {
			i    int
			text string
		}{{3, "now a quillwort"}, {1597, "quillwort too"}, {1584, "no longer"}} {
			var old SavedItem
			if err := getItem(tx, itemKey(m.ID, ids[n-1-c.i]), &old); err != nil {
				return err
			}
			if err := write(tx, &old, c.i, c.text); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, id := range ids {
		if has[id] {
			want = append(want, id)
		}
	}
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		_, small, filter, err := textCandidates(tx, m.ID, []byte("quillwort"), defaultOptions().candidateFloor)
		if err == nil && (small || filter == nil) {
			err = fmt.Errorf("the text index gives small %v, a filter %v; want a filter", small, filter != nil)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{7, 50} {
		if got := allPages(t, st, m.ID, ItemFilter{Text: "QuillWort"}, SortCreatedAt, true, size); !slices.Equal(got, want) {
			t.Fatalf("pages of %d:\n got %v\nwant %v", size, got, want)
		}
	}
}
