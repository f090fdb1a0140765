package library

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

func openSavedTest(t testing.TB) (*storage.Store, *members.Member) {
	t.Helper()
	return openSavedTestWith(t, testOptions())
}

// openSavedTestWith is openSavedTest with the library's options o.
func openSavedTestWith(t testing.TB, o options) (*storage.Store, *members.Member) {
	t.Helper()
	noSync := false // as storagetest.OpenFast
	st, err := openWith(t.TempDir(), storage.Options{SyncWrites: &noSync, GCInterval: -1}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m, err := members.Of(st).CreateMember(t.Context(), "reader", "", "password123")
	if err != nil {
		t.Fatal(err)
	}
	return st, m
}

func saveN(t testing.TB, st *storage.Store, mid string, n int) []*SavedItem {
	t.Helper()
	var out []*SavedItem
	for i := 0; i < n; i++ {
		it, _, err := Of(st).SaveItem(t.Context(), mid, NewItem{
			URL:       fmt.Sprintf("https://example.com/a/%d", i),
			Title:     fmt.Sprintf("Title %03d", i%37), // many equal titles: ties broken by id
			WordCount: i % 11,
			Text:      "body",
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, it)
	}
	return out
}

func TestSavedItemsKeysetEverySort(t *testing.T) {
	st, m := openSavedTest(t)
	saveN(t, st, m.ID, 230)
	for f := range sortFieldCode {
		for _, desc := range []bool{false, true} {
			seen := map[string]bool{}
			after := ""
			pages := 0
			var prev *SavedItem
			for {
				p, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{}, PageRequest{Field: f, Desc: desc, First: 17, After: after})
				if err != nil {
					t.Fatal(err)
				}
				pages++
				for i, it := range p.Items {
					if seen[it.ID] {
						t.Fatalf("%s desc=%v: duplicate %s", f, desc, it.ID)
					}
					seen[it.ID] = true
					if prev != nil {
						a, b := itemSortValue(prev, f), itemSortValue(it, f)
						if (string(a) < string(b)) == desc {
							t.Fatalf("%s desc=%v: out of order at page %d item %d", f, desc, pages, i)
						}
					}
					prev = it
				}
				if !p.HasNext {
					break
				}
				after = p.Cursors[len(p.Cursors)-1]
			}
			if len(seen) != 230 || pages != 14 {
				t.Fatalf("%s desc=%v: saw %d items in %d pages", f, desc, len(seen), pages)
			}
		}
	}
}

func TestSavedItemsStableUnderInsertAndDelete(t *testing.T) {
	st, m := openSavedTest(t)
	items := saveN(t, st, m.ID, 50)
	p, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, it := range p.Items {
		seen[it.ID] = true
	}
	// The last item of the page goes to the trash and new items arrive.
	last := p.Items[len(p.Items)-1]
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{last.ID}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	saveN2 := func(i int) {
		if _, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://new.example/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	saveN2(1)
	saveN2(2)
	after := p.Cursors[len(p.Cursors)-1]
	for {
		p, err = Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			if seen[it.ID] {
				t.Fatalf("duplicate %s", it.ID)
			}
			seen[it.ID] = true
		}
		if !p.HasNext {
			break
		}
		after = p.Cursors[len(p.Cursors)-1]
	}
	if len(seen) != len(items) {
		t.Fatalf("saw %d of %d original items", len(seen), len(items))
	}
}

func TestSaveSameURLUpdates(t *testing.T) {
	st, m := openSavedTest(t)
	a, created, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://Example.com/x#frag", Title: "One"})
	if err != nil || !created {
		t.Fatal(err, created)
	}
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{a.ID}, StatusArchived); err != nil {
		t.Fatal(err)
	}
	b, created, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com:443/x", Title: "Two"})
	if err != nil || created {
		t.Fatal(err, created)
	}
	if b.ID != a.ID || b.Title != "Two" || b.Status != StatusActive || !b.CreatedAt.Equal(a.CreatedAt) {
		t.Fatalf("got %+v", b)
	}
}

func TestUpdatedAtMovesOnLabelsHighlightsStatus(t *testing.T) {
	st, m := openSavedTest(t)
	it := saveN(t, st, m.ID, 1)[0]
	last := it.UpdatedAt
	step := func(what string) {
		t.Helper()
		cur, err := Of(st).SavedItem(t.Context(), m.ID, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !cur.UpdatedAt.After(last) {
			t.Fatalf("%s: updatedAt did not move", what)
		}
		last = cur.UpdatedAt
		// Index must follow: the item is found by an updated: range from last.
		p, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: cur.Status, UpdatedFrom: &last}, PageRequest{Field: SortUpdatedAt, First: 5})
		if err != nil || len(p.Items) != 1 {
			t.Fatalf("%s: updated range found %v (%v)", what, len(p.Items), err)
		}
	}
	wait := func() { time.Sleep(2 * time.Millisecond) }
	wait()
	l, err := Of(st).CreateLabel(t.Context(), m.ID, "Go", "#00aaff")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).SetItemLabels(t.Context(), m.ID, []string{it.ID}, LabelChange{Add: []string{l.ID}}); err != nil {
		t.Fatal(err)
	}
	step("label")
	wait()
	h, err := Of(st).CreateHighlight(t.Context(), m.ID, it.ID, []HighlightSegment{{XPath: "/p[1]", Text: "hi", EndOffset: 2}}, "")
	if err != nil {
		t.Fatal(err)
	}
	step("highlight")
	wait()
	if err := Of(st).DeleteHighlights(t.Context(), m.ID, []string{h.ID}); err != nil {
		t.Fatal(err)
	}
	step("highlight delete")
	wait()
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{it.ID}, StatusArchived); err != nil {
		t.Fatal(err)
	}
	step("status")
	wait()
	if err := Of(st).DeleteLabel(t.Context(), m.ID, l.ID); err != nil {
		t.Fatal(err)
	}
	step("label deleted")
	cur, _ := Of(st).SavedItem(t.Context(), m.ID, it.ID)
	if len(cur.LabelIDs) != 0 {
		t.Fatal("label still on item")
	}
}

func TestSavedItemRecordRoundTrip(t *testing.T) {
	read := time.Date(2025, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	deleted := time.Date(2025, 3, 5, 0, 0, 0, 1, time.UTC)
	for _, it := range []*SavedItem{
		{ID: "1", MemberID: "2", Type: TypeArticle, Status: StatusActive, Title: "t", CreatedAt: read, UpdatedAt: read},
		{
			ID: "123456789", MemberID: "42", Type: TypeNewsletter, Status: StatusDeleted, Title: "Bread & <butter> \u2028",
			OriginalURL: "https://example.com/", SourceDomain: "example.com", Description: "d\x00e", Author: "a",
			LeadImage: "https://example.com/i.png", WordCount: 1234, ReadingProgress: 42.5, ReadAt: &read,
			IsReadManual: true, CreatedAt: read.Add(-time.Hour), UpdatedAt: read, DeletedAt: &deleted,
			LabelIDs: []string{"7", "8"}, HighlightCount: 3, FromName: "Baker", FromAddress: "baker@example.com",
			hlBytes: 1 << 20,
		},
		{ID: "3", MemberID: "2", Type: TypeArticle, Status: StatusDeleted, Title: "t", CreatedAt: read, UpdatedAt: read, DeletedAt: &deleted, TrashGen: 300},
		{ID: "4", MemberID: "2", Type: TypeArticle, Status: StatusDeleted, Title: "t", CreatedAt: read, UpdatedAt: read, DeletedAt: &deleted, TrashGen: 300, HighlightCount: 1, hlBytes: 9},
		// Bytes unknown: the record an earlier version wrote.
		{ID: "5", MemberID: "2", Type: TypeArticle, Status: StatusActive, Title: "t", CreatedAt: read, UpdatedAt: read, HighlightCount: 2, hlBytes: unknownHighlightBytes},
	} {
		b := appendItemRecord(nil, it)
		want := byte(itemRecordV1)
		switch withBytes := it.HighlightCount > 0 && it.hlBytes >= 0; {
		case it.TrashGen != 0 && withBytes:
			want = itemRecordV4
		case it.TrashGen != 0:
			want = itemRecordV2
		case withBytes:
			want = itemRecordV3
		}
		if b[0] != want {
			t.Fatalf("record starts with %#x, want %#x", b[0], want)
		}
		var got SavedItem
		if err := parseItemRecord(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&got, it) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, *it)
		}
		for n := 1; n < len(b); n++ { // every truncation is an error, never a panic
			if err := parseItemRecord(b[:n], &got); err == nil {
				t.Fatalf("record cut to %d of %d bytes was accepted", n, len(b))
			}
		}
	}
}

// Item records written as JSON (before the binary form) are read as they
// are and rewritten in the binary form by the next change to the item.
func TestSavedItemJSONRecordsStillRead(t *testing.T) {
	st, m := openSavedTest(t)
	items := saveN(t, st, m.ID, 3)
	err := st.Update(t.Context(), func(tx *storage.Tx) error {
		for _, it := range items {
			if err := tx.PutJSON(itemKey(m.ID, it.ID), it, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Of(st).SavedItem(t.Context(), m.ID, items[1].ID)
	if err != nil || !reflect.DeepEqual(got, items[1]) {
		t.Fatalf("SavedItem = %+v, %v; want %+v", got, err, items[1])
	}
	p, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{}, PageRequest{Field: SortCreatedAt, First: 10})
	if err != nil || len(p.Items) != 3 {
		t.Fatalf("page = %+v, %v", p, err)
	}
	for _, it := range p.Items {
		want := map[string]*SavedItem{items[0].ID: items[0], items[1].ID: items[1], items[2].ID: items[2]}[it.ID]
		if !reflect.DeepEqual(it, want) {
			t.Fatalf("page item %+v, want %+v", it, want)
		}
	}
	if _, err := Of(st).SetItemsRead(t.Context(), m.ID, []string{items[1].ID}, true); err != nil {
		t.Fatal(err)
	}
	err = st.View(t.Context(), func(tx *storage.Tx) error {
		b, err := tx.Get(itemKey(m.ID, items[1].ID))
		if err == nil && b[0] != itemRecordV1 {
			t.Errorf("after a change the record starts with %q", b[0])
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err = Of(st).SavedItem(t.Context(), m.ID, items[1].ID)
	if err != nil || got.ReadAt == nil || got.Title != items[1].Title || !got.CreatedAt.Equal(items[1].CreatedAt) {
		t.Fatalf("after SetItemsRead: %+v, %v", got, err)
	}
}

// messageIDEntries counts the member's Message-ID index records (both
// directions), to check that deleting items leaves none behind.
func messageIDEntries(t *testing.T, st *storage.Store, memberID string) int {
	t.Helper()
	n := 0
	err := st.View(t.Context(), func(tx *storage.Tx) error {
		for _, p := range [][]byte{storage.Key("u", memberID, "gql", "msgid", ""), storage.Key("u", memberID, "gql", "msgof", "")} {
			if err := tx.Scan(p, nil, false, true, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func countItems(t *testing.T, st *storage.Store, memberID string) int {
	t.Helper()
	n := 0
	for _, status := range []string{StatusActive, StatusArchived, StatusDeleted} {
		p, err := Of(st).SavedItemsPage(t.Context(), memberID, ItemFilter{Status: status}, PageRequest{Field: SortCreatedAt, First: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n += len(p.Items)
	}
	return n
}

func TestNewsletterSavedOncePerMessageID(t *testing.T) {
	st, m := openSavedTest(t)
	nl := func(title, msgID string) NewItem {
		return NewItem{Type: TypeNewsletter, Title: title, HTML: "<p>x</p>", Text: "x", MessageID: msgID}
	}
	first, created, err := Of(st).SaveItem(t.Context(), m.ID, nl("Issue 1", "issue-1@news.example"))
	if err != nil || !created {
		t.Fatal(err, created)
	}
	again, created, err := Of(st).SaveItem(t.Context(), m.ID, nl("Issue 1 (retried)", "issue-1@news.example"))
	if err != nil || created {
		t.Fatal(err, created)
	}
	if again.ID != first.ID || again.Title != "Issue 1" || !again.UpdatedAt.Equal(first.UpdatedAt) {
		t.Fatalf("repeat returned %+v, want the first item unchanged", again)
	}
	if n := countItems(t, st, m.ID); n != 1 {
		t.Fatalf("%d items after a repeated message, want 1", n)
	}

	// Without a Message-ID every delivery is saved.
	for i := 0; i < 2; i++ {
		if _, created, err := Of(st).SaveItem(t.Context(), m.ID, nl("No id", "")); err != nil || !created {
			t.Fatal(err, created)
		}
	}
	if n := countItems(t, st, m.ID); n != 3 {
		t.Fatalf("%d items, want 3", n)
	}

	// The index is per member.
	other, _ := members.Of(st).CreateMember(t.Context(), "other", "", "password123")
	if _, created, err := Of(st).SaveItem(t.Context(), other.ID, nl("Issue 1", "issue-1@news.example")); err != nil || !created {
		t.Fatalf("another member's copy: %v, created %v", err, created)
	}

	if _, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/a", MessageID: "x@y"}); !storage.IsInvalid(err) {
		t.Fatalf("article with a message id: %v", err)
	}
	if _, _, err := Of(st).SaveItem(t.Context(), m.ID, nl("long", string(make([]byte, MaxMessageIDLen+1)))); !storage.IsInvalid(err) {
		t.Fatalf("message id too long: %v", err)
	}
}

func TestConcurrentDeliveriesOfOneMessageSaveOneItem(t *testing.T) {
	st, m := openSavedTest(t)
	const n = 8
	ids := make(chan string, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{Type: TypeNewsletter, Title: "Same", Text: "x", MessageID: "same@news.example"})
			if err != nil {
				errs <- err
				return
			}
			ids <- it.ID
		}()
	}
	wg.Wait()
	close(ids)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	if len(seen) != 1 || countItems(t, st, m.ID) != 1 {
		t.Fatalf("%d distinct ids, %d items; want 1 and 1", len(seen), countItems(t, st, m.ID))
	}
}

func TestDeletingANewsletterDropsItsMessageID(t *testing.T) {
	st, m := openSavedTest(t)
	save := func(msgID string) *SavedItem {
		t.Helper()
		it, created, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{Type: TypeNewsletter, Title: msgID, Text: "x", MessageID: msgID})
		if err != nil || !created {
			t.Fatalf("save %s: %v, created %v", msgID, err, created)
		}
		return it
	}
	trash := func(ids ...string) {
		t.Helper()
		if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, ids, StatusDeleted); err != nil {
			t.Fatal(err)
		}
	}

	a, b := save("a@news.example"), save("b@news.example")
	if n := messageIDEntries(t, st, m.ID); n != 4 {
		t.Fatalf("%d index records for 2 newsletters, want 4", n)
	}
	// In the trash the message is still known: a retry is not saved again.
	trash(a.ID)
	if it, created, _ := Of(st).SaveItem(t.Context(), m.ID, NewItem{Type: TypeNewsletter, Title: "retry", Text: "x", MessageID: "a@news.example"}); created || it.ID != a.ID || it.Status != StatusDeleted {
		t.Fatalf("retry of a trashed newsletter: created %v, %+v", created, it)
	}

	// permanentlyDeleteSavedItems
	if err := Of(st).PermanentlyDeleteItems(t.Context(), m.ID, []string{a.ID}); err != nil {
		t.Fatal(err)
	}
	if n := messageIDEntries(t, st, m.ID); n != 2 {
		t.Fatalf("%d index records after deleting 1 of 2, want 2", n)
	}
	if again := save("a@news.example"); again.ID == a.ID {
		t.Fatal("a permanently deleted newsletter's id came back")
	}

	// emptyTrash
	all, _ := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{}, PageRequest{Field: SortCreatedAt, First: 10})
	var ids []string
	for _, it := range all.Items {
		ids = append(ids, it.ID)
	}
	trash(ids...)
	if n, err := Of(st).EmptyTrash(t.Context(), m.ID); err != nil || n != 2 {
		t.Fatalf("empty trash: %d, %v", n, err)
	}
	if n := messageIDEntries(t, st, m.ID); n != 0 {
		t.Fatalf("%d index records after emptying the trash, want 0", n)
	}
	save("b@news.example")
	_ = b

	// member removal
	if err := members.Of(st).DeleteMember(t.Context(), m.Username); err != nil {
		t.Fatal(err)
	}
	if n := messageIDEntries(t, st, m.ID); n != 0 {
		t.Fatalf("%d index records after removing the member, want 0", n)
	}
}

// Every index entry carries a copy of its item's record: after each kind of
// write, every page under every sort returns what SavedItem returns.
func TestIndexCopiesFollowEveryWrite(t *testing.T) {
	st, m := openSavedTest(t)
	items := saveN(t, st, m.ID, 6)
	id := func(i int) string { return items[i].ID }
	l, err := Of(st).CreateLabel(t.Context(), m.ID, "later", "#123456")
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		for _, status := range []string{StatusActive, StatusArchived, StatusDeleted} {
			for f := range sortFieldCode {
				for _, desc := range []bool{false, true} {
					p, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: status}, PageRequest{Field: f, Desc: desc, First: 100})
					if err != nil {
						t.Fatalf("%s: page %s %s: %v", step, status, f, err)
					}
					for _, it := range p.Items {
						want, err := Of(st).SavedItem(t.Context(), m.ID, it.ID)
						if err != nil || !reflect.DeepEqual(it, want) {
							t.Fatalf("%s: %s/%s page has %+v, the item is %+v (%v)", step, status, f, it, want, err)
						}
						if it.Status != status {
							t.Fatalf("%s: %s page lists a %s item", step, status, it.Status)
						}
					}
				}
			}
		}
	}
	check("saved")
	title := "A new title"
	steps := []struct {
		name string
		do   func() error
	}{
		{"metadata", func() error {
			_, err := Of(st).UpdateItemMetadata(t.Context(), m.ID, id(0), ItemMetadata{Title: &title})
			return err
		}},
		{"progress", func() error { _, err := Of(st).UpdateReadingProgress(t.Context(), m.ID, id(1), 0.5); return err }},
		{"read", func() error { _, err := Of(st).SetItemsRead(t.Context(), m.ID, []string{id(2)}, true); return err }},
		{"labels", func() error {
			_, err := Of(st).SetItemLabels(t.Context(), m.ID, []string{id(3), id(4)}, LabelChange{Add: []string{l.ID}})
			return err
		}},
		{"highlight", func() error {
			_, err := Of(st).CreateHighlight(t.Context(), m.ID, id(4), []HighlightSegment{{XPath: "/p", EndOffset: 3, Text: "abc"}}, "")
			return err
		}},
		{"archive", func() error {
			_, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{id(5)}, StatusArchived)
			return err
		}},
		{"trash", func() error {
			_, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{id(4)}, StatusDeleted)
			return err
		}},
		{"label deleted", func() error { return Of(st).DeleteLabel(t.Context(), m.ID, l.ID) }},
		{"saved again", func() error {
			_, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: items[1].OriginalURL, Title: "Saved again", WordCount: 99})
			return err
		}},
		{"deleted", func() error { return Of(st).PermanentlyDeleteItems(t.Context(), m.ID, []string{id(4)}) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		check(s.name)
	}
}

// Index entries written before they carried a copy of the record (empty
// values) are still listed, by looking the item up.
func TestIndexEntriesWithoutCopiesStillList(t *testing.T) {
	st, m := openSavedTest(t)
	items := saveN(t, st, m.ID, 3)
	err := st.Update(t.Context(), func(tx *storage.Tx) error {
		for _, it := range items {
			for _, k := range itemIndexKeys(it) {
				if err := tx.Put(k, nil, 0); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{}, PageRequest{Field: SortTitle, First: 10})
	if err != nil || len(p.Items) != 3 {
		t.Fatalf("page = %+v, %v", p, err)
	}
	for _, it := range p.Items {
		want, err := Of(st).SavedItem(t.Context(), m.ID, it.ID)
		if err != nil || !reflect.DeepEqual(it, want) {
			t.Fatalf("page item %+v, want %+v (%v)", it, want, err)
		}
	}
}

// A label on thousands of items of realistic size can be renamed and
// deleted: index copies stop at a budget per transaction, and past
// labelBatch items the items change in batches; every page then shows
// current records.
func TestLabelChangesOnThousandsOfItems(t *testing.T) {
	bulk(t)
	st, m := openSavedTest(t)
	l, err := Of(st).CreateLabel(t.Context(), m.ID, "news", "#ff0000")
	if err != nil {
		t.Fatal(err)
	}
	const n = 4000
	for i := range n {
		_, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{
			URL:         fmt.Sprintf("https://news.example.com/2026/11/22/some-fairly-long-article-slug-about-something-%d?utm_source=feed", i),
			Title:       fmt.Sprintf("An article title of a usual length, number %d", i),
			Description: strings.Repeat("d", 300),
			Author:      "Some Author",
			LeadImage:   fmt.Sprintf("https://cdn.example.com/images/2026/11/22/lead-image-%d.jpg?w=1200&h=630", i),
			WordCount:   1200,
			LabelIDs:    []string{l.ID},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The store keeps milliseconds: an update in the same millisecond is
	// not before it.
	before := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := Of(st).UpdateLabel(t.Context(), m.ID, l.ID, "renamed", "#00ff00"); err != nil {
		t.Fatalf("rename a label on %d items: %v", n, err)
	}
	moved, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{UpdatedFrom: &before}, PageRequest{Field: SortUpdatedAt, First: n})
	if err != nil || len(moved.Items) != n {
		t.Fatalf("items whose updatedAt moved with the rename: %d of %d (%v)", len(moved.Items), n, err)
	}
	if err := Of(st).DeleteLabel(t.Context(), m.ID, l.ID); err != nil {
		t.Fatalf("delete a label on %d items: %v", n, err)
	}
	var left []string
	err = st.View(t.Context(), func(tx *storage.Tx) error { left, err = labelItems(tx, m.ID, l.ID); return err })
	if err != nil || len(left) != 0 {
		t.Fatalf("label index entries left: %d (%v)", len(left), err)
	}
	seen := 0
	for f := range sortFieldCode {
		after := ""
		for {
			p, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{}, PageRequest{Field: f, First: 100, After: after})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range p.Items {
				seen++
				if len(it.LabelIDs) != 0 {
					t.Fatalf("%s page: item %s still lists the deleted label", f, it.ID)
				}
			}
			if !p.HasNext {
				break
			}
			after = p.Cursors[len(p.Cursors)-1]
		}
	}
	if seen != n*len(sortFieldCode) {
		t.Fatalf("pages listed %d items, want %d", seen, n*len(sortFieldCode))
	}
}

// Batch actions on MaxBatchIDs items of the largest size (several MiB of
// records, more than one Badger transaction holds) succeed and change every
// item; a batch with one unknown id, or one item not in the trash, changes
// nothing.
func TestBatchActionsOnTheLargestItems(t *testing.T) {
	st, m := openSavedTest(t)
	var ids []string
	for i := range MaxBatchIDs {
		it, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{
			URL:         fmt.Sprintf("https://example.com/%d/%s", i, strings.Repeat("p", MaxURLLen-40)),
			Title:       strings.Repeat("é", MaxTitleLen),
			Description: strings.Repeat("é", MaxDescriptionLen),
			Author:      strings.Repeat("é", MaxAuthorLen),
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	expect := func(what string, check func(it *SavedItem) bool) {
		t.Helper()
		items, err := Of(st).SavedItems(t.Context(), m.ID, ids)
		if err != nil || len(items) != len(ids) {
			t.Fatalf("%s: %d items (%v)", what, len(items), err)
		}
		for _, it := range items {
			if !check(it) {
				t.Fatalf("%s: item %s is %+v", what, it.ID, it)
			}
		}
	}
	unknown := append(append([]string(nil), ids[:len(ids)-1]...), "123456789") // the last one

	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, unknown, StatusArchived); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("status with an unknown id: %v, want storage.ErrNotFound", err)
	}
	expect("after the refused status change", func(it *SavedItem) bool { return it.Status == StatusActive })
	got, err := Of(st).SetItemsStatus(t.Context(), m.ID, ids, StatusArchived)
	if err != nil || len(got) != len(ids) || got[0].ID != ids[0] || got[len(got)-1].ID != ids[len(ids)-1] {
		t.Fatalf("archive %d items: %d back (%v)", len(ids), len(got), err)
	}
	expect("archived", func(it *SavedItem) bool { return it.Status == StatusArchived })

	l, err := Of(st).CreateLabel(t.Context(), m.ID, "long reads", "#ff0000")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).SetItemLabels(t.Context(), m.ID, ids, LabelChange{Add: []string{l.ID}}); err != nil {
		t.Fatalf("label %d items: %v", len(ids), err)
	}
	expect("labelled", func(it *SavedItem) bool { return reflect.DeepEqual(it.LabelIDs, []string{l.ID}) })
	before := time.Now().UTC()
	if _, err := Of(st).UpdateLabel(t.Context(), m.ID, l.ID, "renamed", "#00ff00"); err != nil {
		t.Fatalf("rename the label: %v", err)
	}
	expect("after the rename", func(it *SavedItem) bool { return !it.UpdatedAt.Before(before.Truncate(time.Second)) })
	if err := Of(st).DeleteLabel(t.Context(), m.ID, l.ID); err != nil {
		t.Fatalf("delete the label: %v", err)
	}
	expect("after deleting the label", func(it *SavedItem) bool { return len(it.LabelIDs) == 0 })

	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, ids[1:], StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := Of(st).PermanentlyDeleteItems(t.Context(), m.ID, ids); !storage.IsInvalid(err) {
		t.Fatalf("delete with one item not in the trash: %v, want invalid", err)
	}
	if items, _ := Of(st).SavedItems(t.Context(), m.ID, ids); len(items) != len(ids) {
		t.Fatalf("refused delete removed %d items", len(ids)-len(items))
	}
	if err := Of(st).PermanentlyDeleteItems(t.Context(), m.ID, ids[1:]); err != nil {
		t.Fatalf("delete %d items: %v", len(ids)-1, err)
	}
	if items, _ := Of(st).SavedItems(t.Context(), m.ID, ids); len(items) != 1 || items[0].ID != ids[0] {
		t.Fatalf("after deleting all but one: %d items left", len(items))
	}
}

func TestDateRangesBeyondNanosecondTimes(t *testing.T) {
	st, m := openSavedTest(t)
	saveN(t, st, m.ID, 3)
	day := func(s string) *time.Time {
		d, err := time.Parse("2006-01-02", s)
		if err != nil {
			t.Fatal(err)
		}
		return &d
	}
	cases := []struct {
		name     string
		from, to *time.Time
		want     int
	}{
		{"*..2300-01-01", nil, day("2300-01-01"), 3},
		{"2020-01-01..9999-12-31", day("2020-01-01"), day("9999-12-31"), 3},
		{"1500-01-01..*", day("1500-01-01"), nil, 3},
		{"0001-01-01..2300-01-01", day("0001-01-01"), day("2300-01-01"), 3},
		{"2300-01-01..*", day("2300-01-01"), nil, 0},
		{"*..1500-01-01", nil, day("1500-01-01"), 0},
	}
	for _, c := range cases {
		for _, field := range []SortField{SortCreatedAt, SortUpdatedAt, SortTitle} {
			for _, desc := range []bool{false, true} {
				f := ItemFilter{SavedFrom: c.from, SavedTo: c.to}
				if field == SortUpdatedAt {
					f = ItemFilter{UpdatedFrom: c.from, UpdatedTo: c.to}
				}
				p, err := Of(st).SavedItemsPage(t.Context(), m.ID, f, PageRequest{Field: field, Desc: desc, First: 10})
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Items) != c.want {
					t.Errorf("%s sorted by %s desc=%v: %d items, want %d", c.name, field, desc, len(p.Items), c.want)
				}
			}
		}
	}
}
