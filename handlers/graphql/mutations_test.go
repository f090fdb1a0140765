package graphql_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Mutations as Inboxt's web app writes them.
const (
	updateLabelMutation   = `mutation UpdateLabel($data: UpdateLabelInput!) { updateLabel(data: $data) { createdAt id name color order } }`
	deleteLabelMutation   = `mutation DeleteLabel($data: DeleteLabelInput!) { deleteLabel(data: $data) { success } }`
	reorderLabelsMutation = `mutation ReorderLabels($data: ReorderLabelsInput!) { reorderLabels(data: $data) { createdAt id name color order } }`
	setLabelsMutation     = `mutation SetSavedItemLabels($data: SetSavedItemLabelsInput!) {
  setSavedItemLabels(data: $data) { success }
}`
	savedItemFields      = `id createdAt title originalUrl sourceDomain description leadImage wordCount author type status readingProgress readAt isReadManual`
	updateStatusMutation = `mutation UpdateSavedItemsStatus($data: UpdateSavedItemsStatusInput!) {
  updateSavedItemsStatus(data: $data) { ` + savedItemFields + ` }
}`
	readStatusMutation = `mutation UpdateSavedItemsReadStatus($data: UpdateSavedItemsReadStatusInput!) {
  updateSavedItemsReadStatus(data: $data) { ` + savedItemFields + ` }
}`
	progressMutation = `mutation UpdateReadingProgress($data: UpdateReadingProgressInput!) {
  updateReadingProgress(data: $data) { ` + savedItemFields + ` }
}`
	metadataMutation = `mutation UpdateSavedItemMetadata($data: UpdateSavedItemMetadataInput!) {
  updateSavedItemMetadata(data: $data) { ` + savedItemFields + ` labels { createdAt id name color order } }
}`
	permanentlyDeleteMutation = `mutation PermanentlyDeleteSavedItems($data: PermanentlyDeleteSavedItemsInput!) {
  permanentlyDeleteSavedItems(data: $data) { success }
}`
	emptyTrashMutation       = `mutation EmptyTrash { emptyTrash { success count } }`
	createHighlightMutation  = `mutation CreateHighlight($data: CreateHighlightInput!) { createHighlight(data: $data) { id } }`
	deleteHighlightsMutation = `mutation DeleteHighlights($data: DeleteHighlightsInput!) { deleteHighlights(data: $data) { success } }`
)

type savedItemOut struct {
	ID              string
	Title           string
	Author          *string
	Status          string
	ReadAt          *string
	IsReadManual    bool
	ReadingProgress *float64
	Labels          []label
}

func TestLabelsAreCreatedUpdatedReorderedAndDeleted(t *testing.T) {
	e := newEnv(t, options{})
	var a, b struct{ CreateLabel label }
	e.do(createLabelMutation, map[string]any{"data": map[string]any{"name": "Read later", "color": "#112233"}}, &a)
	e.do(createLabelMutation, map[string]any{"data": map[string]any{"name": "Work", "color": "#445566"}}, &b)
	e.wantError(e.token, createLabelMutation, map[string]any{"data": map[string]any{"name": "work", "color": "#445566"}}, 200, "CONFLICT")
	e.wantError(e.token, createLabelMutation, map[string]any{"data": map[string]any{"name": "x", "color": "blue"}}, 200, "BAD_USER_INPUT")

	// Renaming onto another label's name: Inboxt's BAD_REQUEST "Label
	// already exists" (label.service.ts @ 45f4314).
	r := e.wantError(e.token, updateLabelMutation, map[string]any{"data": map[string]any{"id": a.CreateLabel.ID, "name": "WORK", "color": "#000000"}}, 200, "BAD_REQUEST")
	if r.Errors[0].Message != "Label already exists" || r.Errors[0].Extensions["status"] != float64(400) {
		t.Fatalf("rename onto Work: %+v", r.Errors[0])
	}
	var u struct{ UpdateLabel label }
	e.do(updateLabelMutation, map[string]any{"data": map[string]any{"id": a.CreateLabel.ID, "name": "Later", "color": "#000000"}}, &u)
	if u.UpdateLabel.Name != "Later" || u.UpdateLabel.Color != "#000000" {
		t.Fatalf("updateLabel = %+v", u.UpdateLabel)
	}
	var ro struct{ ReorderLabels []label }
	e.do(reorderLabelsMutation, map[string]any{"data": map[string]any{"ids": []string{b.CreateLabel.ID, a.CreateLabel.ID}}}, &ro)
	if len(ro.ReorderLabels) != 2 || ro.ReorderLabels[0].ID != b.CreateLabel.ID {
		t.Fatalf("reorderLabels = %+v", ro.ReorderLabels)
	}
	var ls struct{ Labels []label }
	e.do(labelsQuery, nil, &ls)
	if len(ls.Labels) != 2 || ls.Labels[0].Name != "Work" || ls.Labels[1].Name != "Later" {
		t.Fatalf("labels = %+v", ls.Labels)
	}
	e.doAs(e.session, deleteLabelMutation, map[string]any{"data": map[string]any{"id": a.CreateLabel.ID}}, nil)
	e.wantError(e.session, deleteLabelMutation, map[string]any{"data": map[string]any{"id": a.CreateLabel.ID}}, 200, "NOT_FOUND")
	var me struct{ Me struct{ LabelsCount float64 } }
	e.do(`query Me { me { id createdAt emailAddress isEmailVerified username pendingEmailAddress labelsCount inboundEmailAddressesCount } }`, nil, &me)
	if me.Me.LabelsCount != 1 {
		t.Fatalf("labelsCount = %v", me.Me.LabelsCount)
	}
}

// TestSetSavedItemLabelsReplacesAddsAndRemoves checks Inboxt's input
// semantics (saved-item.resolver.ts, saved-item.service.ts setManyLabels @
// 45f4314): ids wins over id, no ids does nothing, unknown items and labels
// are skipped, labelIds replaces (and then add/remove are ignored).
func TestSetSavedItemLabelsReplacesAddsAndRemoves(t *testing.T) {
	e := newEnv(t, options{})
	it1, it2 := e.saveArticle(e.member.ID, 1, nil), e.saveArticle(e.member.ID, 2, nil)
	var a, b struct{ CreateLabel label }
	e.do(createLabelMutation, map[string]any{"data": map[string]any{"name": "A", "color": "#111111"}}, &a)
	e.do(createLabelMutation, map[string]any{"data": map[string]any{"name": "B", "color": "#222222"}}, &b)
	A, B := a.CreateLabel.ID, b.CreateLabel.ID
	labelsOf := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, en := range e.allEntries(map[string]any{"first": 10}) {
			names := ""
			for _, l := range en.Labels {
				names += l.Name
			}
			out[en.ID] = names
		}
		return out
	}
	set := func(data map[string]any, want1, want2 string) {
		t.Helper()
		var out struct{ SetSavedItemLabels struct{ Success bool } }
		e.do(setLabelsMutation, map[string]any{"data": data}, &out)
		if !out.SetSavedItemLabels.Success {
			t.Fatalf("%v: success = false", data)
		}
		if got := labelsOf(); got[it1.ID] != want1 || got[it2.ID] != want2 {
			t.Fatalf("after %v: item 1 has %q, item 2 %q; want %q, %q", data, got[it1.ID], got[it2.ID], want1, want2)
		}
	}
	set(map[string]any{"ids": []string{it1.ID, it2.ID}, "labelIds": []string{A}}, "A", "A")
	set(map[string]any{"id": it1.ID, "addLabelIds": []string{B}, "removeLabelIds": []string{A}}, "B", "A")
	// ids wins over id.
	set(map[string]any{"id": it1.ID, "ids": []string{it2.ID}, "labelIds": []string{}}, "B", "")
	// labelIds replaces; addLabelIds is then ignored.
	set(map[string]any{"id": it2.ID, "labelIds": []string{A}, "addLabelIds": []string{B}}, "B", "A")
	// Unknown labels and unknown items are skipped.
	set(map[string]any{"ids": []string{"no-such-item", it1.ID}, "labelIds": []string{"999", A, B}}, "AB", "A")
	// No ids, or nothing to change: nothing happens.
	set(map[string]any{"labelIds": []string{}}, "AB", "A")
	set(map[string]any{"ids": []string{}, "labelIds": []string{}}, "AB", "A")
	set(map[string]any{"id": it2.ID}, "AB", "A")
	set(map[string]any{"id": it1.ID, "removeLabelIds": []string{A}}, "B", "A")
	// Labels show in entries, and label: finds them.
	got := e.allEntries(map[string]any{"first": 10, "q": "label:B"})
	if len(got) != 1 || got[0].ID != it1.ID || got[0].Labels[0].Name != "B" {
		t.Fatalf("label:B = %+v", got)
	}
}

// A label change names at most library.MaxBatchIDs labels in each of
// labelIds, addLabelIds and removeLabelIds (a member has at most
// library.MaxLabels), however many times it repeats them: longer lists are
// refused with BAD_USER_INPUT and change nothing, before the items are
// read, since each item of the change was compared with every id of them.
func TestSetSavedItemLabelsRefusesListsLongerThanTheBatch(t *testing.T) {
	e := newEnv(t, options{})
	it := e.saveArticle(e.member.ID, 1, nil)
	var a struct{ CreateLabel label }
	e.do(createLabelMutation, map[string]any{"data": map[string]any{"name": "A", "color": "#111111"}}, &a)
	A := a.CreateLabel.ID
	e.do(setLabelsMutation, map[string]any{"data": map[string]any{"id": it.ID, "labelIds": []string{A}}}, nil)
	tooMany := make([]string, library.MaxBatchIDs+1)
	for i := range tooMany {
		tooMany[i] = A
	}
	for _, field := range []string{"labelIds", "addLabelIds", "removeLabelIds"} {
		r := e.wantError(e.token, setLabelsMutation, map[string]any{"data": map[string]any{"id": it.ID, field: tooMany}}, 200, "BAD_USER_INPUT")
		if d := r.Errors[0].Detail(); !strings.Contains(d, "at most 500 labels") {
			t.Errorf("%s: detail %q does not name the limit", field, d)
		}
		got := e.allEntries(map[string]any{"first": 10})
		if len(got) != 1 || len(got[0].Labels) != 1 || got[0].Labels[0].ID != A {
			t.Fatalf("%s refused, yet the item's labels are %+v", field, got)
		}
	}
	// As many as the batch are taken.
	e.do(setLabelsMutation, map[string]any{"data": map[string]any{"id": it.ID, "removeLabelIds": tooMany[1:]}}, nil)
	if got := e.allEntries(map[string]any{"first": 10}); len(got[0].Labels) != 0 {
		t.Fatalf("after removing A, labels %+v", got[0].Labels)
	}
}

func TestStatusMovesItemsBetweenInboxArchiveAndTrash(t *testing.T) {
	e := newEnv(t, options{})
	it1, it2, it3 := e.saveArticle(e.member.ID, 1, nil), e.saveArticle(e.member.ID, 2, nil), e.saveArticle(e.member.ID, 3, nil)
	var out struct{ UpdateSavedItemsStatus []savedItemOut }
	e.do(updateStatusMutation, map[string]any{"data": map[string]any{"ids": []string{it1.ID}, "status": "ARCHIVED"}}, &out)
	if out.UpdateSavedItemsStatus[0].Status != "ARCHIVED" {
		t.Fatalf("status = %+v", out)
	}
	e.do(updateStatusMutation, map[string]any{"data": map[string]any{"ids": []string{it2.ID, it3.ID}, "status": "DELETED"}}, nil)
	if n := len(e.allEntries(map[string]any{"first": 10, "q": "in:archive"})); n != 1 {
		t.Fatalf("archive has %d", n)
	}
	// Only items in the trash can be deleted for good; nothing happens otherwise.
	e.wantError(e.session, permanentlyDeleteMutation, map[string]any{"data": map[string]any{"ids": []string{it2.ID, it1.ID}}}, 200, "BAD_USER_INPUT")
	e.doAs(e.session, permanentlyDeleteMutation, map[string]any{"data": map[string]any{"ids": []string{it2.ID}}}, nil)
	var et struct {
		EmptyTrash struct {
			Success bool
			Count   float64
		}
	}
	e.doAs(e.session, emptyTrashMutation, nil, &et)
	if !et.EmptyTrash.Success || et.EmptyTrash.Count != 1 {
		t.Fatalf("emptyTrash = %+v", et)
	}
	var one struct{ SavedItem *savedItemOut }
	e.do(savedItemQuery, map[string]any{"query": map[string]any{"id": it3.ID}}, &one)
	if one.SavedItem != nil {
		t.Fatal("an item deleted for good is still there")
	}
	e.wantError(e.token, updateStatusMutation, map[string]any{"data": map[string]any{"ids": []string{"12345"}, "status": "ACTIVE"}}, 200, "NOT_FOUND")
	e.wantError(e.token, updateStatusMutation, map[string]any{"data": map[string]any{"ids": []string{}, "status": "ACTIVE"}}, 200, "BAD_USER_INPUT")
}

func TestReadStatusAndReadingProgress(t *testing.T) {
	e := newEnv(t, options{})
	it := e.saveArticle(e.member.ID, 1, nil)
	var rs struct{ UpdateSavedItemsReadStatus []savedItemOut }
	e.do(readStatusMutation, map[string]any{"data": map[string]any{"ids": []string{it.ID}, "isRead": true}}, &rs)
	if r := rs.UpdateSavedItemsReadStatus[0]; r.ReadAt == nil || !r.IsReadManual {
		t.Fatalf("read = %+v", r)
	}
	e.do(readStatusMutation, map[string]any{"data": map[string]any{"ids": []string{it.ID}, "isRead": false}}, &rs)
	if r := rs.UpdateSavedItemsReadStatus[0]; r.ReadAt != nil {
		t.Fatalf("unread = %+v", r)
	}
	it2 := e.saveArticle(e.member.ID, 2, nil)
	var p struct{ UpdateReadingProgress savedItemOut }
	e.do(progressMutation, map[string]any{"data": map[string]any{"id": it2.ID, "progress": 100}}, &p)
	if p.UpdateReadingProgress.ReadingProgress == nil || *p.UpdateReadingProgress.ReadingProgress != 100 || p.UpdateReadingProgress.ReadAt == nil {
		t.Fatalf("progress = %+v", p.UpdateReadingProgress)
	}
	e.wantError(e.token, progressMutation, map[string]any{"data": map[string]any{"id": it2.ID, "progress": 101}}, 200, "BAD_USER_INPUT")
	var stats struct {
		Me struct {
			Stats struct {
				ReadCount, UnreadCount, ItemsReadCountWeek, WordsReadCount float64
			}
		}
	}
	e.do(`query GetUserStats { me { id stats { itemsReadCountAllTime itemsReadCountMonth itemsReadCountWeek estimatedReadingTimeCompleted wordsReadCount unreadCount readCount averageArticleLength averageTimeToFinish } } }`, nil, &stats)
	if s := stats.Me.Stats; s.ReadCount != 1 || s.UnreadCount != 1 || s.ItemsReadCountWeek != 1 || s.WordsReadCount != 20 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestUpdateSavedItemMetadataChangesOnlyGivenFields(t *testing.T) {
	e := newEnv(t, options{})
	it := e.saveArticle(e.member.ID, 1, nil)
	var out struct{ UpdateSavedItemMetadata savedItemOut }
	e.do(metadataMutation, map[string]any{"data": map[string]any{"id": it.ID, "author": "Grace"}}, &out)
	if out.UpdateSavedItemMetadata.Title != it.Title || *out.UpdateSavedItemMetadata.Author != "Grace" {
		t.Fatalf("metadata = %+v", out.UpdateSavedItemMetadata)
	}
	e.wantError(e.token, metadataMutation, map[string]any{"data": map[string]any{"id": it.ID, "title": ""}}, 200, "BAD_USER_INPUT")
}

func TestHighlightsAreCreatedListedAndDeleted(t *testing.T) {
	e := newEnv(t, options{})
	it := e.saveArticle(e.member.ID, 1, nil)
	seg := map[string]any{"xpath": "/p[1]", "beforeText": "", "afterText": " 1", "startOffset": 0, "endOffset": 4, "text": "Body"}
	var h struct{ CreateHighlight struct{ ID string } }
	e.do(createHighlightMutation, map[string]any{"data": map[string]any{"savedItemId": it.ID, "segments": []any{seg}}}, &h)
	var one struct {
		SavedItem struct {
			Highlights []struct {
				ID        string
				SavedItem struct{ ID string }
				Segments  []struct {
					Text        string
					StartOffset float64
					EndOffset   float64
				}
			}
		}
	}
	e.do(savedItemQuery, map[string]any{"query": map[string]any{"id": it.ID}}, &one)
	hs := one.SavedItem.Highlights
	if len(hs) != 1 || hs[0].ID != h.CreateHighlight.ID || hs[0].SavedItem.ID != it.ID || hs[0].Segments[0].Text != "Body" || hs[0].Segments[0].EndOffset != 4 {
		t.Fatalf("highlights = %+v", hs)
	}
	if got := e.allEntries(map[string]any{"first": 10, "q": "has:highlights"}); len(got) != 1 {
		t.Fatalf("has:highlights = %d", len(got))
	}
	e.wantError(e.token, createHighlightMutation, map[string]any{"data": map[string]any{"savedItemId": "424242", "segments": []any{seg}}}, 200, "NOT_FOUND")
	e.doAs(e.session, deleteHighlightsMutation, map[string]any{"data": map[string]any{"items": []any{map[string]any{"id": h.CreateHighlight.ID, "savedItemId": it.ID}}}}, nil)
	if got := e.allEntries(map[string]any{"first": 10, "q": "type:highlight"}); len(got) != 0 {
		t.Fatalf("%d highlights after delete", len(got))
	}
}

// Inboxt's web app sends the whole rest of the selection's text node as a
// segment's context (highlightsDOM.ts @45f4314): in a long paragraph that
// is more than the store keeps, and the highlight is made with the
// characters nearest the selection.
func TestHighlightInALongParagraphKeepsTheNearestContext(t *testing.T) {
	e := newEnv(t, options{})
	it := e.saveArticle(e.member.ID, 1, nil)
	before := strings.Repeat("a", 3000) + strings.Repeat("é", 1000)
	after := strings.Repeat("語", 1000) + strings.Repeat("z", 3000)
	seg := map[string]any{"xpath": "/p[1]::0", "beforeText": before, "afterText": after, "startOffset": 4000, "endOffset": 4004, "text": "Body"}
	e.do(createHighlightMutation, map[string]any{"data": map[string]any{"savedItemId": it.ID, "segments": []any{seg}}}, nil)
	var one struct {
		SavedItem struct {
			Highlights []struct {
				Segments []struct{ Text, BeforeText, AfterText string }
			}
		}
	}
	e.do(`query($query: GetSavedItemInput!) { savedItem(query: $query) { highlights { segments { text beforeText afterText } } } }`,
		map[string]any{"query": map[string]any{"id": it.ID}}, &one)
	hs := one.SavedItem.Highlights
	if len(hs) != 1 || len(hs[0].Segments) != 1 {
		t.Fatalf("highlights = %+v", hs)
	}
	sg := hs[0].Segments[0]
	if sg.Text != "Body" || sg.BeforeText != strings.Repeat("é", 1000) || sg.AfterText != strings.Repeat("語", 1000) {
		t.Fatalf("segment: text %q, %d characters before, %d after", sg.Text, len([]rune(sg.BeforeText)), len([]rune(sg.AfterText)))
	}
}

func TestSavedQueriesAreCreatedUpdatedReorderedAndDeleted(t *testing.T) {
	e := newEnv(t, options{})
	const create = `mutation CreateSavedQuery($data: CreateSavedQueryInput!) { createSavedQuery(data: $data) { id createdAt name query order } }`
	var a, b struct {
		CreateSavedQuery struct{ ID, Name, Query string }
	}
	e.do(create, map[string]any{"data": map[string]any{"name": "Unread work", "query": "in:inbox label:work"}}, &a)
	e.do(create, map[string]any{"data": map[string]any{"name": "Long reads", "query": "reading-time:20..*"}}, &b)
	e.wantError(e.token, create, map[string]any{"data": map[string]any{"name": "Bad", "query": "saved:yesterday"}}, 200, "BAD_USER_INPUT")
	e.do(`mutation UpdateSavedQuery($data: UpdateSavedQueryInput!) { updateSavedQuery(data: $data) { id name query } }`,
		map[string]any{"data": map[string]any{"id": a.CreateSavedQuery.ID, "name": "Work", "query": "label:work"}}, nil)
	e.do(`mutation ReorderSavedQueries($data: ReorderSavedQueriesInput!) { reorderSavedQueries(data: $data) { id } }`,
		map[string]any{"data": map[string]any{"ids": []string{b.CreateSavedQuery.ID}}}, nil)
	var qs struct {
		SavedQueries []struct{ ID, Name, Query string }
	}
	e.do(`query SavedQueries { savedQueries { id createdAt name query order } }`, nil, &qs)
	if len(qs.SavedQueries) != 2 || qs.SavedQueries[0].ID != b.CreateSavedQuery.ID || qs.SavedQueries[1].Name != "Work" {
		t.Fatalf("savedQueries = %+v", qs.SavedQueries)
	}
	e.doAs(e.session, `mutation DeleteSavedQuery($data: DeleteSavedQueryInput!) { deleteSavedQuery(data: $data) { success } }`,
		map[string]any{"data": map[string]any{"id": b.CreateSavedQuery.ID}}, nil)
	e.do(`query SavedQueries { savedQueries { id } }`, nil, &qs)
	if len(qs.SavedQueries) != 1 {
		t.Fatalf("savedQueries after delete = %+v", qs.SavedQueries)
	}
}

func TestSavedItemOfUnknownIdIsNull(t *testing.T) {
	e := newEnv(t, options{})
	other, _ := e.newMember("bob")
	bobs := e.saveArticle(other.ID, 1, nil)
	for _, id := range []string{"1", bobs.ID} {
		var one struct{ SavedItem *savedItemOut }
		e.do(savedItemQuery, map[string]any{"query": map[string]any{"id": id}}, &one)
		if one.SavedItem != nil {
			t.Fatalf("savedItem(%s) = %+v", id, one.SavedItem)
		}
	}
}

// Labels are cached for a request; a mutation changing a label must not
// leave later fields of the same request showing the old name.
func TestLabelChangeIsSeenLaterInTheSameRequest(t *testing.T) {
	e := newEnv(t, options{})
	it := e.saveArticle(e.member.ID, 1, nil)
	l, err := library.Of(e.store).CreateLabel(t.Context(), e.member.ID, "old", "#112233")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		A  struct{ Success bool }
		A2 struct{ Labels []label }
		B  label
		C  struct{ Labels []label }
		D  []label
		E  struct{ Labels []label }
	}
	e.do(`mutation($i: String!, $l: String!) {
  a: setSavedItemLabels(data: {id: $i, labelIds: [$l]}) { success }
  a2: updateReadingProgress(data: {id: $i, progress: 5}) { labels { name } }
  b: updateLabel(data: {id: $l, name: "new", color: "#445566"}) { name }
  c: updateSavedItemMetadata(data: {id: $i, title: "T"}) { labels { name color } }
  d: reorderLabels(data: {ids: [$l]}) { name }
  e: updateReadingProgress(data: {id: $i, progress: 10}) { labels { name } }
}`, map[string]any{"i": it.ID, "l": l.ID}, &got)
	if !got.A.Success || len(got.A2.Labels) != 1 || got.A2.Labels[0].Name != "old" {
		t.Fatalf("a = %+v, a2 = %+v", got.A, got.A2)
	}
	if len(got.C.Labels) != 1 || got.C.Labels[0].Name != "new" || got.C.Labels[0].Color != "#445566" {
		t.Fatalf("after the rename, c shows labels %+v", got.C.Labels)
	}
	var deleted struct{ A, C struct{ Labels []label } }
	e.doAs(e.session, `mutation($i: String!, $l: String!) {
  a: updateSavedItemMetadata(data: {id: $i, title: "U"}) { labels { name } }
  b: deleteLabel(data: {id: $l}) { success }
  c: updateSavedItemMetadata(data: {id: $i, title: "V"}) { labels { name } }
}`, map[string]any{"i": it.ID, "l": l.ID}, &deleted)
	if len(deleted.A.Labels) != 1 || len(deleted.C.Labels) != 0 {
		t.Fatalf("before deleteLabel, a shows %+v; after it, c shows %+v", deleted.A.Labels, deleted.C.Labels)
	}
}

// The refusals the app's forms show under a field carry the path the form
// reads (Form.tsx setErrors, parse-error.ts: extensions.response.message[]
// .path, Inboxt/inboxt@45f4314): labels (name, color), saved queries
// (name), API tokens (name), a link to add (url). Nothing is kept.
func TestRefusalsNameTheFieldTheAppsFormsRead(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	for _, c := range []struct{ query, path string }{
		{`mutation { createLabel(data: {name: "` + strings.Repeat("n", 200) + `", color: "#ff8800"}) { id } }`, "name"},
		{`mutation { createLabel(data: {name: "Reading", color: "red"}) { id } }`, "color"},
		{`mutation { createSavedQuery(data: {name: " ", query: "is:unread"}) { id } }`, "name"},
		{`mutation { createApiToken(data: {name: " ", expiry: NEVER}) { secret } }`, "name"},
		{`mutation { addArticleFromUrl(data: {url: "ftp://example.org/x"}) { success } }`, "url"},
		{`mutation { addArticleFromUrl(data: {url: "http://127.0.0.1/private"}) { success } }`, "url"},
	} {
		r := e.wantError(e.session, c.query, nil, 200, "BAD_USER_INPUT")
		resp, _ := r.Errors[0].Extensions["response"].(map[string]any)
		list, _ := resp["message"].([]any)
		if r.Errors[0].Message != "Invalid input provided" || len(list) != 1 || list[0].(map[string]any)["path"] != c.path {
			t.Errorf("%.80s: %+v", c.query, r.Errors)
		}
	}
	var after struct {
		Labels       []struct{ ID string }
		SavedQueries []struct{ ID string }
		APITokens    []struct{ ID string } `json:"apiTokens"`
	}
	e.doAs(e.session, `{ labels { id } savedQueries { id } apiTokens { id } }`, nil, &after)
	if len(after.Labels) != 0 || len(after.SavedQueries) != 0 || len(after.APITokens) != 1 {
		t.Errorf("after the refusals: %+v", after)
	}
	if got := e.allEntries(map[string]any{"first": 10}); len(got) != 0 {
		t.Errorf("%d items after the refused links", len(got))
	}
}

// A mutation of several records that one of them refuses (an id of another
// member's, an item not in the trash, an unknown label) answers its error
// and changes none of them: the items, highlights and labels of both
// members read back as before.
func TestRefusedBatchMutationsChangeNothing(t *testing.T) {
	e := newEnv(t, options{})
	bob, _ := e.newMember("bob")
	lib := library.Of(e.store)
	a := e.saveArticle(e.member.ID, 1, nil)
	b := e.saveArticle(e.member.ID, 2, nil)
	x := e.saveArticle(bob.ID, 3, nil)
	if _, err := lib.SetItemsStatus(t.Context(), e.member.ID, []string{b.ID}, library.StatusDeleted); err != nil {
		t.Fatal(err)
	}
	seg := []library.HighlightSegment{{XPath: "/p[1]", Text: "Body", StartOffset: 0, EndOffset: 4}}
	h, err := lib.CreateHighlight(t.Context(), e.member.ID, a.ID, seg, "")
	if err != nil {
		t.Fatal(err)
	}
	hx, err := lib.CreateHighlight(t.Context(), bob.ID, x.ID, seg, "")
	if err != nil {
		t.Fatal(err)
	}
	l1, err := lib.CreateLabel(t.Context(), e.member.ID, "One", "#111111")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lib.CreateLabel(t.Context(), e.member.ID, "Two", "#222222"); err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		var out []any
		for _, m := range []struct{ id, item string }{{e.member.ID, ""}, {bob.ID, x.ID}} {
			ids := []string{a.ID, b.ID}
			if m.item != "" {
				ids = []string{m.item}
			}
			items, err := lib.SavedItems(t.Context(), m.id, ids)
			if err != nil {
				t.Fatal(err)
			}
			labels, err := lib.Labels(t.Context(), m.id)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, items, labels)
			for _, id := range ids {
				hls, err := lib.ItemHighlights(t.Context(), m.id, id)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, hls)
			}
		}
		j, _ := json.Marshal(out)
		return string(j)
	}
	before := snapshot()
	for _, c := range []struct {
		name, query string
		data        map[string]any
		code        string
	}{
		{"updateSavedItemsStatus", updateStatusMutation, map[string]any{"ids": []string{a.ID, x.ID}, "status": "ARCHIVED"}, "NOT_FOUND"},
		{"updateSavedItemStatus", `mutation U($data: UpdateSavedItemStatusInput!) { updateSavedItemStatus(data: $data) { success } }`,
			map[string]any{"ids": []string{a.ID, x.ID}, "status": "ARCHIVED"}, "NOT_FOUND"},
		{"updateSavedItemsReadStatus", readStatusMutation, map[string]any{"ids": []string{a.ID, x.ID}, "isRead": true}, "NOT_FOUND"},
		{"permanentlyDeleteSavedItems", permanentlyDeleteMutation, map[string]any{"ids": []string{b.ID, a.ID}}, "BAD_USER_INPUT"},
		{"deleteHighlights", deleteHighlightsMutation, map[string]any{"items": []any{map[string]any{"id": h.ID}, map[string]any{"id": hx.ID}}}, "NOT_FOUND"},
		{"reorderLabels", reorderLabelsMutation, map[string]any{"ids": []string{l1.ID, "424242"}}, "NOT_FOUND"},
	} {
		r := e.post(e.session, c.query, map[string]any{"data": c.data})
		if len(r.Errors) == 0 || r.Errors[0].Code() != c.code {
			t.Fatalf("%s: errors %+v, want %s", c.name, r.Errors, c.code)
		}
		if after := snapshot(); after != before {
			t.Fatalf("%s changed the store:\nbefore %s\nafter  %s", c.name, before, after)
		}
	}
}
