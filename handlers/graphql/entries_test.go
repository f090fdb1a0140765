package graphql_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/storage"
)

// seed saves n articles with repeated titles, word counts and progress
// values, so every sort has ties that only the id breaks.
func seed(e *env, n int) map[string]bool {
	all := map[string]bool{}
	for i := 0; i < n; i++ {
		it := e.saveArticle(e.member.ID, i, func(in *storage.NewItem) {
			in.Title = fmt.Sprintf("%c title", 'a'+i%7)
			if i%2 == 0 {
				in.Title = strings.ToUpper(in.Title)
			}
			in.WordCount = (i % 11) * 100
		})
		if i%3 == 0 {
			if _, err := e.store.UpdateReadingProgress(e.member.ID, it.ID, float64(i%5*20)); err != nil {
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
	e := newEnv(t, graphql.Options{})
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
	e := newEnv(t, graphql.Options{})
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
	e := newEnv(t, graphql.Options{})
	p := e.entries(map[string]any{"first": 20})
	if len(p.Entries.Edges) != 0 || p.Entries.PageInfo.HasNextPage || p.Entries.PageInfo.EndCursor != nil {
		t.Fatalf("empty list: %+v", p.Entries)
	}
}

func TestEntriesPaginationNeitherSkipsNorRepeatsWhileItemsChange(t *testing.T) {
	for _, dir := range []string{"asc", "desc"} {
		t.Run(dir, func(t *testing.T) {
			e := newEnv(t, graphql.Options{})
			var order []string
			for i := 0; i < 60; i++ {
				order = append(order, e.saveArticle(e.member.ID, i, nil).ID)
			}
			q := map[string]any{"first": 10, "sort": map[string]any{"field": "createdAt", "direction": dir}}
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
					if _, err := e.store.SetItemsStatus(e.member.ID, []string{victim}, storage.StatusDeleted); err != nil {
						t.Fatal(err)
					}
					removed[victim] = true
				}
				if _, err := e.store.SetItemsStatus(e.member.ID, []string{p.Entries.Edges[0].Node.ID}, storage.StatusArchived); err != nil {
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
	e := newEnv(t, graphql.Options{})
	seed(e, 130)
	var p entriesPage
	e.do(`query { entries(query: {}) { edges { cursor } pageInfo { hasNextPage } } }`, nil, &p)
	if len(p.Entries.Edges) != 20 {
		t.Fatalf("default page size = %d, want 20", len(p.Entries.Edges))
	}
	if got := e.entries(map[string]any{"first": 500}); len(got.Entries.Edges) != 100 {
		t.Fatalf("first: 500 gave %d edges, want 100", len(got.Entries.Edges))
	}
}

func TestEntriesTypenameResolvesSavedItemAndHighlight(t *testing.T) {
	e := newEnv(t, graphql.Options{})
	art := e.saveArticle(e.member.ID, 1, nil)
	nl, _, err := e.store.SaveItem(e.member.ID, storage.NewItem{Type: storage.TypeNewsletter, Title: "Weekly", HTML: "<p>hi</p>", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreateHighlight(e.member.ID, art.ID, []storage.HighlightSegment{{XPath: "/p[1]", StartOffset: 0, EndOffset: 4, Text: "Body"}}, "a note"); err != nil {
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
	e := newEnv(t, graphql.Options{})
	blue, err := e.store.CreateLabel(e.member.ID, "Blue", "#0000ff")
	if err != nil {
		t.Fatal(err)
	}
	red, err := e.store.CreateLabel(e.member.ID, "Red Team", "#ff0000")
	if err != nil {
		t.Fatal(err)
	}
	plain := e.saveArticle(e.member.ID, 1, func(in *storage.NewItem) {
		in.Title, in.URL, in.WordCount = "Gardening basics", "https://www.garden.example/x", 150
		in.Text = "Tomatoes need sun"
	})
	labelled := e.saveArticle(e.member.ID, 2, func(in *storage.NewItem) {
		in.Title, in.LabelIDs, in.WordCount = "Go generics", []string{blue.ID}, 1000
	})
	both := e.saveArticle(e.member.ID, 3, func(in *storage.NewItem) {
		in.Title, in.LabelIDs, in.Description = "Rust traits", []string{blue.ID, red.ID}, "ownership explained"
	})
	archived := e.saveArticle(e.member.ID, 4, nil)
	trashed := e.saveArticle(e.member.ID, 5, nil)
	letter, _, err := e.store.SaveItem(e.member.ID, storage.NewItem{Type: storage.TypeNewsletter, Title: "Weekly news", SourceDomain: "news.example", Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SetItemsStatus(e.member.ID, []string{archived.ID}, storage.StatusArchived); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SetItemsStatus(e.member.ID, []string{trashed.ID}, storage.StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreateHighlight(e.member.ID, labelled.ID, []storage.HighlightSegment{{XPath: "/p", EndOffset: 2, Text: "Go"}}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.UpdateReadingProgress(e.member.ID, both.ID, 50); err != nil {
		t.Fatal(err)
	}
	today := plain.CreatedAt.UTC().Format("2006-01-02")
	tomorrow := plain.CreatedAt.UTC().AddDate(0, 0, 1).Format("2006-01-02")
	cases := []struct {
		q    string
		want []string
	}{
		{"", []string{plain.ID, labelled.ID, both.ID, letter.ID}},
		{"in:inbox", []string{plain.ID, labelled.ID, both.ID, letter.ID}},
		{"in:archive", []string{archived.ID}},
		{"in:trash", []string{trashed.ID}},
		{"type:article", []string{plain.ID, labelled.ID, both.ID}},
		{"type:newsletter", []string{letter.ID}},
		{"label:blue", []string{labelled.ID, both.ID}},
		{`label:"Red Team"`, []string{both.ID}},
		{"label:blue -label:\"red team\"", []string{labelled.ID}},
		{"label:nothing", nil},
		{"has:highlights", []string{labelled.ID}},
		{"no:labels", []string{plain.ID, letter.ID}},
		{"site:garden.example", []string{plain.ID}},
		{"site:news.example type:newsletter", []string{letter.ID}},
		{"saved:" + today + "..*", []string{plain.ID, labelled.ID, both.ID, letter.ID}},
		{"saved:*.." + tomorrow, []string{plain.ID, labelled.ID, both.ID, letter.ID}},
		{"saved:2001-01-01..2001-12-31", nil},
		{"updated:" + tomorrow + "..*", nil},
		{"progress:40..60", []string{both.ID}},
		{"reading-time:4..*", []string{labelled.ID}},
		{"gardening", []string{plain.ID}}, // title
		{"OWNERSHIP", []string{both.ID}},  // description, any case
		{"tomatoes", []string{plain.ID}},  // content
		{"rust in:archive", nil},          // text and operator combined
		{"sort:title-asc", []string{plain.ID, labelled.ID, both.ID, letter.ID}},
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
	t.Run("sort:title-asc orders by title", func(t *testing.T) {
		got := e.allEntries(map[string]any{"first": 50, "q": "sort:title-asc"})
		for i := 1; i < len(got); i++ {
			if strings.ToLower(got[i-1].Title) > strings.ToLower(got[i].Title) {
				t.Fatalf("not sorted by title: %q before %q", got[i-1].Title, got[i].Title)
			}
		}
	})
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
	})
}

func TestEntriesQErrorsAreBadUserInput(t *testing.T) {
	e := newEnv(t, graphql.Options{})
	for _, q := range []string{
		strings.Repeat("x", 201),
		"in:nowhere",
		"type:video",
		"saved:yesterday..*",
		"sort:popularity",
		"label:x type:highlight",
	} {
		t.Run(q[:min(len(q), 20)], func(t *testing.T) {
			r := e.wantError(e.token, entriesQuery, map[string]any{"query": map[string]any{"first": 10, "q": q}}, 200, "BAD_USER_INPUT")
			if r.Errors[0].Message == "" {
				t.Fatal("no message")
			}
		})
	}
}

// in: filters items by status; highlights have none, and type:highlight
// listed the highlights of trashed items for in:archive. It is refused, not
// ignored.
func TestEntriesInWithTypeHighlightIsRefused(t *testing.T) {
	e := newEnv(t, graphql.Options{})
	trashed := e.saveArticle(e.member.ID, 1, nil)
	if _, err := e.store.CreateHighlight(e.member.ID, trashed.ID, []storage.HighlightSegment{{XPath: "/p", EndOffset: 4, Text: "Body"}}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SetItemsStatus(e.member.ID, []string{trashed.ID}, storage.StatusDeleted); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"type:highlight in:archive", "in:inbox type:highlight", "type:highlights IN:trash"} {
		r := e.wantError(e.token, entriesQuery, map[string]any{"query": map[string]any{"first": 10, "q": q}}, 200, "BAD_USER_INPUT")
		if msg := r.Errors[0].Detail(); !strings.Contains(strings.ToLower(msg), "in:") || !strings.Contains(msg, "type:highlight") {
			t.Fatalf("%s: message %q", q, msg)
		}
		if strings.Contains(string(r.Data), `"Highlight"`) {
			t.Fatalf("%s: highlights listed: %s", q, r.Data)
		}
	}
	if got := e.allEntries(map[string]any{"first": 10, "q": "type:highlight"}); len(got) != 1 {
		t.Fatalf("type:highlight alone lists %d entries, want 1", len(got))
	}
}

func TestEntriesBadCursorIsBadUserInput(t *testing.T) {
	e := newEnv(t, graphql.Options{})
	seed(e, 5)
	e.wantError(e.token, entriesQuery, map[string]any{"query": map[string]any{"first": 2, "after": "not-a-cursor"}}, 200, "BAD_USER_INPUT")
	p := e.entries(map[string]any{"first": 2})
	// A cursor of one sort order used with another.
	e.wantError(e.token, entriesQuery, map[string]any{"query": map[string]any{
		"first": 2, "after": *p.Entries.PageInfo.EndCursor, "sort": map[string]any{"field": "title", "direction": "asc"},
	}}, 200, "BAD_USER_INPUT")
}

func TestEntriesOfAnotherMemberAreInvisible(t *testing.T) {
	e := newEnv(t, graphql.Options{})
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
	e := newEnv(t, graphql.Options{})
	want := map[string]bool{}
	for i := 0; i < 9; i++ {
		it := e.saveArticle(e.member.ID, i, nil)
		for k := 0; k < 3; k++ {
			h, err := e.store.CreateHighlight(e.member.ID, it.ID, []storage.HighlightSegment{{XPath: "/p", EndOffset: 4, Text: fmt.Sprintf("h%d-%d", i, k)}}, "")
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
	e.wantError(e.token, entriesQuery, map[string]any{"query": map[string]any{"first": 4, "q": "type:highlight", "sort": map[string]any{"field": "title", "direction": "asc"}}}, 200, "BAD_USER_INPUT")
}
