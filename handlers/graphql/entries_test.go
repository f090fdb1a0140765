package graphql_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// day is t's date in UTC, as the search's saved: and updated: read it.
func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// stamped lists the ids of items whose stamp falls on a day from from to
// to (either "" for no bound): what a search by those dates answers, from
// the stamps the store gave: when midnight UTC passes while a test saves
// its items, the later ones are on the next day, for the test as for the
// server.
func stamped(items []*library.SavedItem, stamp func(*library.SavedItem) time.Time, from, to string) []string {
	var out []string
	for _, it := range items {
		if d := day(stamp(it)); (from == "" || d >= from) && (to == "" || d <= to) {
			out = append(out, it.ID)
		}
	}
	return out
}

func savedAt(it *library.SavedItem) time.Time   { return it.CreatedAt }
func updatedAt(it *library.SavedItem) time.Time { return it.UpdatedAt }

// seed saves n articles with repeated titles, word counts and progress
// values, so every sort has ties that only the id breaks.
func seed(e *env, n int) map[string]bool {
	all := map[string]bool{}
	for i := 0; i < n; i++ {
		it := e.saveArticle(e.member.ID, i, func(in *library.NewItem) {
			in.Title = fmt.Sprintf("%c title", 'a'+i%7)
			if i%2 == 0 {
				in.Title = strings.ToUpper(in.Title)
			}
			in.WordCount = (i % 11) * 100
		})
		if i%3 == 0 {
			if _, err := library.Of(e.store).UpdateReadingProgress(context.Background(), e.member.ID, it.ID, float64(i%5*20)); err != nil {
				e.t.Fatal(err)
			}
		}
		all[it.ID] = true
	}
	return all
}

func sortKey(en entry, field string) string {
	switch field {
	case "createdAt":
		return en.CreatedAt
	case "updatedAt":
		return en.UpdatedAt
	case "title":
		return strings.ToLower(en.Title)
	case "wordCount":
		return fmt.Sprintf("%012.0f", en.WordCount)
	case "readingProgress":
		return fmt.Sprintf("%08.2f", *en.ReadingProgress)
	}
	panic(field)
}

func TestEntriesPaginationLoopVisitsEveryItemOnceUnderEverySort(t *testing.T) {
	e := newEnv(t, options{})
	all := seed(e, 230)
	for _, field := range []string{"createdAt", "updatedAt", "title", "wordCount", "readingProgress"} {
		for _, dir := range []string{"asc", "desc"} {
			t.Run(field+"-"+dir, func(t *testing.T) {
				got := e.allEntries(map[string]any{"first": 17, "sort": map[string]any{"field": field, "direction": dir}})
				seen := map[string]bool{}
				for i, en := range got {
					if seen[en.ID] {
						t.Fatalf("item %s repeated", en.ID)
					}
					seen[en.ID] = true
					if i == 0 {
						continue
					}
					a, b := sortKey(got[i-1], field), sortKey(en, field)
					if dir == "asc" && a > b || dir == "desc" && a < b {
						t.Fatalf("out of order at %d: %q then %q", i, a, b)
					}
				}
				if len(seen) != len(all) {
					t.Fatalf("saw %d items, want %d", len(seen), len(all))
				}
			})
		}
	}
}

func TestEntriesLastPageHasNoNextPage(t *testing.T) {
	e := newEnv(t, options{})
	seed(e, 40)
	p := e.entries(map[string]any{"first": 20})
	if !p.Entries.PageInfo.HasNextPage || p.Entries.PageInfo.HasPreviousPage {
		t.Fatalf("first page pageInfo = %+v", p.Entries.PageInfo)
	}
	p = e.entries(map[string]any{"first": 20, "after": *p.Entries.PageInfo.EndCursor})
	if len(p.Entries.Edges) != 20 || p.Entries.PageInfo.HasNextPage || !p.Entries.PageInfo.HasPreviousPage {
		t.Fatalf("last page: %d edges, pageInfo %+v", len(p.Entries.Edges), p.Entries.PageInfo)
	}
	if *p.Entries.PageInfo.EndCursor != p.Entries.Edges[19].Cursor || *p.Entries.PageInfo.StartCursor != p.Entries.Edges[0].Cursor {
		t.Fatal("endCursor/startCursor are not the cursors of the last/first edge")
	}
}

func TestEntriesEmptyListHasNoCursor(t *testing.T) {
	e := newEnv(t, options{})
	p := e.entries(map[string]any{"first": 20})
	if len(p.Entries.Edges) != 0 || p.Entries.PageInfo.HasNextPage || p.Entries.PageInfo.EndCursor != nil {
		t.Fatalf("empty list: %+v", p.Entries)
	}
}

func TestEntriesPaginationNeitherSkipsNorRepeatsWhileItemsChange(t *testing.T) {
	for _, dir := range []string{"asc", "desc"} {
		t.Run(dir, func(t *testing.T) {
			e := newEnv(t, options{})
			var order []string
			for i := 0; i < 60; i++ {
				order = append(order, e.saveArticle(e.member.ID, i, nil).ID)
			}
			q := map[string]any{"first": 10, "q": "in:inbox", "sort": map[string]any{"field": "createdAt", "direction": dir}}
			seen := map[string]int{}
			removed := map[string]bool{}
			added := 0
			for page := 0; ; page++ {
				p := e.entries(q)
				for _, ed := range p.Entries.Edges {
					seen[ed.Node.ID]++
					if removed[ed.Node.ID] {
						t.Fatalf("removed item %s listed", ed.Node.ID)
					}
				}
				if !p.Entries.PageInfo.HasNextPage {
					break
				}
				q["after"] = *p.Entries.PageInfo.EndCursor
				// Between pages: save new items, trash one already seen and one
				// not yet seen, and archive another one not yet seen.
				for k := 0; k < 3; k++ {
					e.saveArticle(e.member.ID, 1000+added, nil)
					added++
				}
				var unseen []string
				for _, id := range order {
					if seen[id] == 0 && !removed[id] {
						unseen = append(unseen, id)
					}
				}
				if len(unseen) > 2 {
					victim := unseen[len(unseen)/2]
					if _, err := library.Of(e.store).SetItemsStatus(t.Context(), e.member.ID, []string{victim}, library.StatusDeleted); err != nil {
						t.Fatal(err)
					}
					removed[victim] = true
				}
				if _, err := library.Of(e.store).SetItemsStatus(t.Context(), e.member.ID, []string{p.Entries.Edges[0].Node.ID}, library.StatusArchived); err != nil {
					t.Fatal(err)
				}
			}
			for id, n := range seen {
				if n > 1 {
					t.Fatalf("item %s listed %d times", id, n)
				}
			}
			for _, id := range order {
				if !removed[id] && seen[id] != 1 {
					t.Fatalf("item %s, present throughout, was skipped", id)
				}
			}
		})
	}
}

func TestEntriesFirstDefaultsTo20AndIsCappedAt100(t *testing.T) {
	e := newEnv(t, options{})
	seed(e, 130)
	var p entriesPage
	e.do(`query { entries(query: {}) { edges { cursor } pageInfo { hasNextPage } } }`, nil, &p)
	if len(p.Entries.Edges) != 20 {
		t.Fatalf("default page size = %d, want 20", len(p.Entries.Edges))
	}
	got := e.entries(map[string]any{"first": 500})
	if len(got.Entries.Edges) != 100 || !got.Entries.PageInfo.HasNextPage {
		t.Fatalf("first: 500 gave %d edges, hasNextPage %v; want 100 and true", len(got.Entries.Edges), got.Entries.PageInfo.HasNextPage)
	}
	if got := e.allEntries(map[string]any{"first": 500}); len(got) != 130 {
		t.Fatalf("paging with first: 500 lists %d items, want 130", len(got))
	}
}

// Inboxt's cursor is the item's id (saved-item.service.ts getPaginated:
// cursor { id: after }, Inboxt/inboxt@45f4314); after takes it as well as
// Hearth's cursors, under every sort, whatever the item's status.
func TestEntriesAfterAcceptsAnItemID(t *testing.T) {
	e := newEnv(t, options{})
	seed(e, 25)
	for _, field := range []string{"createdAt", "title", "wordCount"} {
		for _, dir := range []string{"asc", "desc"} {
			sortArg := map[string]any{"field": field, "direction": dir}
			all := ids(e.allEntries(map[string]any{"first": 100, "sort": sortArg}))
			for _, i := range []int{0, 7, 24} {
				p := e.entries(map[string]any{"first": 5, "sort": sortArg, "after": all[i]})
				want := all[i+1 : min(i+6, len(all))]
				var got []string
				for _, ed := range p.Entries.Edges {
					got = append(got, ed.Node.ID)
				}
				if strings.Join(got, ",") != strings.Join(want, ",") || p.Entries.PageInfo.HasNextPage != (i+6 < len(all)) {
					t.Fatalf("%s %s after item %d: got %v (next %v), want %v", field, dir, i, got, p.Entries.PageInfo.HasNextPage, want)
				}
			}
			// An item now in the trash still marks the place in the inbox.
			if _, err := library.Of(e.store).SetItemsStatus(t.Context(), e.member.ID, []string{all[10]}, library.StatusDeleted); err != nil {
				t.Fatal(err)
			}
			p := e.entries(map[string]any{"first": 1, "q": "in:inbox", "sort": sortArg, "after": all[10]})
			if len(p.Entries.Edges) != 1 || p.Entries.Edges[0].Node.ID != all[11] {
				t.Fatalf("%s %s after a trashed item: %+v", field, dir, p.Entries.Edges)
			}
			if _, err := library.Of(e.store).SetItemsStatus(t.Context(), e.member.ID, []string{all[10]}, library.StatusActive); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := e.wantError(e.token, entriesQuery, map[string]any{"query": map[string]any{"first": 2, "after": "12345"}}, 200, "BAD_USER_INPUT")
	if !strings.Contains(r.Errors[0].Detail(), "12345") {
		t.Fatalf("message %q", r.Errors[0].Detail())
	}
	bob, _ := e.newMember("bob")
	other := e.saveArticle(bob.ID, 1, nil)
	e.wantError(e.token, entriesQuery, map[string]any{"query": map[string]any{"first": 2, "after": other.ID}}, 200, "BAD_USER_INPUT")
}

func TestEntriesTypenameResolvesSavedItemAndHighlight(t *testing.T) {
	e := newEnv(t, options{})
	art := e.saveArticle(e.member.ID, 1, nil)
	nl, _, err := library.Of(e.store).SaveItem(t.Context(), e.member.ID, library.NewItem{Type: library.TypeNewsletter, Title: "Weekly", HTML: "<p>hi</p>", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(e.store).CreateHighlight(t.Context(), e.member.ID, art.ID, []library.HighlightSegment{{XPath: "/p[1]", StartOffset: 0, EndOffset: 4, Text: "Body"}}, "a note"); err != nil {
		t.Fatal(err)
	}
	items := e.allEntries(map[string]any{"first": 10})
	types := map[string]string{}
	for _, en := range items {
		if en.Typename != "SavedItem" {
			t.Fatalf("__typename = %q, want SavedItem", en.Typename)
		}
		types[en.ID] = en.Type
	}
	if types[art.ID] != "ARTICLE" || types[nl.ID] != "NEWSLETTER" {
		t.Fatalf("types = %v", types)
	}
	hs := e.allEntries(map[string]any{"first": 10, "q": "type:highlight"})
	if len(hs) != 1 || hs[0].Typename != "Highlight" || hs[0].SavedItem == nil || hs[0].SavedItem.ID != art.ID ||
		*hs[0].SavedItemTitle != art.Title || *hs[0].Note != "a note" || *hs[0].Segments[0].Text != "Body" {
		t.Fatalf("highlights = %+v", hs)
	}
}

func TestEntriesQOperators(t *testing.T) {
	e := newEnv(t, options{})
	blue, err := library.Of(e.store).CreateLabel(t.Context(), e.member.ID, "Blue", "#0000ff")
	if err != nil {
		t.Fatal(err)
	}
	red, err := library.Of(e.store).CreateLabel(t.Context(), e.member.ID, "Red Team", "#ff0000")
	if err != nil {
		t.Fatal(err)
	}
	plain := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) {
		in.Title, in.URL, in.WordCount = "Gardening basics", "https://www.garden.example/x", 150
		in.Text = "Tomatoes need sun"
	})
	labelled := e.saveArticle(e.member.ID, 2, func(in *library.NewItem) {
		in.Title, in.LabelIDs, in.WordCount = "Go generics", []string{blue.ID}, 1000
	})
	both := e.saveArticle(e.member.ID, 3, func(in *library.NewItem) {
		in.Title, in.LabelIDs, in.Description = "Rust traits", []string{blue.ID, red.ID}, "ownership explained"
	})
	archived := e.saveArticle(e.member.ID, 4, nil)
	trashed := e.saveArticle(e.member.ID, 5, nil)
	letter, _, err := library.Of(e.store).SaveItem(t.Context(), e.member.ID, library.NewItem{Type: library.TypeNewsletter, Title: "Weekly news", SourceDomain: "news.example", Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(e.store).SetItemsStatus(t.Context(), e.member.ID, []string{archived.ID}, library.StatusArchived); err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(e.store).SetItemsStatus(t.Context(), e.member.ID, []string{trashed.ID}, library.StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(e.store).CreateHighlight(t.Context(), e.member.ID, labelled.ID, []library.HighlightSegment{{XPath: "/p", EndOffset: 2, Text: "Go"}}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(e.store).UpdateReadingProgress(t.Context(), e.member.ID, both.ID, 50); err != nil {
		t.Fatal(err)
	}
	today, tomorrow := day(plain.CreatedAt), day(plain.CreatedAt.AddDate(0, 0, 1))
	inbox := []string{plain.ID, labelled.ID, both.ID, letter.ID}
	every := append([]string{archived.ID, trashed.ID}, inbox...)
	// The items as written, with the stamps their dates are read from
	// (normally all today; the later ones tomorrow when the test passes
	// midnight UTC).
	items, err := library.Of(e.store).SavedItems(t.Context(), e.member.ID, every)
	if err != nil || len(items) != len(every) {
		t.Fatalf("the items: %d, %v", len(items), err)
	}
	inboxItems := items[2:]
	cases := []struct {
		q    string
		want []string
	}{
		// Inboxt's parseQuery and getMany (apps/api/src/managers/entry-manager/
		// entry-manager.service.ts, Inboxt/inboxt@45f4314): no in: is every
		// status, an in: or type: value it does not know is no filter.
		{"", every},
		{"in:inbox", inbox},
		{"in:archive", []string{archived.ID}},
		{"in:trash", []string{trashed.ID}},
		{"in:nowhere", every},
		{"in:all", every},
		{"type:article in:inbox", []string{plain.ID, labelled.ID, both.ID}},
		{"type:newsletter", []string{letter.ID}},
		{"type:video in:inbox", inbox},
		{"type:all in:inbox", inbox},
		{"label:blue", []string{labelled.ID, both.ID}},
		{`label:"Red Team"`, []string{both.ID}},
		{"label:blue -label:\"red team\"", []string{labelled.ID}},
		{"label:nothing", nil},
		{"has:highlights", []string{labelled.ID}},
		{"-has:highlights in:inbox", []string{plain.ID, both.ID, letter.ID}},
		{"no:labels in:inbox", []string{plain.ID, letter.ID}},
		{"no:label in:inbox", []string{plain.ID, letter.ID}}, // Inboxt's singular
		{"-no:label", []string{labelled.ID, both.ID}},        // Inboxt: has some label
		{"-no:labels in:inbox", []string{labelled.ID, both.ID}},
		{"has:labels", []string{labelled.ID, both.ID}},                     // Hearth's
		{"no:highlights in:inbox", []string{plain.ID, both.ID, letter.ID}}, // Hearth's
		{"site:garden.example", []string{plain.ID}},
		{"site:garden", []string{plain.ID}},   // Inboxt: a substring of the domain
		{"site:ws.exam", []string{letter.ID}}, // anywhere in it
		{"site:www.garden.example", []string{plain.ID}},
		{"site:news.example type:newsletter", []string{letter.ID}},
		{"saved:" + today + "..*", every},
		{"saved:" + today, every}, // Inboxt: from that date on
		{"saved:" + tomorrow, stamped(items, savedAt, tomorrow, "")},
		{"saved:*.." + tomorrow, every},
		{"saved:2001-01-01..2001-12-31", nil},
		{"updated:" + tomorrow + "..*", stamped(items, updatedAt, tomorrow, "")},
		{"updated:" + today + " in:inbox", stamped(inboxItems, updatedAt, today, today)}, // Hearth's: that one day
		{"progress:40..60", []string{both.ID}},
		{"reading-time:4..*", []string{labelled.ID}},
		{"gardening", []string{plain.ID}}, // title
		{"OWNERSHIP", []string{both.ID}},  // description, any case
		{"tomatoes", []string{plain.ID}},  // content
		{"rust in:archive", nil},          // text and operator combined
		{"has:sunshine", nil},             // Inboxt: an unknown has: is free text
		{"sort:title-asc in:inbox", inbox},
		{"sort:title_asc in:inbox", inbox},
		{"sort:date_desc in:inbox", inbox},
	}
	for _, c := range cases {
		t.Run(c.q, func(t *testing.T) {
			got := ids(e.allEntries(map[string]any{"first": 50, "q": c.q}))
			sort.Strings(got)
			want := append([]string(nil), c.want...)
			sort.Strings(want)
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("q %q: got %v, want %v", c.q, got, want)
			}
		})
	}
	for _, q := range []string{"sort:title-asc", "sort:title_asc", "sort:title_desc", "sort:date_asc", "sort:date_desc", "sort:saved"} {
		t.Run(q+" orders", func(t *testing.T) {
			got := e.allEntries(map[string]any{"first": 2, "q": q, "sort": map[string]any{"field": "createdAt", "direction": "asc"}})
			if len(got) != len(every) {
				t.Fatalf("%d entries, want %d", len(got), len(every))
			}
			for i := 1; i < len(got); i++ {
				a, b := strings.ToLower(got[i-1].Title), strings.ToLower(got[i].Title)
				if strings.HasPrefix(q, "sort:date") || q == "sort:saved" {
					a, b = got[i-1].CreatedAt+got[i-1].ID, got[i].CreatedAt+got[i].ID
				}
				if strings.HasSuffix(q, "desc") || q == "sort:saved" {
					a, b = b, a
				}
				if a > b {
					t.Fatalf("%s: %q before %q", q, a, b)
				}
			}
		})
	}
	t.Run("updated: finds items changed since a time", func(t *testing.T) {
		since := both.UpdatedAt.UTC().Format("2006-01-02T15:04:05.000Z")
		got := ids(e.allEntries(map[string]any{"first": 50, "q": "updated:" + since + "..*", "sort": map[string]any{"field": "updatedAt", "direction": "asc"}}))
		found := false
		for _, id := range got {
			found = found || id == both.ID
		}
		if !found {
			t.Fatalf("updated:%s.. did not list the item whose progress changed: %v", since, got)
		}
		// One RFC 3339 time alone means the same (what Omnivore's plugins
		// send), with an offset.
		offset := both.UpdatedAt.In(time.FixedZone("", 2*3600)).Format("2006-01-02T15:04:05.000-07:00")
		alone := ids(e.allEntries(map[string]any{"first": 50, "q": "updated:" + offset, "sort": map[string]any{"field": "updatedAt", "direction": "asc"}}))
		if !slices.Equal(alone, got) {
			t.Fatalf("updated:%s = %v, want as updated:%s..* %v", offset, alone, since, got)
		}
	})
}

func TestEntriesQErrorsAreBadUserInput(t *testing.T) {
	e := newEnv(t, options{})
	// Free text over the limit is Inboxt's BAD_REQUEST (below).
	for _, q := range []string{strings.Repeat("é", 201), "in:inbox " + strings.Repeat("y", 201)} {
		e.wantError(e.token, entriesQuery, map[string]any{"query": map[string]any{"first": 10, "q": q}}, 200, "BAD_REQUEST")
	}
	for _, q := range []string{
		strings.Repeat("label:a ", 300), // 2400 bytes of operators
		"saved:yesterday..*",
		"sort:popularity",
	} {
		t.Run(q[:min(len(q), 20)], func(t *testing.T) {
			r := e.wantError(e.token, entriesQuery, map[string]any{"query": map[string]any{"first": 10, "q": q}}, 200, "BAD_USER_INPUT")
			if r.Errors[0].Message == "" {
				t.Fatal("no message")
			}
		})
	}
	// Inboxt's limit is on the free text only (entry-manager.service.ts
	// getMany, Inboxt/inboxt@45f4314), in its words: an AppException,
	// BAD_REQUEST with the sentence as the message.
	r := e.wantError(e.token, entriesQuery, map[string]any{"query": map[string]any{"first": 10, "q": strings.Repeat("x", 201)}}, 200, "BAD_REQUEST")
	if !strings.HasPrefix(r.Errors[0].Message, "Free text search is limited to 200 characters.") || r.Errors[0].Extensions["status"] != float64(400) ||
		r.Errors[0].Extensions["response"] != nil {
		t.Fatalf("error %+v", r.Errors[0])
	}
	long := "in:archive type:article label:\"Send to Obsidian\" -label:news has:highlights sort:date_desc saved:2020-01-01..2030-01-01 " + strings.Repeat("z", 200)
	if len(long) <= 200 {
		t.Fatal("test query too short")
	}
	if got := e.allEntries(map[string]any{"first": 10, "q": long}); len(got) != 0 {
		t.Fatalf("long query with 200 characters of text listed %d entries", len(got))
	}
}

// With type:highlight, Inboxt's getMany passes only text, site, saved and
// sort to its highlight query (entry-manager.service.ts,
// Inboxt/inboxt@45f4314): in:, label:, has: and no: are ignored.
func TestEntriesTypeHighlightIgnoresItemOnlyFilters(t *testing.T) {
	e := newEnv(t, options{})
	trashed := e.saveArticle(e.member.ID, 1, nil)
	h, err := library.Of(e.store).CreateHighlight(t.Context(), e.member.ID, trashed.ID, []library.HighlightSegment{{XPath: "/p", EndOffset: 4, Text: "Body"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(e.store).SetItemsStatus(t.Context(), e.member.ID, []string{trashed.ID}, library.StatusDeleted); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"type:highlight in:archive", "in:inbox type:highlight", "type:highlights IN:trash", "type:highlight label:x no:label", "type:highlight -has:highlights progress:90..100"} {
		got := e.allEntries(map[string]any{"first": 10, "q": q})
		if len(got) != 1 || got[0].ID != h.ID || got[0].Typename != "Highlight" {
			t.Fatalf("%s: %+v", q, got)
		}
	}
}

// type:highlight: text in the item's title, description and content (and
// Hearth's note and highlighted text), site: a substring of the item's
// domain, saved: the item's saved time, title sorts by the item's title
// (highlight.service.ts getPaginated, Inboxt/inboxt@45f4314).
func TestEntriesTypeHighlightFiltersAndSortsByItsItem(t *testing.T) {
	e := newEnv(t, options{})
	zebra := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) {
		in.Title, in.URL, in.Description, in.Text = "Zebras", "https://savanna.example/z", "stripes explained", "Grass is eaten"
	})
	apple := e.saveArticle(e.member.ID, 2, func(in *library.NewItem) {
		in.Title, in.URL = "apples", "https://orchard.example/a"
	})
	mk := func(it *library.SavedItem, text, note string) string {
		h, err := library.Of(e.store).CreateHighlight(t.Context(), e.member.ID, it.ID, []library.HighlightSegment{{XPath: "/p", EndOffset: 4, Text: text}}, note)
		if err != nil {
			t.Fatal(err)
		}
		return h.ID
	}
	z1, a1, z2, a2 := mk(zebra, "one", ""), mk(apple, "two", "crunchy"), mk(zebra, "three", ""), mk(apple, "four", "")
	if _, err := library.Of(e.store).SetItemsStatus(t.Context(), e.member.ID, []string{apple.ID}, library.StatusArchived); err != nil {
		t.Fatal(err)
	}
	tomorrow := day(zebra.CreatedAt.AddDate(0, 0, 1))
	var savedTomorrow []string // the highlights of items saved past midnight UTC: normally none
	if day(apple.CreatedAt) >= tomorrow {
		savedTomorrow = []string{a1, a2}
	}
	cases := []struct {
		q    string
		want []string
	}{
		{"type:highlight zebras", []string{z1, z2}},  // item title
		{"type:highlight STRIPES", []string{z1, z2}}, // item description
		{"type:highlight grass", []string{z1, z2}},   // item content
		{"type:highlight crunchy", []string{a1}},     // note (Hearth)
		{"type:highlight three", []string{z2}},       // highlighted text (Hearth)
		{"type:highlight site:orchard", []string{a1, a2}},
		{"type:highlight saved:" + tomorrow, savedTomorrow},
		{"type:highlight saved:2000-01-01", []string{z1, a1, z2, a2}},
	}
	for _, c := range cases {
		got := ids(e.allEntries(map[string]any{"first": 1, "q": c.q}))
		sort.Strings(got)
		want := append([]string(nil), c.want...)
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("q %q: got %v, want %v", c.q, got, want)
		}
	}
	byTitle := func(want []string, q string, sortArg map[string]any) {
		t.Helper()
		for _, first := range []int{1, 3, 10} {
			in := map[string]any{"first": first, "q": q}
			if sortArg != nil {
				in["sort"] = sortArg
			}
			if got := ids(e.allEntries(in)); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("%s %v first %d: got %v, want %v", q, sortArg, first, got, want)
			}
		}
	}
	byTitle([]string{a1, a2, z1, z2}, "type:highlight sort:title_asc", nil)
	byTitle([]string{z2, z1, a2, a1}, "type:highlight sort:title_desc", nil)
	byTitle([]string{a1, a2, z1, z2}, "type:highlight", map[string]any{"field": "title", "direction": "asc"})
	// after: a highlight id, as Inboxt's cursor.
	p := e.entries(map[string]any{"first": 2, "q": "type:highlight sort:title_asc", "after": a2})
	if len(p.Entries.Edges) != 2 || p.Entries.Edges[0].Node.ID != z1 || p.Entries.Edges[1].Node.ID != z2 || p.Entries.PageInfo.HasNextPage {
		t.Fatalf("after %s: %+v", a2, p.Entries)
	}
}

func TestEntriesBadCursorIsBadUserInput(t *testing.T) {
	e := newEnv(t, options{})
	seed(e, 5)
	e.wantError(e.token, entriesQuery, map[string]any{"query": map[string]any{"first": 2, "after": "not-a-cursor"}}, 200, "BAD_USER_INPUT")
	p := e.entries(map[string]any{"first": 2})
	// A cursor of one sort order used with another.
	e.wantError(e.token, entriesQuery, map[string]any{"query": map[string]any{
		"first": 2, "after": *p.Entries.PageInfo.EndCursor, "sort": map[string]any{"field": "title", "direction": "asc"},
	}}, 200, "BAD_USER_INPUT")
}

func TestEntriesOfAnotherMemberAreInvisible(t *testing.T) {
	e := newEnv(t, options{})
	bob, bobToken := e.newMember("bob")
	e.saveArticle(bob.ID, 1, nil)
	if got := e.allEntries(map[string]any{"first": 10}); len(got) != 0 {
		t.Fatalf("alice sees %d of bob's items", len(got))
	}
	r := e.post(bobToken, entriesQuery, map[string]any{"query": map[string]any{"first": 10}})
	if len(r.Errors) > 0 || !strings.Contains(string(r.Data), "Article 1") {
		t.Fatalf("bob does not see his item: %s %+v", r.Data, r.Errors)
	}
}

func TestHighlightPaginationVisitsEveryHighlightOnce(t *testing.T) {
	e := newEnv(t, options{})
	want := map[string]bool{}
	for i := 0; i < 9; i++ {
		it := e.saveArticle(e.member.ID, i, nil)
		for k := 0; k < 3; k++ {
			h, err := library.Of(e.store).CreateHighlight(t.Context(), e.member.ID, it.ID, []library.HighlightSegment{{XPath: "/p", EndOffset: 4, Text: fmt.Sprintf("h%d-%d", i, k)}}, "")
			if err != nil {
				t.Fatal(err)
			}
			want[h.ID] = true
		}
	}
	for _, dir := range []string{"asc", "desc"} {
		for _, field := range []string{"createdAt", "updatedAt"} {
			got := e.allEntries(map[string]any{"first": 4, "q": "type:highlight", "sort": map[string]any{"field": field, "direction": dir}})
			seen := map[string]bool{}
			for _, h := range got {
				if seen[h.ID] || !want[h.ID] || h.Typename != "Highlight" {
					t.Fatalf("%s %s: unexpected or repeated %s", field, dir, h.ID)
				}
				seen[h.ID] = true
			}
			if len(seen) != len(want) {
				t.Fatalf("%s %s: saw %d of %d highlights", field, dir, len(seen), len(want))
			}
		}
	}
}
