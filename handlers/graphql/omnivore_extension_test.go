package graphql_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// The operations of Omnivore's self-hosted browser extension, copied as it
// sends them (web-extensions/extension-v3/src/scripts/omnivore-api.ts,
// omnivore-app/omnivore@322ce62: savePageRequest, archiveLibraryItem,
// updatePageTitle, setLabels), each with the API key alone as its
// Authorization header.
const (
	extSavePage = `mutation SavePage ($input: SavePageInput!) {
      savePage(input:$input){
        ... on SaveSuccess {
          url
          clientRequestId
        }
        ... on SaveError {
          errorCodes
        }
      }
    }`
	extSetLinkArchived = `mutation SetLinkArchived($input: ArchiveLinkInput!) {
      setLinkArchived(input: $input) {
        ... on ArchiveLinkSuccess {
          linkId
          message
        }
        ... on ArchiveLinkError {
          message
          errorCodes
        }
      }
    }
  `
	extUpdatePage = `mutation UpdatePage($input: UpdatePageInput!) {
      updatePage(input: $input) {
        ... on UpdatePageSuccess {
          updatedPage {
            id
          }
        }
        ... on UpdatePageError {
          errorCodes
        }
      }
    }
  `
	extSetLabels = `mutation SetLabels($input: SetLabelsInput!) {
      setLabels(input: $input) {
        ... on SetLabelsSuccess {
          labels {
            id
            name
            color
          }
        }
        ... on SetLabelsError {
          errorCodes
        }
      }
    }
  `
)

// extPage is a page as the extension sends it: document.documentElement's
// outerHTML, scripts and navigation included.
var extPage = `<html lang="en"><head><title>Tab title | Example</title><script>var tracking = 1;</script></head>
<body><nav>Home | About | Contact</nav><article><h1>Slow bread</h1><p>Sourdough needs patience. ` +
	`The starter wakes slowly and the dough rises overnight in a cool kitchen.</p><p>` + extWords + `</p></article>
<footer>Copyright Example</footer></body></html>`

var extWords = strings.Repeat("Flour water salt and time make bread. ", 40)

// extAnswer is what the extension reads of an answer: data (without it
// its request fails and its toolbar waits), the root field's errorCodes
// and the fields each operation reads.
type extAnswer struct {
	Status int
	Data   map[string]struct {
		ClientRequestID string   `json:"clientRequestId"`
		URL             string   `json:"url"`
		ErrorCodes      []string `json:"errorCodes"`
		Message         *string  `json:"message"`
		LinkID          string   `json:"linkId"`
		UpdatedPage     *struct {
			ID string `json:"id"`
		} `json:"updatedPage"`
		Labels []struct {
			ID    string `json:"id"`
			Name  string `json:"name"`
			Color string `json:"color"`
		} `json:"labels"`
	} `json:"data"`
	Errors []gqlError `json:"errors"`
}

// ext sends query with input as the extension does (the key alone, or no
// Authorization header when auth is "") and returns what it reads of the
// answer's root field.
func (e *env) ext(auth, query string, input map[string]any) extAnswer {
	e.t.Helper()
	resp, body := e.postBare("/api/graphql", auth, map[string]any{"query": query, "variables": map[string]any{"input": input}})
	var a extAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		e.t.Fatalf("answer: %s", body)
	}
	a.Status = resp.StatusCode
	if a.Data == nil || len(a.Errors) > 0 {
		e.t.Fatalf("the extension reads data only: %d %s", resp.StatusCode, body)
	}
	return a
}

func (e *env) extSave(input map[string]any) extAnswer {
	e.t.Helper()
	in := map[string]any{"source": "extension", "clientRequestId": "4bd7b2a6-5a0e-4b43-9d8e-1f3f4a1f2c11", "title": "Tab title | Example", "originalContent": extPage}
	for k, v := range input {
		in[k] = v
	}
	return e.ext(e.token, extSavePage, in)
}

func TestOmnivoreExtensionSavePageSavesThePageItSends(t *testing.T) {
	e := newEnv(t, options{})
	a := e.extSave(map[string]any{"url": "https://example.com/bread"}).Data["savePage"]
	if len(a.ErrorCodes) > 0 || a.ClientRequestID == "" || a.URL != "https://example.com/bread" {
		t.Fatalf("savePage = %+v", a)
	}
	// The extension names the item by clientRequestId from then on: it is
	// the saved item's id, in the inbox, with the tab's title and the
	// page's readable text, without the page's script and navigation.
	inbox := e.omnivoreSaved("in:inbox")
	if len(inbox) != 1 || inbox[0].ID != a.ClientRequestID || inbox[0].Title != "Tab title | Example" || inbox[0].IsArchived {
		t.Fatalf("inbox = %+v, saved %s", inbox, a.ClientRequestID)
	}
	html := contentHTML(t, e, a.ClientRequestID)
	if !strings.Contains(html, "Sourdough needs patience") || strings.Contains(html, "tracking") || strings.Contains(html, "Home | About") {
		t.Fatalf("content = %s", html)
	}
	// No page was fetched for it: nothing is pending.
	if it, err := library.Of(e.store).SavedItem(t.Context(), e.member.ID, a.ClientRequestID); err != nil || it.WordCount < 200 {
		t.Fatalf("item = %+v, %v", it, err)
	}

	// Saved again (the button pressed again on the same page, archived
	// meanwhile): the same item, back in the inbox.
	e.ext(e.token, extSetLinkArchived, map[string]any{"linkId": a.ClientRequestID, "archived": true})
	again := e.extSave(map[string]any{"url": "https://example.com/bread", "clientRequestId": "another"}).Data["savePage"]
	if again.ClientRequestID != a.ClientRequestID {
		t.Fatalf("saved again as %s, first %s", again.ClientRequestID, a.ClientRequestID)
	}
	if inbox := e.omnivoreSaved("in:inbox"); len(inbox) != 1 || inbox[0].ID != a.ClientRequestID {
		t.Fatalf("inbox after saving again = %+v", inbox)
	}
}

func TestOmnivoreExtensionSavePageWithoutTitleTakesThePagesOwn(t *testing.T) {
	e := newEnv(t, options{})
	a := e.extSave(map[string]any{"url": "https://example.com/bread", "title": nil}).Data["savePage"]
	if got := e.omnivoreSaved("in:inbox"); len(got) != 1 || got[0].ID != a.ClientRequestID || !strings.Contains(got[0].Title, "Tab title") {
		t.Fatalf("saved = %+v", got)
	}
}

func TestOmnivoreExtensionToolbar(t *testing.T) {
	e := newEnv(t, options{})
	id := e.extSave(map[string]any{"url": "https://example.com/bread"}).Data["savePage"].ClientRequestID

	// Edit title.
	if a := e.ext(e.token, extUpdatePage, map[string]any{"pageId": id, "title": "My bread notes"}).Data["updatePage"]; a.UpdatedPage == nil || a.UpdatedPage.ID != id {
		t.Fatalf("updatePage = %+v", a)
	}
	if got := e.omnivoreSaved("in:inbox"); len(got) != 1 || got[0].Title != "My bread notes" {
		t.Fatalf("after updatePage: %+v", got)
	}
	for _, in := range []map[string]any{{"pageId": "nope", "title": "x"}, {"pageId": id, "title": "  "}} {
		if a := e.ext(e.token, extUpdatePage, in).Data["updatePage"]; len(a.ErrorCodes) != 1 || a.UpdatedPage != nil {
			t.Errorf("updatePage %v = %+v", in, a)
		}
	}
	if got := e.omnivoreSaved("in:inbox"); got[0].Title != "My bread notes" {
		t.Fatalf("a refused updatePage changed the title: %+v", got)
	}

	// Labels, by the ids the extension has.
	lib := library.Of(e.store)
	bread, _ := lib.CreateLabel(t.Context(), e.member.ID, "Bread", "#aa0000")
	later, _ := lib.CreateLabel(t.Context(), e.member.ID, "Later", "#00aa00")
	a := e.ext(e.token, extSetLabels, map[string]any{"pageId": id, "labelIds": []string{bread.ID, later.ID}}).Data["setLabels"]
	if len(a.ErrorCodes) > 0 || len(a.Labels) != 2 || a.Labels[0].Name != "Bread" || a.Labels[0].Color != "#aa0000" {
		t.Fatalf("setLabels = %+v", a)
	}
	for _, q := range []string{"label:Bread", "label:Later"} {
		if got := e.omnivoreSaved(q); len(got) != 1 || got[0].ID != id {
			t.Fatalf("%s: %+v", q, got)
		}
	}
	// An unknown label or item: NOT_FOUND, nothing changed.
	for _, in := range []map[string]any{{"pageId": id, "labelIds": []string{bread.ID, "nope"}}, {"pageId": "nope", "labelIds": []string{bread.ID}}} {
		if a := e.ext(e.token, extSetLabels, in).Data["setLabels"]; len(a.ErrorCodes) != 1 || a.ErrorCodes[0] != "NOT_FOUND" {
			t.Errorf("setLabels %v = %+v", in, a)
		}
	}
	// Labels by name the library refuses (a colour, a name too long) or
	// too many of them: BAD_REQUEST in setLabels' own answer, nothing
	// changed, no label made.
	var many []map[string]any
	for i := range library.MaxBatchIDs + 1 {
		many = append(many, map[string]any{"name": fmt.Sprintf("l%d", i)})
	}
	for name, labels := range map[string]any{
		"a bad colour": []map[string]any{{"name": "Rye", "color": "nope"}},
		"a long name":  []map[string]any{{"name": strings.Repeat("n", 500)}},
		"too many":     many,
	} {
		if a := e.ext(e.token, extSetLabels, map[string]any{"pageId": id, "labels": labels}).Data["setLabels"]; len(a.ErrorCodes) != 1 || a.ErrorCodes[0] != "BAD_REQUEST" {
			t.Errorf("setLabels with %s = %+v, want BAD_REQUEST", name, a)
		}
	}
	if got := e.omnivoreSaved("label:Later"); len(got) != 1 {
		t.Fatalf("a refused setLabels changed the labels: %+v", got)
	}
	if ls, err := library.Of(e.store).Labels(t.Context(), e.member.ID); err != nil || len(ls) != 2 {
		t.Fatalf("labels after refused setLabels: %d, %v; want the two there were", len(ls), err)
	}
	// Every label unticked: none left.
	if a := e.ext(e.token, extSetLabels, map[string]any{"pageId": id, "labelIds": []string{}}).Data["setLabels"]; len(a.ErrorCodes) > 0 || a.Labels == nil || len(a.Labels) != 0 {
		t.Fatalf("setLabels [] = %+v", a)
	}
	if got := e.omnivoreSaved("no:labels"); len(got) != 1 {
		t.Fatalf("no:labels = %+v", got)
	}

	// Archive.
	a = e.ext(e.token, extSetLinkArchived, map[string]any{"linkId": id, "archived": true}).Data["setLinkArchived"]
	if len(a.ErrorCodes) > 0 || a.LinkID != id || a.Message == nil || *a.Message != "link_archived" {
		t.Fatalf("setLinkArchived = %+v", a)
	}
	if got := e.omnivoreSaved("in:archive"); len(got) != 1 || got[0].ID != id || !got[0].IsArchived {
		t.Fatalf("in:archive = %+v", got)
	}
	if a := e.ext(e.token, extSetLinkArchived, map[string]any{"linkId": "nope", "archived": true}).Data["setLinkArchived"]; len(a.ErrorCodes) != 1 || a.ErrorCodes[0] != "BAD_REQUEST" || a.Message == nil {
		t.Fatalf("setLinkArchived of no item = %+v", a)
	}
	// Unarchive (Omnivore's other clients): back to the inbox.
	e.ext(e.token, extSetLinkArchived, map[string]any{"linkId": id, "archived": false})
	if got := e.omnivoreSaved("in:inbox"); len(got) != 1 || got[0].ID != id {
		t.Fatalf("in:inbox after unarchiving = %+v", got)
	}
}

func TestOmnivoreExtensionSavePageRefusalsChangeNothing(t *testing.T) {
	// A body limit (max_body_size) raised past the page's own limit (a
	// fetched page's, 5 MiB), which is then what refuses it.
	e := newEnv(t, options{MaxBodyBytes: 8 << 20})
	big := "<html><body><article><p>" + strings.Repeat("word ", (5<<20)/5+10) + "</p></article></body></html>"
	// The extension's query, asking also for the message it does not read.
	withMessage := strings.Replace(extSavePage, "errorCodes", "errorCodes message", 1)
	for name, in := range map[string]map[string]any{
		"larger than a fetched page": {"url": "https://example.com/big", "originalContent": big},
		"empty":                      {"url": "https://example.com/empty", "originalContent": "  "},
		"not a URL":                  {"url": "notaurl"},
		"saved in the future":        {"url": "https://example.com/later", "savedAt": "2999-01-01T00:00:00.000Z"},
		"nothing readable":           {"url": "https://example.com/blank", "originalContent": "<html><body></body></html>", "labels": []map[string]any{{"name": "New label"}}},
	} {
		in["source"], in["clientRequestId"] = "extension", "x"
		if in["originalContent"] == nil {
			in["originalContent"] = extPage
		}
		a := e.ext(e.token, withMessage, in).Data["savePage"]
		if len(a.ErrorCodes) != 1 || a.ErrorCodes[0] != "UNKNOWN" || a.Message == nil || *a.Message == "" || a.ClientRequestID != "" {
			t.Errorf("%s: savePage = %+v", name, a)
		} else {
			t.Logf("%s: %s", name, *a.Message)
		}
	}
	if got := e.omnivoreSaved("in:all"); len(got) != 0 {
		t.Fatalf("refused saves saved %+v", got)
	}
	if ls, _ := library.Of(e.store).Labels(t.Context(), e.member.ID); len(ls) != 0 {
		t.Fatalf("a refused save made labels %+v", ls)
	}
}

func TestOmnivoreExtensionNotLoggedIn(t *testing.T) {
	e := newEnv(t, options{})
	// No key, or a key Hearth does not know (revoked, mistyped): each
	// operation answers UNAUTHORIZED in data, which the extension shows
	// as "You are not logged in".
	unknown := e.token[:len(e.token)-4] + "xxxx"
	if unknown == e.token {
		t.Fatal("the unknown key is the member's")
	}
	for _, auth := range []string{"", unknown} {
		a := e.ext(auth, extSavePage, map[string]any{"source": "extension", "clientRequestId": "x", "url": "https://example.com/a", "title": "A", "originalContent": extPage})
		if a.Status != http.StatusOK || len(a.Data["savePage"].ErrorCodes) != 1 || a.Data["savePage"].ErrorCodes[0] != "UNAUTHORIZED" {
			t.Errorf("savePage with %q: %+v", auth, a)
		}
		a = e.ext(auth, extSetLinkArchived, map[string]any{"linkId": "x", "archived": true})
		if c := a.Data["setLinkArchived"].ErrorCodes; len(c) != 1 || c[0] != "UNAUTHORIZED" {
			t.Errorf("setLinkArchived with %q: %+v", auth, a)
		}
	}
	if got := e.omnivoreSaved("in:all"); len(got) != 0 {
		t.Fatalf("saved without a key: %+v", got)
	}
	// Inboxt's form of the same key keeps Inboxt's answer: an error.
	r := e.wantError(unknown, `{ me { id } }`, nil, http.StatusOK, "UNAUTHORIZED")
	if len(r.Errors) != 1 {
		t.Fatalf("Bearer unknown key: %+v", r)
	}
}

func TestOmnivoreExtensionSavesAPageLargerThanAnAnonymousRequest(t *testing.T) {
	// The extension sends the page whole (document.documentElement.
	// outerHTML, src/scripts/content/content.ts, omnivore-app/omnivore
	// @322ce62); news pages with their scripts inline pass 1 MiB, the
	// limit of a request that names nobody.
	e := newEnv(t, options{})
	page := strings.Replace(extPage, "</article>", "<p>"+strings.Repeat("crumb and crust ", (3<<20)/16)+"</p></article>", 1)
	in := map[string]any{"source": "extension", "clientRequestId": "x", "url": "https://example.com/long", "title": "Long", "originalContent": page}
	a := e.ext(e.token, extSavePage, in).Data["savePage"]
	if len(a.ErrorCodes) != 0 || a.ClientRequestID == "" {
		t.Fatalf("a member's 3 MiB page: savePage = %+v", a)
	}
	resp, body := e.postBare("/api/graphql", "", map[string]any{"query": extSavePage, "variables": map[string]any{"input": in}})
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "at most 1048576 bytes") {
		t.Fatalf("the same request without a key: %d %s", resp.StatusCode, body)
	}
}
