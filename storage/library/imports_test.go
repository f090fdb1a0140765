package library

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

func importJob(t testing.TB, st *storage.Store, mid string, labelIDs ...string) *ImportJob {
	t.Helper()
	j, err := Of(st).CreateImportJob(t.Context(), &ImportJob{MemberID: mid, Format: "POCKET", FileName: "x.zip", Staged: "/tmp/x", Total: 3, LabelIDs: labelIDs})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestImportItemsKeepDatesStatusLabelsAndRepeatChangesNothing(t *testing.T) {
	st, m := openSavedTest(t)
	kitchen, err := Of(st).CreateLabel(t.Context(), m.ID, "Kitchen", "#ff0000")
	if err != nil {
		t.Fatal(err)
	}
	saved := time.Date(2019, 5, 1, 8, 0, 0, 0, time.UTC)
	entries := func() []ImportEntry {
		return []ImportEntry{
			{Pos: 1, Ref: "row 1", Item: &ImportItem{URL: "https://example.com/a", Title: "A", CreatedAt: saved,
				Status: StatusArchived, Labels: []string{"kitchen", "New One"}, HTML: "<p>A body</p>", Text: "A body",
				Highlights: []ImportHighlight{{Segments: []HighlightSegment{{XPath: "/p[1]", EndOffset: 1, Text: "A"}}, Note: "n"}}}},
			{Pos: 2, Ref: "row 2", Failure: "the row has no URL"},
			{Pos: 3, Ref: "row 3", Item: &ImportItem{URL: "https://example.com/b", Title: "B", Fetch: true}},
			{Pos: 4, Ref: "row 4", Item: &ImportItem{URL: "javascript:alert(1)", Title: "bad"}},
		}
	}
	j := importJob(t, st, m.ID)
	got, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, entries(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Position != 4 || got.Created != 2 || got.Fetching != 1 || got.Failed != 2 || got.Existing != 0 ||
		len(got.Failures) != 2 || got.Failures[1].Ref != "row 4" || !strings.Contains(got.Failures[1].Reason, "http") {
		t.Fatalf("job: %+v", got)
	}
	labels, _ := Of(st).Labels(t.Context(), m.ID)
	if len(labels) != 2 || labels[1].Name != "New One" {
		t.Fatalf("labels: %+v", labels)
	}
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: StatusAll}, PageRequest{Field: SortCreatedAt, First: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 2 {
		t.Fatalf("items: %+v", page.Items)
	}
	var a *SavedItem
	for _, it := range page.Items {
		if it.Title == "A" {
			a = it
		}
	}
	if a == nil || !a.CreatedAt.Equal(saved) || a.Status != StatusArchived || len(a.LabelIDs) != 2 || a.LabelIDs[0] != kitchen.ID || a.HighlightCount != 1 {
		t.Fatalf("item A: %+v", a)
	}
	pend, _ := Of(st).PendingFetches(t.Context(), 10, false, true)
	if len(pend) != 1 || !pend[0].Import || pend[0].URL != "https://example.com/b" {
		t.Fatalf("pending fetches: %+v", pend)
	}

	// The same entries again, in a new job with a label for everything:
	// nothing new, A keeps its date and content and gains only the label.
	extra, _ := Of(st).CreateLabel(t.Context(), m.ID, "Imported", "#00ff00")
	j2 := importJob(t, st, m.ID, extra.ID)
	got, err = Of(st).ImportItems(t.Context(), m.ID, j2.ID, entries(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Created != 0 || got.Existing != 2 || got.Failed != 2 {
		t.Fatalf("repeat: %+v", got)
	}
	again, _ := Of(st).SavedItem(t.Context(), m.ID, a.ID)
	if !again.CreatedAt.Equal(saved) || len(again.LabelIDs) != 3 || again.HighlightCount != 1 || again.Status != StatusArchived {
		t.Fatalf("repeat changed A: %+v", again)
	}
	// Entries at or before the job's position are not taken twice (a
	// batch written before a crash, read again after it).
	got, err = Of(st).ImportItems(t.Context(), m.ID, j2.ID, entries()[:2], nil, 0)
	if err != nil || got.Existing != 2 || got.Position != 4 {
		t.Fatalf("replay: %+v %v", got, err)
	}
}

func TestImportItemsSplitsWhatBadgerCannotTakeAtOnce(t *testing.T) {
	st, m := openSavedTest(t)
	j := importJob(t, st, m.ID)
	var entries []ImportEntry
	body := strings.Repeat("word ", 20000) // 100 kB each: 300 of them pass Badger's transaction limit
	for i := 1; i <= 300; i++ {
		entries = append(entries, ImportEntry{Pos: i, Item: &ImportItem{URL: fmt.Sprintf("https://example.com/%d", i), Text: body}})
	}
	got, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, entries, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Created != 300 || got.Position != 300 {
		t.Fatalf("job: %+v", got)
	}
}

func TestImportJobsListAndLimit(t *testing.T) {
	st, m := openSavedTest(t)
	for i := 0; i < MaxUnfinishedImports; i++ {
		importJob(t, st, m.ID)
	}
	if _, err := Of(st).CreateImportJob(t.Context(), &ImportJob{MemberID: m.ID, Staged: "/tmp/y"}); !storage.IsInvalid(err) {
		t.Fatalf("past the unfinished limit: %v", err)
	}
	un, _ := Of(st).UnfinishedImportJobs(t.Context())
	if len(un) != MaxUnfinishedImports {
		t.Fatalf("unfinished: %d", len(un))
	}
	if _, err := Of(st).UpdateImportJob(t.Context(), m.ID, un[0].ID, func(j *ImportJob) { j.State = ImportDone }); err != nil {
		t.Fatal(err)
	}
	jobs, _ := Of(st).ImportJobs(t.Context(), m.ID)
	if len(jobs) != MaxUnfinishedImports || jobs[len(jobs)-1].FinishedAt == nil {
		t.Fatalf("jobs: %+v", jobs)
	}
	if err := members.Of(st).DeleteMember(t.Context(), m.Username); err != nil {
		t.Fatal(err)
	}
	if un, _ := Of(st).UnfinishedImportJobs(t.Context()); len(un) != 0 {
		t.Fatalf("a deleted member's jobs remain: %+v", un)
	}
}

// Deleting a member removes the staged files of its unfinished imports (an
// export holds everything the member saved elsewhere): nothing else would
// until the runner's hourly sweep of files over an hour old.
func TestDeleteMemberRemovesStagedImportFiles(t *testing.T) {
	st, m := openSavedTest(t)
	staged := filepath.Join(t.TempDir(), "upload-1")
	if err := os.WriteFile(staged, []byte("url,title\nhttps://example.com/secret,Secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).CreateImportJob(t.Context(), &ImportJob{MemberID: m.ID, Format: "POCKET", FileName: "x.csv", Staged: staged, Total: 1}); err != nil {
		t.Fatal(err)
	}
	if err := members.Of(st).DeleteMember(t.Context(), m.Username); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(staged); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the staged file of the deleted member's import is still there (stat: %v)", err)
	}
	if jobs, err := Of(st).UnfinishedImportJobs(t.Context()); err != nil || len(jobs) != 0 {
		t.Fatalf("unfinished jobs after delete: %v %v", jobs, err)
	}
}

// errDeleteRefused is what the hook below makes DeleteMember fail with.
var errDeleteRefused = errors.New("test: delete refused")

// refuseDeleteOf names a member whose DeleteMember fails inside its
// transaction, after the other domains' cleanups of the member ran.
var refuseDeleteOf atomic.Pointer[string]

func init() {
	members.OnDelete(func(_ *storage.Tx, memberID string) error {
		if p := refuseDeleteOf.Load(); p != nil && *p == memberID {
			return errDeleteRefused
		}
		return nil
	})
}

// A DeleteMember that fails commits nothing: the member, its import job
// and the job's staged file all stay (the files go only once the delete
// commits), and a later delete that succeeds removes the file.
func TestFailedDeleteMemberKeepsStagedImportFiles(t *testing.T) {
	st, m := openSavedTest(t)
	staged := filepath.Join(t.TempDir(), "upload-1")
	if err := os.WriteFile(staged, []byte("url,title\nhttps://example.com/kept,Kept\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := Of(st).CreateImportJob(t.Context(), &ImportJob{MemberID: m.ID, Format: "POCKET", FileName: "x.csv", Staged: staged, Total: 1})
	if err != nil {
		t.Fatal(err)
	}
	refuseDeleteOf.Store(&m.ID)
	err = members.Of(st).DeleteMember(t.Context(), m.Username)
	refuseDeleteOf.Store(nil)
	if !errors.Is(err, errDeleteRefused) {
		t.Fatalf("DeleteMember = %v, want the refusal", err)
	}
	if _, err := os.Stat(staged); err != nil {
		t.Fatalf("a failed delete removed the staged file of the member's import: %v", err)
	}
	if _, err := members.Of(st).MemberByID(t.Context(), m.ID); err != nil {
		t.Fatalf("the member after a failed delete: %v", err)
	}
	if jobs, err := Of(st).UnfinishedImportJobs(t.Context()); err != nil || len(jobs) != 1 || jobs[0].ID != j.ID {
		t.Fatalf("unfinished jobs after a failed delete: %+v %v, want job %s", jobs, err, j.ID)
	}
	if err := members.Of(st).DeleteMember(t.Context(), m.Username); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(staged); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the staged file after the delete: stat %v, want it gone", err)
	}
}

// An item with more highlights than one transaction takes is counted as a
// failed entry and the job goes on: it was an error that stopped the batch,
// and the runner tried the same entry again forever.
func TestImportItemTooBigForOneTransactionFailsAlone(t *testing.T) {
	badgerOnly(t) // PostgreSQL takes any transaction size
	st, m := openSavedTest(t)
	j := importJob(t, st, m.ID)
	big := &ImportItem{URL: "https://example.com/big", Title: "Big"}
	for i := range 60_000 {
		big.Highlights = append(big.Highlights, ImportHighlight{Segments: []HighlightSegment{{XPath: "/", Text: fmt.Sprintf("quote %d", i)}}})
	}
	got, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, []ImportEntry{
		{Pos: 1, Ref: "item 1", Item: big},
		{Pos: 2, Ref: "item 2", Item: &ImportItem{URL: "https://example.com/small", Title: "Small"}},
	}, nil, 0)
	if err != nil {
		t.Fatalf("ImportItems: %v", err)
	}
	if got.Position != 2 || got.Created != 1 || got.Failed != 1 || len(got.Failures) != 1 || got.Failures[0].Ref != "item 1" ||
		!strings.Contains(got.Failures[0].Reason, "more than the store takes at once") {
		t.Fatalf("job: %+v", got)
	}
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: StatusAll}, PageRequest{Field: SortCreatedAt, First: 10})
	if err != nil || len(page.Items) != 1 || page.Items[0].Title != "Small" {
		t.Fatalf("items: %+v %v", page, err)
	}
}

// A backup taken after a member deleted their account holds nothing of it:
// item keys name the title, and Badger keeps a delete marker, with the key,
// for every record deleted since the last compaction (a backup of Badger's
// own stream carried them).
func TestBackupAfterDeleteMemberHoldsNoTraceOfIt(t *testing.T) {
	st, m := openSavedTest(t)
	if _, err := members.Of(st).CreateMember(t.Context(), "keeper", "", "keeper password"); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).CreateLabel(t.Context(), m.ID, "Privatelabelname", "#ff0000"); err != nil {
		t.Fatal(err)
	}
	j := importJob(t, st, m.ID)
	if _, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, []ImportEntry{{Pos: 1, Ref: "row 1",
		Item: &ImportItem{URL: "https://example.com/privateurlpath", Title: "Privatetitleword", HTML: "<p>body</p>", Text: "body"}}}, nil, 0); err != nil {
		t.Fatal(err)
	}
	var before bytes.Buffer
	if err := st.Backup(&before); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{m.ID, "privatetitleword", "Privatelabelname"} {
		if !bytes.Contains(bytes.ToLower(before.Bytes()), bytes.ToLower([]byte(s))) {
			t.Fatalf("the backup before the delete has no %q: the test looks for the wrong thing", s)
		}
	}
	if err := members.Of(st).DeleteMember(t.Context(), m.Username); err != nil {
		t.Fatal(err)
	}
	var after bytes.Buffer
	if err := st.Backup(&after); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{m.ID, "privatetitleword", "privatelabelname", "privateurlpath"} {
		if bytes.Contains(bytes.ToLower(after.Bytes()), []byte(s)) {
			t.Errorf("the backup after the delete still holds %q", s)
		}
	}
	// It restores, with the other members.
	if _, err := st.Replace(bytes.NewReader(after.Bytes())); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if _, err := members.Of(st).Authenticate(t.Context(), "keeper", "keeper password"); err != nil {
		t.Fatalf("the other member after the restore: %v", err)
	}
}

// A member with MaxLabels labels importing items with new label names:
// each new name read every label twice (the legacy name check, then
// createLabel's count) before it was refused, 500 names an item. Once the
// limit is met in a batch, further names cost one lookup. Allocations are
// counted, not time.
func TestImportLabelsPastTheLimitCostOneLookup(t *testing.T) {
	bulk(t)
	st, m := openSavedTest(t)
	for i := range MaxLabels {
		if _, err := Of(st).CreateLabel(t.Context(), m.ID, fmt.Sprintf("have %d", i), "#ff0000"); err != nil {
			t.Fatal(err)
		}
	}
	j := importJob(t, st, m.ID)
	var names []string
	for i := range MaxLabels {
		names = append(names, fmt.Sprintf("new %d", i))
	}
	names = append(names, "HAVE 7")
	entries := []ImportEntry{{Pos: 1, Ref: "row 1", Item: &ImportItem{URL: "https://example.com/a", Title: "A", Labels: names}}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, entries, nil, 0)
	runtime.ReadMemStats(&after)
	if err != nil || got.Created != 1 {
		t.Fatalf("ImportItems: %+v %v", got, err)
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 32<<20 {
		t.Fatalf("ImportItems allocated %d bytes for %d names past the limit", a, MaxLabels)
	}
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: StatusAll}, PageRequest{Field: SortCreatedAt, First: 1})
	if err != nil || len(page.Items) != 1 || len(page.Items[0].LabelIDs) != 1 {
		t.Fatalf("the item's labels: %+v %v", page.Items, err)
	}
	if ls, err := Of(st).LabelsByID(t.Context(), m.ID, page.Items[0].LabelIDs); err != nil || len(ls) != 1 || ls[0].Name != "have 7" {
		t.Fatalf("the item's label: %+v %v", ls, err)
	}
}

// A file of nothing but bad entries does not grow the job's record (read
// and rewritten with every batch) with it: MaxImportFailures are listed,
// every failure is counted, across batches.
func TestImportFailuresListedUpToTheCapAndAllCounted(t *testing.T) {
	st, m := openSavedTest(t)
	j := importJob(t, st, m.ID)
	const bad = 3*MaxImportFailures + 17
	pos := 0
	for pos < bad {
		var batch []ImportEntry
		for len(batch) < 200 && pos < bad {
			pos++
			batch = append(batch, ImportEntry{Pos: pos, Ref: fmt.Sprintf("row %d", pos), Failure: "the row has no URL"})
		}
		if _, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, batch, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Of(st).ImportJob(t.Context(), m.ID, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Failed != bad || got.Position != bad || len(got.Failures) != MaxImportFailures {
		t.Fatalf("failed %d, position %d, %d listed; want %d, %d, %d", got.Failed, got.Position, len(got.Failures), bad, bad, MaxImportFailures)
	}
	if f := got.Failures[MaxImportFailures-1]; f.Ref != fmt.Sprintf("row %d", MaxImportFailures) {
		t.Fatalf("last listed %+v: the first failures are the ones kept", f)
	}
}

// An import job's claim is one holder's until it releases it or the claim
// expires; another holder's release leaves it.
func TestImportJobClaims(t *testing.T) {
	st := openTest(t, testOptions())
	claim := func(holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := Of(st).ClaimImportJob(t.Context(), "job1", holder, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !claim("a", time.Hour) || claim("b", time.Hour) || !claim("a", time.Hour) {
		t.Fatal("a claims, b is refused, a renews")
	}
	if err := Of(st).ReleaseImportJob(t.Context(), "job1", "b"); err != nil {
		t.Fatal(err)
	}
	if claim("b", time.Hour) {
		t.Fatal("b's release dropped a's claim")
	}
	if err := Of(st).ReleaseImportJob(t.Context(), "job1", "a"); err != nil {
		t.Fatal(err)
	}
	claimedB := time.Now()
	if !claim("b", 3*time.Second) {
		t.Fatal("b is refused after a released")
	}
	// Only a claim within b's three seconds must be refused: a machine
	// slow enough to let them pass has nothing to check here.
	if claim("c", time.Hour) && time.Since(claimedB) < 3*time.Second {
		t.Fatal("c claimed while b's claim lasts")
	}
	// b's claim of three seconds expires (a minute: a backstop).
	deadline := time.Now().Add(60 * time.Second)
	for !claim("c", time.Hour) {
		if time.Now().After(deadline) {
			t.Fatal("c is refused after b's claim expired")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An entry named by its title only (Readwise's highlights) goes to the
// member's article of that title, case and outer spaces aside, archived
// ones included, and adds its highlights there; a title no article has,
// a newsletter's, or a deleted item's, is a failure that creates nothing.
func TestImportByTitleFindsTheArticle(t *testing.T) {
	st, m := openSavedTest(t)
	ctx := t.Context()
	j := importJob(t, st, m.ID)
	if _, err := Of(st).ImportItems(ctx, m.ID, j.ID, []ImportEntry{
		{Pos: 1, Ref: "a", Item: &ImportItem{URL: "https://example.com/work", Title: "How to Do Great Work", Status: StatusArchived}},
		{Pos: 2, Ref: "b", Item: &ImportItem{URL: "https://example.com/gone", Title: "Gone", Status: StatusDeleted}},
		{Pos: 3, Ref: "c", Item: &ImportItem{Type: TypeNewsletter, Title: "Weekly letter", HTML: "<p>x</p>", Text: "x"}},
	}, nil, 0); err != nil {
		t.Fatal(err)
	}
	quote := func(s string) []ImportHighlight {
		return []ImportHighlight{{Segments: []HighlightSegment{{XPath: "/", Text: s}}, Note: "n"}}
	}
	j2 := importJob(t, st, m.ID)
	got, err := Of(st).ImportItems(ctx, m.ID, j2.ID, []ImportEntry{
		{Pos: 1, Ref: "row 1", Item: &ImportItem{Title: "  how to do great WORK ", ByTitle: true, Labels: []string{"essays"}, Highlights: quote("Curiosity")}},
		{Pos: 2, Ref: "row 2", Item: &ImportItem{Title: "Gone", ByTitle: true, Highlights: quote("x")}},
		{Pos: 3, Ref: "row 3", Item: &ImportItem{Title: "Weekly letter", ByTitle: true, Highlights: quote("x")}},
		{Pos: 4, Ref: "row 4", Item: &ImportItem{Title: "Middlemarch", ByTitle: true, Highlights: quote("x")}},
	}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Created != 0 || got.Existing != 1 || got.Failed != 3 || !strings.Contains(got.Failures[2].Reason, `no article titled "Middlemarch"`) {
		t.Fatalf("job: %+v", got)
	}
	page, err := Of(st).SavedItemsPage(ctx, m.ID, ItemFilter{Status: StatusAll}, PageRequest{Field: SortCreatedAt, First: 10})
	if err != nil || len(page.Items) != 3 {
		t.Fatalf("%v, %d items", err, len(page.Items))
	}
	for _, it := range page.Items {
		if it.OriginalURL == "https://example.com/work" && (it.HighlightCount != 1 || len(it.LabelIDs) != 1 || it.Status != StatusArchived) {
			t.Errorf("the article: %+v", it)
		} else if it.OriginalURL != "https://example.com/work" && it.HighlightCount != 0 {
			t.Errorf("another item got the highlight: %+v", it)
		}
	}
}

// An item imported without content has no content record: it reads as
// empty content, and its fetch's content replaces it; an item that is not
// there is still not found.
func TestImportedItemWithoutContentReadsAsEmpty(t *testing.T) {
	st, m := openSavedTest(t)
	j := importJob(t, st, m.ID)
	if _, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, []ImportEntry{
		{Pos: 1, Ref: "row 1", Item: &ImportItem{URL: "https://example.com/later", Title: "Later", Fetch: true}},
	}, nil, 0); err != nil {
		t.Fatal(err)
	}
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: StatusAll}, PageRequest{Field: SortCreatedAt, First: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("items: %+v %v", page, err)
	}
	id := page.Items[0].ID
	if c, err := Of(st).ItemContent(t.Context(), m.ID, id); err != nil || *c != (ItemContent{}) {
		t.Fatalf("content: %+v %v", c, err)
	}
	if h, err := Of(st).ItemHTML(t.Context(), m.ID, id); err != nil || h != "" {
		t.Fatalf("html: %q %v", h, err)
	}
	if _, err := Of(st).FinishFetch(t.Context(), m.ID, id, NewItem{URL: "https://example.com/later", Title: "Later", HTML: "<p>Now</p>", Text: "Now"}); err != nil {
		t.Fatal(err)
	}
	if c, err := Of(st).ItemContent(t.Context(), m.ID, id); err != nil || c.HTML != "<p>Now</p>" || c.Text != "Now" {
		t.Fatalf("content after the fetch: %+v %v", c, err)
	}
	for _, missing := range []string{"1", id + "0"} {
		if _, err := Of(st).ItemContent(t.Context(), m.ID, missing); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("content of a missing item: %v", err)
		}
		if _, err := Of(st).ItemHTML(t.Context(), m.ID, missing); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("html of a missing item: %v", err)
		}
	}
}

// The items of one batch are written with the transaction's buffers
// (itemScratch): each item's content record, index entries and ordered
// filter keys are its own, the content record as json.Marshal writes it,
// and a word count the export lacks counts the text's words as
// strings.Fields does (Unicode spaces, invalid UTF-8).
func TestImportedBatchKeepsEachItemsOwnRecords(t *testing.T) {
	st, m := openSavedTest(t)
	ctx := t.Context()
	texts := []string{
		strings.Repeat("long  text\twith\u00a0words\u2003and\u3000more ", 300),
		"short \xff\xfe bytes\u2028line",
		"",
	}
	var entries []ImportEntry
	for i, text := range texts {
		entries = append(entries, ImportEntry{Pos: i + 1, Ref: fmt.Sprint("row ", i+1), Item: &ImportItem{
			URL: fmt.Sprintf("https://example.com/%d", i), Title: fmt.Sprintf("Title %c", 'C'-i),
			Labels: []string{fmt.Sprint("l", i%2)}, HTML: fmt.Sprintf("<p>%d &amp; <b>%s</b></p>", i, text), Text: text,
		}})
	}
	j := importJob(t, st, m.ID)
	if got, err := Of(st).ImportItems(ctx, m.ID, j.ID, entries, nil, 0); err != nil || got.Created != 3 {
		t.Fatalf("job: %+v %v", got, err)
	}
	page, err := Of(st).SavedItemsPage(ctx, m.ID, ItemFilter{}, PageRequest{Field: SortTitle, First: 10})
	if err != nil || len(page.Items) != 3 {
		t.Fatalf("page by title: %+v %v", page, err)
	}
	for i, it := range page.Items { // titles C, B, A: the batch's order reversed
		in := entries[2-i].Item
		if it.Title != in.Title || it.OriginalURL != in.URL || it.WordCount != len(strings.Fields(in.Text)) {
			t.Errorf("item %d: %q %q %d words, want %q %q %d", i, it.Title, it.OriginalURL, it.WordCount, in.Title, in.URL, len(strings.Fields(in.Text)))
		}
		c, err := Of(st).ItemContent(ctx, m.ID, it.ID)
		want, _ := json.Marshal(&ItemContent{HTML: in.HTML, Text: in.Text})
		var wantContent ItemContent // invalid UTF-8 read back as U+FFFD, as JSON keeps it
		if err := json.Unmarshal(want, &wantContent); err != nil {
			t.Fatal(err)
		}
		if err != nil || *c != wantContent {
			t.Errorf("content of %q: %+v %v, want %+v", in.Title, c, err, wantContent)
		}
		err = st.View(ctx, func(tx *storage.Tx) error {
			rec, err := tx.Get(contentKey(m.ID, it.ID))
			if err == nil && !bytes.Equal(rec, want) {
				t.Errorf("content record of %q: %q, want %q", in.Title, rec, want)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	labels, _ := Of(st).Labels(ctx, m.ID)
	for _, l := range labels {
		page, err := Of(st).SavedItemsPage(ctx, m.ID, ItemFilter{LabelsAll: [][]string{{l.Name}}}, PageRequest{Field: SortCreatedAt, First: 10})
		if err != nil {
			t.Fatal(err)
		}
		var titles []string
		for _, it := range page.Items {
			titles = append(titles, it.Title)
		}
		want := map[string]string{"l0": "Title A,Title C", "l1": "Title B"}[l.Name]
		if slices.Sort(titles); strings.Join(titles, ",") != want {
			t.Errorf("label %s: %v, want %s", l.Name, titles, want)
		}
	}
}

// An imported date the library cannot keep in its order (earlier than
// EarliestSavedAt) is treated as a date later than now is: the item is
// imported, saved at the time of the import.
func TestImportedDateBeforeTheEarliestSavedAtIsNow(t *testing.T) {
	st, m := openSavedTest(t)
	old := time.Date(1960, 1, 2, 0, 0, 0, 0, time.UTC)
	j := importJob(t, st, m.ID)
	before := storage.Now()
	got, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, []ImportEntry{
		{Pos: 1, Ref: "row 1", Item: &ImportItem{URL: "https://example.com/1500", Title: "Early", CreatedAt: time.Date(1500, 6, 1, 0, 0, 0, 0, time.UTC), Text: "x"}},
		{Pos: 2, Ref: "row 2", Item: &ImportItem{URL: "https://example.com/1960", Title: "Old", CreatedAt: old, Text: "x"}},
	}, nil, 0)
	if err != nil || got.Created != 2 || got.Failed != 0 {
		t.Fatalf("job: %+v %v", got, err)
	}
	after := storage.Now()
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: StatusAll}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("items: %+v %v", page, err)
	}
	if early := page.Items[0]; early.Title != "Early" || early.CreatedAt.Before(before) || early.CreatedAt.After(after) {
		t.Errorf("the item dated 1500: %+v, want saved between %s and %s", early, before, after)
	}
	if page.Items[1].Title != "Old" || !page.Items[1].CreatedAt.Equal(old) {
		t.Errorf("the item dated 1960: %+v", page.Items[1])
	}
}

// An imported read date later than now (a time in milliseconds read as
// seconds: the year 55,000, which no client parses and JSON cannot write)
// is the time of the import, and one earlier than EarliestSavedAt the
// item's saved date, as imported saved dates are treated; others are kept.
func TestImportedReadDatesTheLibraryCannotKeep(t *testing.T) {
	st, m := openSavedTest(t)
	j := importJob(t, st, m.ID)
	saved := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	far, early, kept := time.Unix(1_700_000_000_000, 0), time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 3, 2, 8, 30, 0, 0, time.UTC)
	before := storage.Now()
	got, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, []ImportEntry{
		{Pos: 1, Ref: "row 1", Item: &ImportItem{URL: "https://example.com/far", Title: "Far", CreatedAt: saved, ReadAt: &far, Status: StatusArchived, Text: "x"}},
		{Pos: 2, Ref: "row 2", Item: &ImportItem{URL: "https://example.com/early", Title: "Early", CreatedAt: saved, ReadAt: &early, Status: StatusArchived, Text: "x"}},
		{Pos: 3, Ref: "row 3", Item: &ImportItem{URL: "https://example.com/kept", Title: "Kept", CreatedAt: saved, ReadAt: &kept, Status: StatusArchived, Text: "x"}},
	}, nil, 0)
	if err != nil || got.Created != 3 {
		t.Fatalf("job: %+v %v", got, err)
	}
	after := storage.Now()
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: StatusArchived}, PageRequest{Field: SortTitle, First: 10})
	if err != nil || len(page.Items) != 3 {
		t.Fatalf("items: %+v %v", page, err)
	}
	read := map[string]time.Time{}
	for _, it := range page.Items {
		if it.ReadAt == nil {
			t.Fatalf("%s: no read date", it.Title)
		}
		read[it.Title] = *it.ReadAt
	}
	if r := read["Far"]; r.Before(before) || r.After(after) {
		t.Errorf("read in the year 55,000: %s, want between %s and %s", r, before, after)
	}
	if r := read["Early"]; !r.Equal(saved) {
		t.Errorf("read in the year -5: %s, want the saved date %s", r, saved)
	}
	if r := read["Kept"]; !r.Equal(kept) {
		t.Errorf("read at %s: %s", kept, r)
	}
	if _, err := json.Marshal(page.Items); err != nil {
		t.Errorf("the items as JSON, as exports write them: %v", err)
	}
}

// An item has one note: an imported note (Raindrop's or Karakeep's note
// on a bookmark) on an item that has one is added to it after a blank
// line, as AddNote adds it, and a new item's several notes make one;
// importing the same file again changes no note.
func TestImportedNotesJoinTheItemsNote(t *testing.T) {
	st, m := openSavedTest(t)
	ctx := t.Context()
	item := saveN(t, st, m.ID, 1)[0]
	if _, err := Of(st).AddNote(ctx, m.ID, item.ID, "Bake at dawn."); err != nil {
		t.Fatal(err)
	}
	note := func(s string) ImportHighlight { return ImportHighlight{Note: s} }
	entries := []ImportEntry{
		{Pos: 1, Ref: "row 1", Item: &ImportItem{URL: item.OriginalURL, Highlights: []ImportHighlight{note("Relire avant dimanche")}}},
		{Pos: 2, Ref: "row 2", Item: &ImportItem{URL: "https://example.com/new", Highlights: []ImportHighlight{
			note("First."), {Segments: []HighlightSegment{{XPath: "/", Text: "a passage"}}}, note("Second."), note("First.")}}},
	}
	notes := func() map[string][]string {
		got := map[string][]string{}
		err := Of(st).ForEachHighlight(ctx, m.ID, func(h *Highlight) error {
			if h.IsNote() {
				got[h.ItemURL] = append(got[h.ItemURL], h.Note)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := map[string][]string{item.OriginalURL: {"Bake at dawn.\n\nRelire avant dimanche"}, "https://example.com/new": {"First.\n\nSecond."}}
	for round := range 2 {
		if _, err := Of(st).ImportItems(ctx, m.ID, importJob(t, st, m.ID).ID, entries, nil, 0); err != nil {
			t.Fatal(err)
		}
		if got := notes(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: notes %q, want %q", round+1, got, want)
		}
	}
	page, err := Of(st).SavedItemsPage(ctx, m.ID, ItemFilter{Status: StatusAll}, PageRequest{Field: SortCreatedAt, First: 10})
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("%v, %d items", err, len(page.Items))
	}
	for _, it := range page.Items {
		if want := map[string]int{item.OriginalURL: 1, "https://example.com/new": 2}[it.OriginalURL]; it.HighlightCount != want {
			t.Errorf("%s: %d highlights, want %d", it.OriginalURL, it.HighlightCount, want)
		}
	}
}

// A note of several paragraphs imported onto an item with a note of the
// member's own is joined once, however often the file is imported; and
// the item's updatedAt moves when it is joined (a client syncing by
// updatedAt takes the note then), not when an import adds nothing.
func TestImportedNoteOfParagraphsJoinsOnceAndMovesTheItem(t *testing.T) {
	st, m := openSavedTest(t)
	ctx := t.Context()
	item := saveN(t, st, m.ID, 1)[0]
	if _, err := Of(st).AddNote(ctx, m.ID, item.ID, "Mine."); err != nil {
		t.Fatal(err)
	}
	updatedAt := func() time.Time {
		it, err := Of(st).SavedItem(ctx, m.ID, item.ID)
		if err != nil {
			t.Fatal(err)
		}
		return it.UpdatedAt
	}
	// One job, the file's entries given again as later positions of it (a
	// member may run three imports at once).
	j, err := Of(st).CreateImportJob(ctx, &ImportJob{MemberID: m.ID, Format: "POCKET", FileName: "x.csv", Staged: "/tmp/x", Total: 5})
	if err != nil {
		t.Fatal(err)
	}
	entries := []ImportEntry{{Ref: "row 1", Item: &ImportItem{URL: item.OriginalURL,
		Highlights: []ImportHighlight{{Note: "One.\n\nTwo."}}}}}
	for round := range 3 {
		entries[0].Pos = round + 1
		before := updatedAt()
		for !storage.Now().After(before) { // a later stamp for the import to give
			time.Sleep(time.Millisecond)
		}
		if _, err := Of(st).ImportItems(ctx, m.ID, j.ID, entries, nil, 0); err != nil {
			t.Fatal(err)
		}
		if got, want := itemNotes(t, st, m.ID, item.ID), []string{"Mine.\n\nOne.\n\nTwo."}; !slices.Equal(got, want) {
			t.Fatalf("round %d: notes %q, want %q", round+1, got, want)
		}
		if moved := updatedAt().After(before); moved != (round == 0) {
			t.Errorf("round %d: the item's updatedAt moved %v, want %v (only the first import joins the note)", round+1, moved, round == 0)
		}
	}
	// The same words as one paragraph are held; words of two paragraphs
	// that are not both whole are another text.
	for i, text := range []string{"One. Two.", "Two. Three."} {
		entries[0].Pos, entries[0].Item.Highlights = 4+i, []ImportHighlight{{Note: text}}
		if _, err := Of(st).ImportItems(ctx, m.ID, j.ID, entries, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := itemNotes(t, st, m.ID, item.ID), []string{"Mine.\n\nOne.\n\nTwo.\n\nTwo. Three."}; !slices.Equal(got, want) {
		t.Errorf("notes %q, want %q", got, want)
	}
}

// itemNotes are the notes of the member's item's highlights.
func itemNotes(t *testing.T, st *storage.Store, memberID, itemID string) []string {
	t.Helper()
	hls, err := Of(st).ItemHighlights(t.Context(), memberID, itemID)
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, h := range hls {
		notes = append(notes, h.Note)
	}
	return notes
}
