package graphql_test

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// While an emptying of the trash is pending, its items are hidden from
// clients and a page that passes over more than a bound of them ends short.
// Omnivore's plugins page by offset and take the next offset as this one
// plus the size asked (obsidian-omnivore src/main.ts: `for (after = 0; ;
// after += size)`), so every page they get must be full until the last:
// paged so, the trash and updatesSince (which walk the hidden items) and
// in:all (which does not) list every item a client may see exactly once
// and in order, however many hidden items lie between.
func TestOmnivoreOffsetPagesStayWholeWhileTheTrashIsEmptied(t *testing.T) {
	const bound = 100 // hidden items a page passes over before it ends short
	noSync := false
	st := storage.Prepare(t.TempDir(), storage.Options{SyncWrites: &noSync, GCInterval: -1})
	library.SetMaxHiddenPassed(st, bound)
	if err := st.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	api := newAPI(st, options{})
	t.Cleanup(func() { api.Close() })
	srv := httptest.NewServer(served(api))
	t.Cleanup(srv.Close)
	e := &env{t: t, store: st, api: api, srv: srv}
	e.member, e.token = e.newMember("alice")
	lib := library.Of(st)

	base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(minute int) time.Time { return base.Add(time.Duration(minute) * time.Minute) }
	imported := 0
	importItems := func(items []*library.ImportItem) []string {
		j, err := lib.CreateImportJob(t.Context(), &library.ImportJob{MemberID: e.member.ID, Format: "POCKET", FileName: "x.zip", Staged: "/tmp/x", Total: len(items)})
		if err != nil {
			t.Fatal(err)
		}
		entries := make([]library.ImportEntry, len(items))
		for i, it := range items {
			imported++
			it.URL, it.Title = fmt.Sprintf("https://example.com/%d", imported), "Item"
			entries[i] = library.ImportEntry{Pos: i + 1, Item: it}
		}
		if _, err := lib.ImportItems(t.Context(), e.member.ID, j.ID, entries, nil, 0); err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(items))
		for i, it := range items {
			if ids[i], err = lib.ImportedItemID(t.Context(), e.member.ID, it); err != nil {
				t.Fatal(err)
			}
		}
		return ids
	}

	// The trash to empty: one item a minute. The request deletes the
	// oldest 1,000; the 600 after them stay hidden until the background
	// deletes them, six times what a page passes over.
	const trashed, inRequest = 1600, 1000
	var trash []*library.ImportItem
	for m := range trashed {
		trash = append(trash, &library.ImportItem{CreatedAt: at(m), Status: library.StatusDeleted})
	}
	trashIDs := importItems(trash)
	// Items in the inbox, newest first: 20 newer than the trash, a
	// cluster of 3 every 150 minutes among the hidden items, 20 among
	// those the request deletes.
	var inboxAt []int
	for i := range 20 {
		inboxAt = append(inboxAt, trashed+20-i)
	}
	for m := trashed - 50; m > inRequest; m -= 150 {
		inboxAt = append(inboxAt, m, m-1, m-2)
	}
	for i := range 20 {
		inboxAt = append(inboxAt, inRequest-10-i*40)
	}
	var inbox []*library.ImportItem
	for _, m := range inboxAt {
		inbox = append(inbox, &library.ImportItem{CreatedAt: at(m).Add(30 * time.Second)})
	}
	inboxIDs := importItems(inbox)

	release := library.HoldEmptyings(st)
	t.Cleanup(release)
	if n, err := lib.EmptyTrash(t.Context(), e.member.ID); err != nil || n != trashed {
		t.Fatalf("emptyTrash = %d, %v; want %d", n, err, trashed)
	}
	// Moved to the trash after the member emptied it, among the hidden
	// items: these stay.
	lateAt := []int{1530, 1290, 1100}
	var late []*library.ImportItem
	for _, m := range lateAt {
		late = append(late, &library.ImportItem{CreatedAt: at(m).Add(10 * time.Second), Status: library.StatusDeleted})
	}
	lateIDs := importItems(late)

	// What a client may see, newest first (Omnivore's order): in:all is
	// every item not in the trash; updatesSince, every item, then those
	// deleted for good (the request's).
	type dated struct {
		id string
		at int
	}
	newestFirst := func(ids [][]string, ats [][]int) []string {
		var all []dated
		for i := range ids {
			for j, id := range ids[i] {
				all = append(all, dated{id, ats[i][j]})
			}
		}
		slices.SortFunc(all, func(a, b dated) int { return b.at - a.at })
		var out []string
		for _, d := range all {
			out = append(out, d.id)
		}
		return out
	}
	wantInbox := newestFirst([][]string{inboxIDs}, [][]int{inboxAt})
	wantUpdated := newestFirst([][]string{inboxIDs, lateIDs}, [][]int{inboxAt, lateAt})
	oldestFirst := func(ids []string) []string {
		out := slices.Clone(ids)
		slices.Reverse(out)
		return out
	}

	for _, size := range []int{15, 4} {
		for _, c := range []struct {
			query string
			want  []string
		}{
			{"in:all", wantInbox},
			{"sort:saved-asc in:all", oldestFirst(wantInbox)},
			{"in:trash", lateIDs},
			{"sort:saved-asc in:trash", oldestFirst(lateIDs)},
		} {
			got := e.omnivorePagedIDs(c.query, size, 10*len(c.want))
			if !slices.Equal(got, c.want) {
				t.Errorf("%q by %d: the plugin's paging lists %d items %v,\nwant %d %v", c.query, size, len(got), got, len(c.want), c.want)
			}
		}

		// updatesSince, paged the same way: the items, then those deleted
		// for good, each once.
		got := e.omnivoreUpdatedIDs(base.Add(-time.Hour).Format(time.RFC3339), size, 2*trashed)
		if n := len(wantUpdated); len(got) < n || !slices.Equal(got[:n], wantUpdated) {
			t.Errorf("updatesSince by %d: the items are %v,\nwant %v", size, got[:min(n, len(got))], wantUpdated)
		} else {
			gone := slices.Sorted(slices.Values(got[n:]))
			if want := slices.Sorted(slices.Values(trashIDs[:inRequest])); !slices.Equal(gone, want) {
				t.Errorf("updatesSince by %d: %d deleted for good, want the %d the request deleted", size, len(gone), len(want))
			}
		}
	}
}

// omnivorePagedIDs pages a search as Omnivore's plugins do (after 0, then
// after += size, until hasNextPage is false; at most past offset limit) and
// returns the ids in order.
func (e *env) omnivorePagedIDs(q string, size, limit int) []string {
	e.t.Helper()
	var ids []string
	for after := 0; ; after += size {
		r := e.omnivoreSearch(q, after, size, "html")
		if r.Search.Typename != "SearchSuccess" {
			e.t.Fatalf("search %q after %d: %+v", q, after, r.Search)
		}
		for _, ed := range r.Search.Edges {
			ids = append(ids, ed.Node.ID)
		}
		if !r.Search.PageInfo.HasNextPage || after > limit {
			return ids
		}
	}
}

// omnivoreUpdatedIDs pages updatesSince the same way and returns the
// item ids in order, failing on an id listed twice.
func (e *env) omnivoreUpdatedIDs(since string, size, limit int) []string {
	e.t.Helper()
	var ids []string
	seen := map[string]bool{}
	for after := 0; ; after += size {
		var r struct {
			UpdatesSince struct {
				Edges []struct {
					ItemID string `json:"itemID"`
				} `json:"edges"`
				PageInfo struct {
					HasNextPage bool `json:"hasNextPage"`
				} `json:"pageInfo"`
			} `json:"updatesSince"`
		}
		vars := map[string]any{"first": size, "since": since}
		if after > 0 {
			vars["after"] = strconv.Itoa(after)
		}
		e.do(omnivoreUpdates, vars, &r)
		for _, ed := range r.UpdatesSince.Edges {
			if seen[ed.ItemID] {
				e.t.Fatalf("updatesSince by %d: item %s twice (after %d)", size, ed.ItemID, after)
			}
			seen[ed.ItemID] = true
			ids = append(ids, ed.ItemID)
		}
		if !r.UpdatesSince.PageInfo.HasNextPage || after > limit {
			return ids
		}
	}
}
