package graphql_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// saveUrl as @omnivore-app/api 1.0.4's items.saveByUrl sends it
// (src/graphql.ts saveByURLMutation, src/client.ts, which passes its
// parameters, state, savedAt, publishedAt and folder among them, as the
// input; omnivore-app/omnivore-api@ce99d23). Omnivore's web app sends state
// and labels the same way (packages/web/pages/api/save.ts,
// omnivore-app/omnivore@322ce62); its share sheets send the URL alone.
const omnivoreSaveByURL = `mutation SaveByURL($input: SaveUrlInput!) {
    saveUrl(input: $input) {
      __typename
      ... on SaveSuccess {
        clientRequestId
      }
      ... on SaveError {
        errorCodes
      }
    }
  }`

// omnivoreSearchSaved is search with the fields these tests read of where
// an item is and when it was saved.
const omnivoreSearchSaved = `query($query: String) {
  search(first: 100, query: $query) {
    ... on SearchSuccess { edges { node { id title isArchived state savedAt } } }
    ... on SearchError { errorCodes }
  }
}`

type omnivoreSaved struct {
	ID         string `json:"id"`
	Title      string `json:"title"`
	IsArchived bool   `json:"isArchived"`
	State      string `json:"state"`
	SavedAt    string `json:"savedAt"`
}

// omnivoreSave sends saveUrl with input (source and clientRequestId added
// as the npm client adds them) and returns the answer's clientRequestId,
// failing unless it is SaveSuccess.
func (e *env) omnivoreSave(input map[string]any) string {
	e.t.Helper()
	r := e.omnivoreSaveAnswer(input)
	var out struct {
		SaveURL struct {
			Typename        string `json:"__typename"`
			ClientRequestID string `json:"clientRequestId"`
		} `json:"saveUrl"`
	}
	if len(r.Errors) > 0 || json.Unmarshal(r.Data, &out) != nil || out.SaveURL.Typename != "SaveSuccess" {
		e.t.Fatalf("saveUrl %v: errors %+v, data %s", input, r.Errors, r.Data)
	}
	return out.SaveURL.ClientRequestID
}

func (e *env) omnivoreSaveAnswer(input map[string]any) *response {
	e.t.Helper()
	in := map[string]any{"source": "API-Client", "clientRequestId": ""}
	for k, v := range input {
		in[k] = v
	}
	_, body := e.postBare("/api/graphql", e.token, map[string]any{"query": omnivoreSaveByURL, "variables": map[string]any{"input": in}})
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		e.t.Fatalf("saveUrl: %s", body)
	}
	return &r
}

// omnivoreSaved lists what search answers for q, in its order.
func (e *env) omnivoreSaved(q string) []omnivoreSaved {
	e.t.Helper()
	_, body := e.postBare("/api/graphql", e.token, map[string]any{"query": omnivoreSearchSaved, "variables": map[string]any{"query": q}})
	var r struct {
		Data struct {
			Search struct {
				Edges []struct {
					Node omnivoreSaved `json:"node"`
				} `json:"edges"`
			} `json:"search"`
		} `json:"data"`
		Errors []gqlError `json:"errors"`
	}
	if err := json.Unmarshal(body, &r); err != nil || len(r.Errors) > 0 {
		e.t.Fatalf("search %q: %s", q, body)
	}
	out := make([]omnivoreSaved, len(r.Data.Search.Edges))
	for i, ed := range r.Data.Search.Edges {
		out[i] = ed.Node
	}
	return out
}

func savedIDs(items []omnivoreSaved) []string {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	slices.Sort(ids)
	return ids
}

func sortedIDs(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// saveUrl's state puts the item where Omnivore put it once fetched
// (save_page.ts parsedContentToLibraryItem: the state given, else
// SUCCEEDED): ARCHIVED in the archive, DELETED in the trash, anything else
// in the inbox; and it stays there when the fetch ends. A URL saved before
// moves where the new save says, without a state back to the inbox. The
// answer's clientRequestId is the item's id, as Omnivore's was.
func TestOmnivoreSaveURLPutsTheItemWhereStateSays(t *testing.T) {
	e := newEnv(t, options{Fetcher: localFetcher()})
	site := articleSite(t, "Baking Bread")
	url := func(n string) string { return site.URL + "/bread?n=" + n }
	archived := e.omnivoreSave(map[string]any{"url": url("1"), "state": "ARCHIVED"})
	trashed := e.omnivoreSave(map[string]any{"url": url("2"), "state": "DELETED"})
	plain := e.omnivoreSave(map[string]any{"url": url("3")})
	failed := e.omnivoreSave(map[string]any{"url": url("4"), "state": "FAILED", "folder": "following"})
	// From the save on, whether or not its fetch has ended, the item is
	// where it goes.
	if got := savedIDs(e.omnivoreSaved("in:archive")); !slices.Equal(got, []string{archived}) {
		t.Fatalf("archive while fetching = %v, want [%s]", got, archived)
	}
	entries := e.waitFetched()
	if len(entries) != 4 {
		t.Fatalf("%d items, want 4: %+v", len(entries), entries)
	}
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"in:archive", []string{archived}},
		{"in:inbox", sortedIDs(plain, failed)},
		{"in:trash", []string{trashed}},
		{"in:all", sortedIDs(archived, plain, failed)},
		{"", sortedIDs(archived, plain, failed)},
	} {
		if got := savedIDs(e.omnivoreSaved(c.q)); !slices.Equal(got, c.want) {
			t.Errorf("search %q = %v, want %v", c.q, got, c.want)
		}
	}
	arch := e.omnivoreSaved("in:archive")[0]
	if arch.Title != "Baking Bread" || !arch.IsArchived || arch.State != "ARCHIVED" {
		t.Fatalf("the archived item once fetched: %+v", arch)
	}

	// Saved again: without a state into the inbox, with ARCHIVED into the
	// archive; the same items, at the time of the save.
	before := arch.SavedAt
	if id := e.omnivoreSave(map[string]any{"url": url("1")}); id != archived {
		t.Fatalf("saved again: id %s, want %s", id, archived)
	}
	if id := e.omnivoreSave(map[string]any{"url": url("3"), "state": "ARCHIVED"}); id != plain {
		t.Fatalf("saved again: id %s, want %s", id, plain)
	}
	if id := e.omnivoreSave(map[string]any{"url": url("2"), "state": "SUCCEEDED"}); id != trashed {
		t.Fatalf("saved again from the trash: id %s, want %s", id, trashed)
	}
	e.waitFetched()
	if got := savedIDs(e.omnivoreSaved("in:archive")); !slices.Equal(got, []string{plain}) {
		t.Fatalf("archive after saving again = %v, want [%s]", got, plain)
	}
	inbox := e.omnivoreSaved("in:inbox")
	if got := savedIDs(inbox); !slices.Equal(got, sortedIDs(archived, trashed, failed)) {
		t.Fatalf("inbox after saving again = %v", got)
	}
	for _, it := range inbox {
		if it.ID == archived && it.SavedAt <= before {
			t.Fatalf("saved again without savedAt: savedAt %s, was %s (Omnivore saved it at the time of the save)", it.SavedAt, before)
		}
	}
}

// saveUrl's savedAt is the item's saved date, as Omnivore kept it (the
// placeholder's savedAt in create_page_save_request.ts, then the fetched
// page's in save_page.ts): search answers it and orders by it, also for a
// URL saved before, whose date moves to the one given.
func TestOmnivoreSaveURLKeepsSavedAt(t *testing.T) {
	e := newEnv(t, options{Fetcher: localFetcher()})
	site := articleSite(t, "Baking Bread")
	recent := e.saveArticle(e.member.ID, 1, nil)
	old := e.omnivoreSave(map[string]any{"url": site.URL + "/bread?n=1", "savedAt": "2020-01-02T03:04:05.678+01:00", "publishedAt": "2019-05-01"})
	day := e.omnivoreSave(map[string]any{"url": site.URL + "/bread?n=2", "savedAt": "2021-06-01", "state": "ARCHIVED"})
	e.waitFetched()
	all := e.omnivoreSaved("in:all sort:saved-asc")
	if len(all) != 3 || all[0].ID != old || all[1].ID != day || all[2].ID != recent.ID {
		t.Fatalf("oldest first = %+v, want %s, %s, %s", all, old, day, recent.ID)
	}
	if all[0].SavedAt != "2020-01-02T02:04:05.678Z" || all[1].SavedAt != "2021-06-01T00:00:00.000Z" {
		t.Fatalf("savedAt = %s, %s", all[0].SavedAt, all[1].SavedAt)
	}
	if newest := e.omnivoreSaved("in:all"); newest[0].ID != recent.ID || newest[2].ID != old {
		t.Fatalf("default order (newest first) = %+v", newest)
	}
	// Saved again with another date: the same item, moved to it.
	if id := e.omnivoreSave(map[string]any{"url": site.URL + "/bread?n=1", "savedAt": "2022-03-04T05:06:07Z"}); id != old {
		t.Fatalf("saved again: id %s, want %s", id, old)
	}
	e.waitFetched()
	all = e.omnivoreSaved("in:all sort:saved-asc")
	if all[0].ID != day || all[1].ID != old || all[1].SavedAt != "2022-03-04T05:06:07.000Z" {
		t.Fatalf("after saving again at 2022-03-04: %+v", all)
	}
}

// A savedAt Hearth does not take is refused before anything is saved: not a
// date (the Date scalar), or later than now by more than
// library.MaxSavedAtAhead (Omnivore kept such a date; Hearth refuses it
// rather than list the item above everything saved until then), or
// earlier than library.EarliestSavedAt. The item
// of that URL saved before keeps where it is and its date, and the labels
// the save names are not made. A date a little ahead (a fast clock) saves
// at now.
func TestOmnivoreSaveURLRefusesASavedAtItCannotKeep(t *testing.T) {
	e := newEnv(t, options{Fetcher: localFetcher()})
	site := articleSite(t, "Baking Bread")
	url := site.URL + "/bread"
	id := e.omnivoreSave(map[string]any{"url": url, "state": "ARCHIVED", "savedAt": "2020-01-02T03:04:05Z"})
	e.waitFetched()
	want := e.omnivoreSaved("in:all")
	for _, c := range []struct {
		name, savedAt, code, says string
	}{
		{"not a date", "yesterday", "BAD_USER_INPUT", "Date"},
		{"a day ahead", time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339), "BAD_USER_INPUT", "savedAt"},
		{"a year ahead, as a date", time.Now().AddDate(1, 0, 0).Format(time.DateOnly), "BAD_USER_INPUT", "future"},
		{"before 1678, which the library's order cannot hold", "1500-06-01", "BAD_USER_INPUT", "earlier than 1678"},
		{"year one, Go's zero time", "0001-01-01T00:00:00Z", "BAD_USER_INPUT", "savedAt"},
	} {
		for _, u := range []string{url, site.URL + "/bread?n=new"} {
			r := e.omnivoreSaveAnswer(map[string]any{"url": u, "savedAt": c.savedAt, "labels": []map[string]any{{"name": "Fresh"}}})
			if len(r.Errors) == 0 || r.Errors[0].Code() != c.code || !strings.Contains(r.Errors[0].Message, c.says) {
				t.Fatalf("%s (%s): errors %+v, data %s; want %s saying %q", c.name, u, r.Errors, r.Data, c.code, c.says)
			}
		}
		if got := e.omnivoreSaved("in:all"); !slices.Equal(got, want) {
			t.Fatalf("%s: items %+v, want them unchanged: %+v", c.name, got, want)
		}
		var labels struct{ Labels []struct{ Name string } }
		e.do(labelsQuery, nil, &labels)
		if len(labels.Labels) != 0 {
			t.Fatalf("%s: labels %+v made by a refused save", c.name, labels.Labels)
		}
		if pending, err := library.Of(e.store).PendingFetches(t.Context(), 10, false, true); err != nil || len(pending) != 0 {
			t.Fatalf("%s: fetches queued by a refused save: %+v %v", c.name, pending, err)
		}
	}
	ahead := time.Now().Add(time.Minute).UTC()
	if got := e.omnivoreSave(map[string]any{"url": url, "savedAt": ahead.Format(time.RFC3339Nano)}); got != id {
		t.Fatalf("a minute ahead: id %s, want %s", got, id)
	}
	answered := time.Now().UTC()
	e.waitFetched()
	it := e.omnivoreSaved("in:inbox")[0]
	if saved, err := time.Parse(time.RFC3339Nano, it.SavedAt); err != nil || saved.After(answered) {
		t.Fatalf("a minute ahead: savedAt %s, after the answer came (%s)", it.SavedAt, answered.Format(time.RFC3339Nano))
	}
}
