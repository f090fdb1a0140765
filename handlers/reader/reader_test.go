package reader_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/handlers/libraryservice"
	"github.com/hearthkit/caddy-hearth/handlers/reader"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

const password = "correct horse battery"

// fixture is the library pages, the member pages and the GraphQL API on
// one test server, as hearth_graphql serves them, over a Badger store.
type fixture struct {
	t      testing.TB
	store  *storage.Store
	srv    *httptest.Server
	member *members.Member
	client *http.Client
	api    *graphql.Server
	lib    *libraryservice.Service
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureOn(t, storagetest.OpenFast(t, t.TempDir()))
}

// newFixtureOn is newFixture on the store st.
func newFixtureOn(t testing.TB, st *storage.Store) *fixture {
	t.Helper()
	pages := account.New(st, account.Options{})
	svc := libraryservice.Prepare(st, libraryservice.Options{Pages: pages, AllowPrivateAddresses: true})
	t.Cleanup(func() { svc.Close() })
	api := graphql.New(st, svc, graphql.Options{Pages: pages})
	lib := reader.New(st, reader.Options{Pages: pages, SaveURL: svc.SaveURL})
	pages.AddSettingsPage(lib.SavingPage())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A site with the library: its members land there.
		r = account.WithHome(r, reader.Path)
		switch {
		case api.Handles(r):
			api.ServeHTTP(w, r)
		case lib.Handles(r):
			lib.ServeHTTP(w, r)
		case pages.Handles(r):
			pages.ServeHTTP(w, r)
		case r.URL.Path == "/":
			pages.RenderLanding(w, r, nil)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	m, err := members.Of(st).CreateMember(context.Background(), "alice", "Alice", password)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, store: st, srv: srv, member: m, api: api, lib: svc}
	f.client = f.browser()
	f.signIn(f.client)
	return f
}

// browser is a cookie-jar client that does not follow redirects.
func (f *fixture) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (f *fixture) signIn(c *http.Client) *http.Response {
	f.t.Helper()
	return f.signInAs(c, "alice")
}

func (f *fixture) signInAs(c *http.Client, username string) *http.Response {
	f.t.Helper()
	resp, err := c.PostForm(f.srv.URL+account.SignInPath, url.Values{"username": {username}, "password": {password}})
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		f.t.Fatalf("sign in: %d", resp.StatusCode)
	}
	return resp
}

func (f *fixture) get(path string) (int, string, http.Header) {
	f.t.Helper()
	resp, err := f.client.Get(f.srv.URL + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (f *fixture) post(path string, form url.Values) *http.Response {
	f.t.Helper()
	resp, err := f.client.PostForm(f.srv.URL+path, form)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func (f *fixture) save(title, site string, words int, in library.NewItem) *library.SavedItem {
	f.t.Helper()
	in.Title, in.WordCount = title, words
	if in.URL == "" {
		in.URL = "https://" + site + "/" + url.PathEscape(strings.ToLower(title))
	}
	if in.HTML == "" {
		in.HTML = "<p>First paragraph of " + html.EscapeString(title) + ".</p><p>Second <b>bold</b> paragraph.</p>"
	}
	it, _, err := library.Of(f.store).SaveItem(context.Background(), f.member.ID, in)
	if err != nil {
		f.t.Fatal(err)
	}
	return it
}

func (f *fixture) item(id string) *library.SavedItem {
	f.t.Helper()
	it, err := library.Of(f.store).SavedItem(context.Background(), f.member.ID, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return it
}

func TestSignedOutVisitorGoesToSignInAndComesBack(t *testing.T) {
	f := newFixture(t)
	c := f.browser()
	resp, err := c.Get(f.srv.URL + "/library?q=in%3Aarchive")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/auth/sign_in?return_to="+url.QueryEscape("/library?q=in%3Aarchive") {
		t.Fatalf("signed out: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestMembersLandInTheLibrary(t *testing.T) {
	f := newFixture(t)
	c := f.browser()
	if loc := f.signIn(c).Header.Get("Location"); loc != reader.Path {
		t.Fatalf("after signing in: %q, want the library", loc)
	}
	resp, err := c.Get(f.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != reader.Path {
		t.Fatalf("/ signed in: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The menu of every member page links to the library.
	_, body, _ := f.get("/settings")
	if !strings.Contains(body, `<a href="/library">Library</a>`) {
		t.Fatal("settings menu has no Library link")
	}
}

func TestEmptyInboxSaysWhatToDo(t *testing.T) {
	f := newFixture(t)
	code, body, hdr := f.get("/library")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	for _, want := range []string{"Your inbox is empty", `href="/library/add"`, `href="/settings/import"`, `href="/settings/saving"`} {
		if !strings.Contains(body, want) {
			t.Errorf("empty inbox lacks %q", want)
		}
	}
	csp := hdr.Get("Content-Security-Policy")
	if strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "script-src 'sha256-") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("policy %q", csp)
	}
	// The other views of the menu, empty, say what fills them, not what
	// to change in a search the member did not type.
	for _, c := range []struct{ q, want string }{
		{"in:archive", "The archive is empty"},
		{"in:inbox type:newsletter", `href="/settings/api_tokens"`},
		{"in:all", `href="/library/add"`},
	} {
		_, body := f.getq(c.q)
		if !strings.Contains(body, c.want) || strings.Contains(body, "Try fewer words") {
			t.Errorf("the empty view %s does not say %q, or asks to search otherwise", c.q, c.want)
		}
	}
	if _, body := f.getq("in:all bread"); !strings.Contains(body, "Try fewer words") {
		t.Error("an empty search does not suggest fewer words")
	}
}

func TestViewsListTheirItems(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	lib := library.Of(f.store)
	recipes, err := lib.CreateLabel(ctx, f.member.ID, "Recipes", "#aa0000")
	if err != nil {
		t.Fatal(err)
	}
	bread := f.save("Sourdough bread", "bakery.example", 1000, library.NewItem{LabelIDs: []string{recipes.ID}})
	f.save("Weekly letter", "", 300, library.NewItem{Type: library.TypeNewsletter, URL: "https://cook.example/letter/1", FromName: "Cooking Weekly", FromAddress: "news@cook.example"})
	old := f.save("Old news", "news.example", 100, library.NewItem{})
	if _, err := lib.SetItemsStatus(ctx, f.member.ID, []string{old.ID}, library.StatusArchived); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.CreateSavedQuery(ctx, f.member.ID, "Long reads", "in:all reading-time:4..*"); err != nil {
		t.Fatal(err)
	}

	_, body, _ := f.get("/library")
	for _, want := range []string{"Sourdough bread", "bakery.example", "5 min", "Recipes", "Weekly letter", "Cooking Weekly",
		`aria-current="page">Inbox`, ">Long reads<", "/library/item/" + bread.ID} {
		if !strings.Contains(body, want) {
			t.Errorf("inbox lacks %q", want)
		}
	}
	if strings.Contains(body, "Old news") {
		t.Error("inbox lists an archived item")
	}
	cases := []struct{ q, want, not string }{
		{"in:archive", "Old news", "Sourdough bread"},
		{"in:inbox type:newsletter", "Cooking Weekly", "Sourdough bread"},
		{`label:"Recipes"`, "Sourdough bread", "Weekly letter"},
		{"in:all reading-time:4..*", "Sourdough bread", "Old news"},
		{"in:all", "Old news", ""},
		{"sourdough", "Sourdough bread", "Weekly letter"},
	}
	for _, c := range cases {
		_, body := f.getq(c.q)
		if !strings.Contains(body, c.want) || c.not != "" && strings.Contains(body, c.not) {
			t.Errorf("q=%s: want %q and not %q", c.q, c.want, c.not)
		}
	}
	// Saved-query and label views are the menu's links.
	if _, body := f.getq("in:all reading-time:4..*"); !strings.Contains(body, `aria-current="page">Long reads`) {
		t.Error("the saved query's view is not marked current")
	}
}

// A label whose name the search syntax cannot spell (a comma separates
// names in label:, quotes are dropped) still has a view that lists its
// items, from the menu's link, and keeps it through the search form, the
// sort and the reader's next link.
func TestLabelViewsOfNamesTheSyntaxCannotSpell(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	lib := library.Of(f.store)
	for _, name := range []string{"Salt, pepper", `Say "cheese"`} {
		l, err := lib.CreateLabel(ctx, f.member.ID, name, "#336699")
		if err != nil {
			t.Fatal(err)
		}
		older := f.save("Older "+name, "one.example", 100, library.NewItem{LabelIDs: []string{l.ID}})
		time.Sleep(2 * time.Millisecond)
		newer := f.save("Newer "+name, "two.example", 100, library.NewItem{LabelIDs: []string{l.ID}})
		f.save("Unlabelled "+name, "three.example", 100, library.NewItem{})
		_, menu, _ := f.get("/library")
		m := regexp.MustCompile(`<a href="([^"]+)"[^>]*>` + regexp.QuoteMeta(html.EscapeString(name)) + `</a>`).FindStringSubmatch(menu)
		if m == nil {
			t.Fatalf("no menu link to the view of %s", name)
		}
		view := html.UnescapeString(m[1])
		code, body, _ := f.get(view)
		if code != http.StatusOK || !strings.Contains(body, "<h1>"+html.EscapeString(name)+"</h1>") ||
			!strings.Contains(body, ">Older "+html.EscapeString(name)+"<") || !strings.Contains(body, ">Newer "+html.EscapeString(name)+"<") ||
			strings.Contains(body, "Unlabelled") {
			t.Fatalf("the view of %s (%s): HTTP %d\n%s", name, view, code, body)
		}
		// The search form searches within the label.
		if !strings.Contains(body, `<input type="hidden" name="label" value="`+html.EscapeString(name)+`">`) {
			t.Errorf("the search form of the view of %s does not keep the label", name)
		}
		// The reader's next link follows the label's view, oldest first.
		_, page, _ := f.get("/library/item/" + older.ID + strings.TrimPrefix(view, "/library") + "&sort=saved-asc")
		m = regexp.MustCompile(`<a href="([^"]+)" rel="next"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no next link in the reader opened from the view of %s", name)
		}
		resp, err := f.client.Get(f.srv.URL + html.UnescapeString(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/library/item/"+newer.ID+"?") {
			t.Errorf("next in the view of %s goes to %s, want %s", name, loc, newer.ID)
		}
	}
	// A label no label's name can be is refused, and not repeated in the
	// page's links.
	long := strings.Repeat("salt", 1000)
	if code, body, _ := f.get("/library?q=&label=" + long); code != http.StatusBadRequest || strings.Contains(body, long) {
		t.Errorf("a 4000-character label: HTTP %d, echoed %v", code, strings.Contains(body, long))
	}
}

func (f *fixture) getq(q string) (int, string) {
	code, body, _ := f.get("/library?q=" + url.QueryEscape(q))
	return code, body
}

func TestSearchErrorsAreTheAPIs(t *testing.T) {
	f := newFixture(t)
	code, body := f.getq("saved:yesterday")
	if code != http.StatusBadRequest || !strings.Contains(body, "saved: &#34;yesterday&#34; is not a date") {
		t.Fatalf("bad query: %d %s", code, body)
	}
	code, body = f.getq(strings.Repeat("word ", 60))
	if code != http.StatusBadRequest || !strings.Contains(body, "Free text search is limited to 200 characters") {
		t.Fatalf("long query: %d", code)
	}
}

func TestPagesOf50ByCursor(t *testing.T) {
	f := newFixture(t)
	for i := range 120 {
		f.save(fmt.Sprintf("Item %03d", i), "many.example", 200, library.NewItem{})
	}
	seen := map[string]bool{}
	next := "/library"
	pages := 0
	idRe := regexp.MustCompile(`name="id" value="([^"]+)"`)
	nextRe := regexp.MustCompile(`<a href="([^"]+)" rel="next"`)
	for next != "" {
		_, body, _ := f.get(next)
		pages++
		ids := idRe.FindAllStringSubmatch(body, -1)
		if pages < 3 && len(ids) != reader.PageSize {
			t.Fatalf("page %d has %d items", pages, len(ids))
		}
		for _, m := range ids {
			if seen[m[1]] {
				t.Fatalf("item %s twice", m[1])
			}
			seen[m[1]] = true
		}
		next = ""
		if m := nextRe.FindStringSubmatch(body); m != nil {
			next = html.UnescapeString(m[1])
		}
	}
	if pages != 3 || len(seen) != 120 {
		t.Fatalf("%d pages, %d items", pages, len(seen))
	}
}

func TestBulkActionsUseTheLibrary(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	lab, _ := library.Of(f.store).CreateLabel(ctx, f.member.ID, "Later", "#00aa00")
	a := f.save("Alpha", "a.example", 100, library.NewItem{})
	b := f.save("Beta", "b.example", 100, library.NewItem{})
	c := f.save("Gamma", "c.example", 100, library.NewItem{})

	resp := f.post("/library/items", url.Values{"action": {"archive"}, "id": {a.ID}, "return": {"/library?q=in%3Ainbox"}})
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "done=archived") {
		t.Fatalf("archive: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if f.item(a.ID).Status != library.StatusArchived {
		t.Fatal("not archived")
	}
	f.post("/library/items", url.Values{"action": {"label-add"}, "label": {lab.ID}, "id": {b.ID, c.ID}})
	if got := f.item(c.ID).LabelIDs; len(got) != 1 || got[0] != lab.ID {
		t.Fatalf("labels %v", got)
	}
	// Trash from the inbox and the archive at once; undo puts each back.
	resp = f.post("/library/items", url.Values{"action": {"trash"}, "id": {a.ID, b.ID}, "return": {"/library"}})
	loc, _ := url.Parse(resp.Header.Get("Location"))
	undo := loc.Query().Get("undo")
	if f.item(a.ID).Status != library.StatusDeleted || f.item(b.ID).Status != library.StatusDeleted || undo == "" {
		t.Fatalf("trash: %q", loc)
	}
	_, body, _ := f.get(loc.String())
	if !strings.Contains(body, "Moved to the trash.") || !strings.Contains(body, `id="undo"`) {
		t.Fatal("no undo after trash")
	}
	f.post("/library/items", url.Values{"action": {"undo"}, "undo": {undo}})
	if f.item(a.ID).Status != library.StatusArchived || f.item(b.ID).Status != library.StatusActive {
		t.Fatalf("undo: %s %s", f.item(a.ID).Status, f.item(b.ID).Status)
	}
	// Bad input changes nothing and says why.
	resp = f.post("/library/items", url.Values{"action": {"archive"}, "id": {c.ID, "nonexistent"}})
	if resp.StatusCode != http.StatusNotFound || f.item(c.ID).Status != library.StatusActive {
		t.Fatalf("unknown id: %d %s", resp.StatusCode, f.item(c.ID).Status)
	}
	resp = f.post("/library/items", url.Values{"action": {"archive"}, "return": {"https://evil.example/"}, "id": {c.ID}})
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/library?") {
		t.Fatalf("return to another site: %q", loc)
	}
	// From the trash, Delete forever (behind its confirm step) deletes.
	f.post("/library/items", url.Values{"action": {"trash"}, "id": {c.ID}})
	_, trash := f.getq("in:trash")
	if !strings.Contains(trash, "Delete forever…") || !strings.Contains(trash, `value="delete"`) {
		t.Fatal("the trash offers no Delete forever")
	}
	f.post("/library/items", url.Values{"action": {"delete"}, "id": {c.ID}})
	if _, err := library.Of(f.store).SavedItem(context.Background(), f.member.ID, c.ID); err == nil {
		t.Fatal("Delete forever left the item")
	}
}

func TestCrossSiteFormsAreRefused(t *testing.T) {
	f := newFixture(t)
	a := f.save("Alpha", "a.example", 100, library.NewItem{})
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/library/items", strings.NewReader(url.Values{"action": {"trash"}, "id": {a.ID}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || f.item(a.ID).Status != library.StatusActive {
		t.Fatalf("cross-site post: %d, status %s", resp.StatusCode, f.item(a.ID).Status)
	}
	// The JSON route of the script too.
	req, _ = http.NewRequest(http.MethodPost, f.srv.URL+"/library/item/"+a.ID+"/highlights", strings.NewReader(`{"segments":[{"xpath":"/p[1]","startOffset":0,"endOffset":5,"text":"First"}]}`))
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err = f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	hls, _ := library.Of(f.store).ItemHighlights(context.Background(), f.member.ID, a.ID)
	if resp.StatusCode != http.StatusForbidden || len(hls) != 0 {
		t.Fatalf("cross-site highlight: %d, %d highlights", resp.StatusCode, len(hls))
	}
}

// A note on the item as a whole (Omnivore's browser extension writes one)
// is listed with the highlights as its note alone, without an empty
// quote, in the item page and in the highlights view.
func TestReaderShowsANoteOnTheItem(t *testing.T) {
	f := newFixture(t)
	it := f.save("Levain", "one.example", 400, library.NewItem{})
	if _, err := library.Of(f.store).AddNote(context.Background(), f.member.ID, it.ID, "Feed it twice a day."); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/library/item/" + it.ID, "/library?q=type%3Ahighlight"} {
		code, body, _ := f.get(path)
		if code != 200 || !strings.Contains(body, "Feed it twice a day.") || strings.Contains(body, "<blockquote></blockquote>") {
			t.Errorf("%s: %d, note shown %v, empty quote %v", path, code, strings.Contains(body, "Feed it twice a day."), strings.Contains(body, "<blockquote></blockquote>"))
		}
	}
}

func TestReaderShowsTheItemAndItsNeighbours(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	first := f.save("First", "one.example", 400, library.NewItem{Author: "Ada"})
	time.Sleep(2 * time.Millisecond)
	mid := f.save("Middle", "two.example", 400, library.NewItem{})
	time.Sleep(2 * time.Millisecond)
	last := f.save("Last", "three.example", 400, library.NewItem{})
	// A highlight made through the API (Inboxt's segment shape) is listed
	// with its segments for the script to mark in place.
	seg := library.HighlightSegment{XPath: "/html[1]/body[1]/div[1]/p[2]::0", StartOffset: 7, EndOffset: 11, Text: "bold", BeforeText: "", AfterText: ""}
	if _, err := library.Of(f.store).CreateHighlight(ctx, f.member.ID, mid.ID, []library.HighlightSegment{seg}, "a note"); err != nil {
		t.Fatal(err)
	}
	code, body, hdr := f.get("/library/item/" + mid.ID + "?q=in%3Ainbox")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	for _, want := range []string{"<h1 id=\"title\">Middle</h1>", "two.example", "2 min read", `href="https://two.example/middle"`,
		"Second <b>bold</b> paragraph.", `data-segments="[{&#34;xpath&#34;:&#34;/html[1]/body[1]/div[1]/p[2]::0&#34;`, "a note"} {
		if !strings.Contains(body, want) {
			t.Errorf("reader lacks %q", want)
		}
	}
	// Next and previous follow the view's order (the inbox, newest first)
	// when followed; at an end of the list the member stays on the item.
	link := func(body, rel string) string {
		m := regexp.MustCompile(`<a href="([^"]+)" rel="` + rel + `"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no %s link", rel)
		}
		return html.UnescapeString(m[1])
	}
	follow := func(path string) string {
		resp, err := f.client.Get(f.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		return resp.Header.Get("Location")
	}
	for _, c := range []struct{ from, rel, want string }{
		{mid.ID, "next", "/library/item/" + first.ID}, {mid.ID, "prev", "/library/item/" + last.ID},
		{first.ID, "next", "/library/item/" + first.ID + "?done=last"}, {last.ID, "prev", "/library/item/" + last.ID + "?done=first"},
	} {
		_, page, _ := f.get("/library/item/" + c.from)
		if got := follow(link(page, c.rel)); got != c.want {
			t.Errorf("%s from %s: to %s, want %s", c.rel, c.from, got, c.want)
		}
	}
	// In another view and order the links keep it.
	_, page, _ := f.get("/library/item/" + mid.ID + "?q=in%3Aall&sort=saved-asc")
	if got, want := follow(link(page, "next")), "/library/item/"+last.ID+"?q=in%3Aall&sort=saved-asc"; got != want {
		t.Errorf("next in oldest first: %s, want %s", got, want)
	}
	if _, page, _ := f.get("/library/item/" + first.ID + "?done=last"); !strings.Contains(page, "This is the last item of the list.") {
		t.Error("no notice at the end of the list")
	}
	if strings.Contains(hdr.Get("Content-Security-Policy"), "unsafe") {
		t.Error("the reader's policy allows unsafe sources")
	}
	if code, _, _ := f.get("/library/item/nonexistent"); code != http.StatusNotFound {
		t.Errorf("unknown item: %d", code)
	}
}

func TestHighlightsProgressAndSettings(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	it := f.save("Article", "site.example", 400, library.NewItem{})
	// The script posts Inboxt's segments as JSON.
	body := `{"note":"remember","segments":[{"xpath":"/html[1]/body[1]/main[1]/div[1]/div[3]/article[1]/div[1]/p[2]::0","startOffset":7,"endOffset":11,"text":"bold","beforeText":"","afterText":""}]}`
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/library/item/"+it.ID+"/highlights", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ ID, Note, Quote string }
	_ = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if resp.StatusCode != 200 || got.Quote != "bold" || got.Note != "remember" {
		t.Fatalf("create highlight: %d %+v", resp.StatusCode, got)
	}
	hls, _ := library.Of(f.store).ItemHighlights(ctx, f.member.ID, it.ID)
	if len(hls) != 1 || hls[0].Segments[0].XPath != "/html[1]/body[1]/main[1]/div[1]/div[3]/article[1]/div[1]/p[2]::0" || hls[0].Segments[0].EndOffset != 11 {
		t.Fatalf("stored %+v", hls)
	}
	// A segment the library refuses is the member's error, as JSON.
	req, _ = http.NewRequest(http.MethodPost, f.srv.URL+"/library/item/"+it.ID+"/highlights", strings.NewReader(`{"segments":[]}`))
	resp, _ = f.client.Do(req)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "segments") {
		t.Fatalf("no segments: %d %s", resp.StatusCode, b)
	}
	// Notes are edited and highlights deleted with plain forms.
	f.post("/library/highlight/"+got.ID, url.Values{"action": {"note"}, "note": {"changed"}, "return": {"/library/item/" + it.ID}})
	hls, _ = library.Of(f.store).ItemHighlights(ctx, f.member.ID, it.ID)
	if hls[0].Note != "changed" {
		t.Fatalf("note %q", hls[0].Note)
	}
	f.post("/library/highlight/"+got.ID, url.Values{"action": {"delete"}})
	if hls, _ = library.Of(f.store).ItemHighlights(ctx, f.member.ID, it.ID); len(hls) != 0 || f.item(it.ID).HighlightCount != 0 {
		t.Fatal("highlight not deleted")
	}
	// Reading progress is the API's readingProgress.
	f.post("/library/item/"+it.ID+"/progress", url.Values{"progress": {"42"}})
	if p := f.item(it.ID).ReadingProgress; p != 42 {
		t.Fatalf("progress %v", p)
	}
	if resp := f.post("/library/item/"+it.ID+"/progress", url.Values{"progress": {"420"}}); resp.StatusCode != http.StatusBadRequest || f.item(it.ID).ReadingProgress != 42 {
		t.Fatalf("progress 420: %d", resp.StatusCode)
	}
	// Text settings are kept for the member.
	f.post("/library/prefs", url.Values{"size": {"3"}, "width": {"1"}, "height": {"2"}, "font": {"serif"}, "theme": {"dark"}})
	_, page, _ := f.get("/library/item/" + it.ID)
	if !strings.Contains(page, `class="reader size-3 width-1 lh-2 serif theme-dark"`) {
		t.Fatal("text settings not applied")
	}
	if resp := f.post("/library/prefs", url.Values{"size": {"9"}}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("size 9: %d", resp.StatusCode)
	}
}

func TestAddingALinkNeedsTheMembersPost(t *testing.T) {
	f := newFixture(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><head><title>Shared page</title></head><body><article><p>Some text worth keeping.</p></article></body></html>")
	}))
	defer site.Close()
	// The share target and the bookmarklet land on a confirm page: a GET
	// saves nothing, even with a URL.
	code, body, _ := f.get("/library/add?title=Shared&text=" + url.QueryEscape("Look at this "+site.URL+"/page"))
	if code != 200 || !strings.Contains(body, `value="`+site.URL+`/page"`) || !strings.Contains(body, "Save this page to your library?") {
		t.Fatalf("confirm page: %d", code)
	}
	page, _ := library.Of(f.store).SavedItemsPage(context.Background(), f.member.ID, library.ItemFilter{Status: library.StatusAll}, library.PageRequest{Field: library.SortCreatedAt, First: 5})
	if len(page.Items) != 0 {
		t.Fatal("a GET saved something")
	}
	resp := f.post("/library/add", url.Values{"url": {site.URL + "/page"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("add: %d", resp.StatusCode)
	}
	page, _ = library.Of(f.store).SavedItemsPage(context.Background(), f.member.ID, library.ItemFilter{Status: library.StatusAll}, library.PageRequest{Field: library.SortCreatedAt, First: 5})
	if len(page.Items) != 1 || page.Items[0].OriginalURL != site.URL+"/page" {
		t.Fatalf("saved %d items", len(page.Items))
	}
	resp = f.post("/library/add", url.Values{"url": {"ftp://example.org/x"}})
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("ftp URL: %d", resp.StatusCode)
	}
	// The settings page offers the bookmarklet, which opens the confirm page.
	_, body, _ = f.get(reader.SavingPath)
	if !strings.Contains(body, `href="javascript:void%28location.href=%27http://127.0.0.1`) || !strings.Contains(body, "/library/add?url=") {
		t.Fatal("no bookmarklet")
	}
}

func TestAssetsAndManifest(t *testing.T) {
	f := newFixture(t)
	_, body, _ := f.get("/library")
	m := regexp.MustCompile(`<script src="(/library/assets/reader\.[0-9a-f]+\.js)" integrity="(sha256-[^"]+)" defer>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no versioned script")
	}
	code, js, hdr := f.get(m[1])
	if code != 200 || !strings.Contains(hdr.Get("Cache-Control"), "immutable") || !strings.HasPrefix(hdr.Get("Content-Type"), "text/javascript") || len(js) > 20<<10 {
		t.Fatalf("script: %d %q %d bytes", code, hdr.Get("Cache-Control"), len(js))
	}
	if code, _, _ := f.get("/library/assets/reader.000000000000.js"); code != 404 {
		t.Fatalf("unknown version: %d", code)
	}
	code, man, _ := f.get("/library/manifest.webmanifest")
	var mf struct {
		StartURL    string `json:"start_url"`
		ShareTarget struct {
			Action, Method string
			Params         map[string]string
		} `json:"share_target"`
	}
	if err := json.Unmarshal([]byte(man), &mf); err != nil || code != 200 {
		t.Fatalf("manifest: %d %v", code, err)
	}
	if mf.StartURL != "/library" || mf.ShareTarget.Action != "/library/add" || mf.ShareTarget.Method != "GET" || mf.ShareTarget.Params["url"] != "url" {
		t.Fatalf("manifest %+v", mf)
	}
}

func TestOtherOriginsImagesAreNeverLoaded(t *testing.T) {
	f := newFixture(t)
	it := f.save("Letter", "news.example", 100, library.NewItem{HTML: `<p>Hello<img src="https://tracker.example/open.gif" width="1" height="1"></p>` +
		`<p><img src="https://cdn.example/loaf.jpg" alt="A loaf" srcset="https://cdn.example/loaf2.jpg 2x"></p><p><img src="https://cdn.example/b.jpg"></p>` +
		`<picture><source srcset="https://cdn.example/c.webp"><img src="data:image/png;base64,iVBORw0KGgo=" alt="inline"></picture>` +
		`<noscript><img src="https://cdn.example/ns.gif"></noscript><p><img src="/img/rel.png" alt="Relative" width="300" height="200"></p><p>After</p>`})
	_, body, hdr := f.get("/library/item/" + it.ID)
	if strings.Contains(body, "tracker.example") || strings.Contains(body, "cdn.example") {
		t.Fatal("the page names another origin's image")
	}
	for _, want := range []string{"<p>After</p>", `<hearth-img role="img" aria-label="Image not stored: A loaf"></hearth-img>`, `aria-label="Image not stored: An image of the original page"`,
		`aria-label="Image not stored: Relative" width="300" height="200"></hearth-img>`, `src="data:image/png;base64,iVBORw0KGgo="`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// An image not stored is a placeholder without an address: no img
	// the browser would draw broken.
	if strings.Count(body, "<img") != 1 {
		t.Errorf("img elements besides the data: one in %s", body)
	}
	if !strings.Contains(hdr.Get("Content-Security-Policy"), "img-src 'self' data:;") {
		t.Errorf("policy %q", hdr.Get("Content-Security-Policy"))
	}
}

func TestReaderFormsLabelAndMarkRead(t *testing.T) {
	f := newFixture(t)
	it := f.save("Alpha", "a.example", 100, library.NewItem{})
	self := "/library/item/" + it.ID + "?q=in%3Ainbox"
	_, page, _ := f.get(self)
	if !strings.Contains(page, `name="new_label"`) || !strings.Contains(page, `value="read"`) {
		t.Fatal("the reader has no new-label field or Mark read")
	}
	resp := f.post("/library/items", url.Values{"action": {"labels"}, "id": {it.ID}, "new_label": {"To cook"}, "return": {self}})
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/library/item/"+it.ID) {
		t.Fatalf("labels: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	labels, _ := library.Of(f.store).Labels(context.Background(), f.member.ID)
	if len(labels) != 1 || labels[0].Name != "To cook" || len(f.item(it.ID).LabelIDs) != 1 {
		t.Fatalf("labels %+v on %v", labels, f.item(it.ID).LabelIDs)
	}
	// The same name again is the same label; unticking it removes it.
	f.post("/library/items", url.Values{"action": {"labels"}, "id": {it.ID}, "new_label": {"to cook"}})
	if labels, _ = library.Of(f.store).Labels(context.Background(), f.member.ID); len(labels) != 1 {
		t.Fatalf("%d labels", len(labels))
	}
	f.post("/library/items", url.Values{"action": {"labels"}, "id": {it.ID}})
	if got := f.item(it.ID).LabelIDs; len(got) != 0 {
		t.Fatalf("labels left: %v", got)
	}
	f.post("/library/items", url.Values{"action": {"read"}, "id": {it.ID}})
	if f.item(it.ID).ReadAt == nil {
		t.Fatal("not marked read")
	}
	_, page, _ = f.get(self)
	if !strings.Contains(page, `value="unread"`) {
		t.Fatal("a read item offers no Mark unread")
	}
	f.post("/library/items", url.Values{"action": {"unread"}, "id": {it.ID}})
	if f.item(it.ID).ReadAt != nil {
		t.Fatal("not marked unread")
	}
}

// A labels form that is refused (an item or a ticked label the member
// does not have) changes nothing: the label its new_label names is not
// left behind.
func TestRefusedLabelsFormMakesNoLabel(t *testing.T) {
	f := newFixture(t)
	it := f.save("Alpha", "a.example", 100, library.NewItem{})
	for _, form := range []url.Values{
		{"action": {"labels"}, "id": {it.ID}, "label": {"12345"}, "new_label": {"Fresh"}},
		{"action": {"labels"}, "id": {it.ID, "999999"}, "new_label": {"Fresh"}},
	} {
		if resp := f.post("/library/items", form); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%v: HTTP %d", form, resp.StatusCode)
		}
		if labels, _ := library.Of(f.store).Labels(context.Background(), f.member.ID); len(labels) != 0 || len(f.item(it.ID).LabelIDs) != 0 {
			t.Fatalf("%v: labels %+v, on the item %v", form, labels, f.item(it.ID).LabelIDs)
		}
	}
}

// An undo naming an item the member does not have is refused whole: the
// items it names beside it stay in the trash (it was applied status by
// status, in a map's order, so half of it could be).
func TestRefusedUndoChangesNothing(t *testing.T) {
	f := newFixture(t)
	it := f.save("Alpha", "a.example", 100, library.NewItem{})
	if _, err := library.Of(f.store).SetItemsStatus(context.Background(), f.member.ID, []string{it.ID}, library.StatusDeleted); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		if resp := f.post("/library/items", url.Values{"action": {"undo"}, "undo": {it.ID + ":A,999999:R"}}); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("HTTP %d", resp.StatusCode)
		}
		if got := f.item(it.ID).Status; got != library.StatusDeleted {
			t.Fatalf("the refused undo moved the item to %s", got)
		}
	}
}

// The library page's weight budget: 50 items with their labels, the
// stylesheet and every script, at most 60 KB uncompressed, of which
// JavaScript at most 20 KB.
func TestLibraryPageWeight(t *testing.T) {
	f := newFixture(t)
	lab, _ := library.Of(f.store).CreateLabel(context.Background(), f.member.ID, "Recipes", "#aa0000")
	for i := range reader.PageSize {
		f.save(fmt.Sprintf("A fairly typical article title number %03d about things", i), "www.example-news-site.com", 1200, library.NewItem{LabelIDs: []string{lab.ID}})
	}
	_, body, _ := f.get("/library")
	total, js := len(body), 0
	for _, m := range regexp.MustCompile(`<(?:script src|link rel="stylesheet" href)="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		_, b, hdr := f.get(html.UnescapeString(m[1]))
		total += len(b)
		if strings.HasPrefix(hdr.Get("Content-Type"), "text/javascript") {
			js += len(b)
		}
	}
	if js == 0 || total > 60<<10 || js > 20<<10 {
		t.Fatalf("the library page weighs %d bytes, %d of them JavaScript", total, js)
	}
}

// The sort menu and q's sort: order a view, the menu shows the choice, and
// each row says its reading progress.
func TestSortChoice(t *testing.T) {
	f := newFixture(t)
	f.save("Banana bread", "b.example", 2000, library.NewItem{})
	short := f.save("Apple pie", "a.example", 100, library.NewItem{})
	f.save("Cherry cake", "c.example", 900, library.NewItem{})
	if _, err := library.Of(f.store).UpdateReadingProgress(context.Background(), f.member.ID, short.ID, 40); err != nil {
		t.Fatal(err)
	}
	titles := regexp.MustCompile(`class="title" href="[^"]*">([^<]*)</a>`)
	order := func(path string) (string, string) {
		_, body, _ := f.get(path)
		var got []string
		for _, m := range titles.FindAllStringSubmatch(body, -1) {
			got = append(got, m[1])
		}
		return strings.Join(got, ", "), body
	}
	for _, c := range []struct{ path, want, selected string }{
		{"/library", "Cherry cake, Apple pie, Banana bread", "saved-desc"},
		{"/library?sort=saved-asc", "Banana bread, Apple pie, Cherry cake", "saved-asc"},
		{"/library?sort=wordcount-desc", "Banana bread, Cherry cake, Apple pie", "wordcount-desc"},
		{"/library?q=" + url.QueryEscape("in:inbox sort:title-asc"), "Apple pie, Banana bread, Cherry cake", ""},
	} {
		got, body := order(c.path)
		if got != c.want {
			t.Errorf("%s lists %s, want %s", c.path, got, c.want)
		}
		if c.selected != "" && !strings.Contains(body, `<option value="`+c.selected+`" selected>`) || strings.Count(body, " selected>") != 1 {
			t.Errorf("%s: the sort menu does not show %s chosen", c.path, c.selected)
		}
		if !strings.Contains(body, "a.example · ") || !strings.Contains(body, " · 1 min · 40% read</p>") {
			t.Errorf("%s: the row of the item read to 40%% does not say so", c.path)
		}
	}
}

// A newsletter whose author is its sender names the sender once.
func TestNewsletterSenderSaidOnce(t *testing.T) {
	f := newFixture(t)
	it := f.save("Weekly letter", "", 300, library.NewItem{Type: library.TypeNewsletter, URL: "https://cook.example/letter/1",
		Author: "Cooking Weekly", FromName: "Cooking Weekly", FromAddress: "news@cook.example"})
	_, body, _ := f.get("/library/item/" + it.ID)
	meta := body[strings.Index(body, `<p class="meta">`):]
	meta = meta[:strings.Index(meta, "</p>")]
	if strings.Count(meta, "Cooking Weekly") != 1 || strings.Contains(meta, "By ") {
		t.Errorf("meta %s", meta)
	}
	other := f.save("Bread", "bakery.example", 300, library.NewItem{Author: "Ada Baker"})
	_, body, _ = f.get("/library/item/" + other.ID)
	if !strings.Contains(body, "<span>By Ada Baker</span> · <span>bakery.example</span>") {
		t.Error("an article's author and site are not both shown")
	}
}

// An item without words (a fetch that failed, a highlight-only import)
// shows no reading time, in the list or the reader, rather than "1 min";
// one with words still shows its own.
func TestItemWithoutWordsShowsNoReadingTime(t *testing.T) {
	f := newFixture(t)
	empty := f.save("Gone page", "gone.example", 0, library.NewItem{HTML: " "})
	f.save("Short note", "note.example", 150, library.NewItem{})
	meta := func(body, after string) string {
		m := body[strings.Index(body, after):]
		m = m[strings.Index(m, `<p class="meta">`):]
		return m[:strings.Index(m, "</p>")]
	}
	_, body, _ := f.get("/library")
	if m := meta(body, ">Gone page</a>"); !strings.HasSuffix(m, "</time>") || strings.Contains(m, " min") {
		t.Errorf("the list's row of an item without words says %s", m)
	}
	if m := meta(body, ">Short note</a>"); !strings.HasSuffix(m, "</time> · 1 min") {
		t.Errorf("the list's row of a short item says %s", m)
	}
	_, body, _ = f.get("/library/item/" + empty.ID)
	if m := meta(body, `<h1 id="title">`); !strings.Contains(m, `</time> · <a href="https://gone.example/`) || strings.Contains(m, "min read") {
		t.Errorf("the reader's line of an item without words says %s", m)
	}
}

// An undo puts back items of two statuses (one from the inbox, one from
// the archive) in one change: a store that stops taking writes (a reload,
// a full disk) right as the undo writes leaves both where they were put
// back, or both in the trash, never one of each. Before, each status was
// its own transaction, and the second was refused after the first had
// committed.
func TestUndoOfTwoStatusesIsOneChange(t *testing.T) {
	st, il := storagetest.OpenInterleaved(t)
	f := newFixtureOn(t, st)
	a := f.save("Alpha", "a.example", 100, library.NewItem{})
	b := f.save("Beta", "b.example", 100, library.NewItem{})
	if _, err := library.Of(st).SetItemsStatus(context.Background(), f.member.ID, []string{b.ID}, library.StatusArchived); err != nil {
		t.Fatal(err)
	}
	resp := f.post("/library/items", url.Values{"action": {"trash"}, "id": {a.ID, b.ID}, "return": {"/library"}})
	loc, _ := url.Parse(resp.Header.Get("Location"))
	undo := loc.Query().Get("undo")
	if resp.StatusCode != http.StatusSeeOther || undo == "" {
		t.Fatalf("trash: HTTP %d, %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	var closed <-chan struct{}
	il.BeforeCommit(storage.Key("u", f.member.ID, "gql", "item", ""), func() { closed = il.CloseDuring(st) })
	resp = f.post("/library/items", url.Values{"action": {"undo"}, "undo": {undo}, "return": {"/library"}})
	if closed == nil {
		t.Fatal("the undo wrote no item")
	}
	<-closed
	again, err := storage.Open(il.Dir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	items, err := library.Of(again).SavedItems(context.Background(), f.member.ID, []string{a.ID, b.ID})
	if err != nil || len(items) != 2 {
		t.Fatalf("the items after the undo: %d, %v", len(items), err)
	}
	got := map[string]string{items[0].ID: items[0].Status, items[1].ID: items[1].Status}
	restored := got[a.ID] == library.StatusActive && got[b.ID] == library.StatusArchived
	trashed := got[a.ID] == library.StatusDeleted && got[b.ID] == library.StatusDeleted
	switch {
	case resp.StatusCode == http.StatusSeeOther && restored:
	case resp.StatusCode != http.StatusSeeOther && trashed:
	default:
		t.Fatalf("the undo answered HTTP %d and left Alpha %s, Beta %s", resp.StatusCode, got[a.ID], got[b.ID])
	}
}

// A saved page's ids never name the page's own elements: the script finds
// the highlights' list and the shortcuts' dialog by id, and ARIA the
// sections' headings, all after the content, where a page saved with
// id="hl-list" would otherwise be found first. The content's ids take a
// prefix, and its links to them follow.
func TestSavedContentsIDsNeverNameThePagesElements(t *testing.T) {
	f := newFixture(t)
	page := `<html><head><title>Footnotes</title></head><body><article><h1>Footnotes</h1>` +
		`<p>A paragraph long enough for readability to keep the article as it is, with a note<a href="#fn1">1</a>. ` +
		`More words to be an article: <a href="#:~:text=more%20words">more words</a>, more words, more words, more words, more words.</p>` +
		`<ul id="hl-list"><li id="fn1">The note.</li></ul><p id="shortcuts">Words words words words words words words words.</p>` +
		`<h2 id="labels-title">Labels</h2><p>Words words words words words words words words words words words words.</p>` +
		`<table><tr><th id="flour">Flour</th></tr><tr><td headers="flour">500 g</td></tr></table></article></body></html>`
	it, err := f.lib.Articles().SaveHTML(context.Background(), f.member.ID, "https://example.com/notes", "", []byte(page), "text/html", articles.Placement{})
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := f.get("/library/item/" + it.ID)
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`\sid="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		if seen[m[1]] {
			t.Errorf("two elements of the page have the id %q", m[1])
		}
		seen[m[1]] = true
	}
	for _, want := range []string{`href="#saved-fn1"`, `href="#:~:text=more%20words"`, `<li id="saved-fn1">The note.</li>`, `<ul class="hls" id="hl-list">`,
		`<th id="saved-flour">`, `<td headers="saved-flour">`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

// Another member's item, highlight and label are not found by id through
// any page or action of the library: each answers 404 (or, for the bulk
// delete, which skips unknown ids as the API does, changes nothing), shows
// nothing of them, and leaves them as they were.
func TestAnotherMembersItemsAreNotFound(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	lib := library.Of(f.store)
	it := f.save("Alices private article", "site.example", 400, library.NewItem{})
	label, err := lib.CreateLabel(ctx, f.member.ID, "alices-label", "#000000")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := lib.CreateHighlight(ctx, f.member.ID, it.ID, []library.HighlightSegment{{XPath: "/p[1]", EndOffset: 5, Text: "First"}}, "alices note")
	if err != nil {
		t.Fatal(err)
	}
	bobM, err := members.Of(f.store).CreateMember(ctx, "bob", "Bob", password)
	if err != nil {
		t.Fatal(err)
	}
	bobs, _, err := lib.SaveItem(ctx, bobM.ID, library.NewItem{URL: "https://bob.example/", Title: "Bobs", HTML: "<p>Bob's.</p>"})
	if err != nil {
		t.Fatal(err)
	}
	bob := f.browser()
	f.signInAs(bob, "bob")
	send := func(method, path, contentType, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := bob.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	form := func(v url.Values) string { return v.Encode() }
	const formType = "application/x-www-form-urlencoded"
	cases := []struct{ method, path, contentType, body string }{
		{"GET", "/library/item/" + it.ID, "", ""},
		{"POST", "/library/item/" + it.ID + "/progress", formType, form(url.Values{"progress": {"50"}})},
		{"POST", "/library/item/" + it.ID + "/highlights", "application/json", `{"segments":[{"xpath":"/p[1]","startOffset":0,"endOffset":5,"text":"First"}]}`},
		{"POST", "/library/highlight/" + hl.ID, formType, form(url.Values{"action": {"note"}, "note": {"bob's"}})},
		{"POST", "/library/highlight/" + hl.ID, formType, form(url.Values{"action": {"delete"}})},
		{"POST", "/library/items", formType, form(url.Values{"action": {"undo"}, "undo": {it.ID + ":R"}})},
		// Bob's own item with Alice's label.
		{"POST", "/library/items", formType, form(url.Values{"action": {"labels"}, "id": {bobs.ID}, "label": {label.ID}})},
		{"POST", "/library/items", formType, form(url.Values{"action": {"label-add"}, "id": {bobs.ID}, "label": {label.ID}})},
	}
	for _, a := range []string{"archive", "unarchive", "trash", "read", "unread", "label-add", "labels"} {
		cases = append(cases, struct{ method, path, contentType, body string }{"POST", "/library/items", formType,
			form(url.Values{"action": {a}, "id": {it.ID}, "label": {label.ID}})})
	}
	for _, c := range cases {
		status, body := send(c.method, c.path, c.contentType, c.body)
		if status != http.StatusNotFound {
			t.Errorf("%s %s %s: HTTP %d, want 404", c.method, c.path, c.body, status)
		}
		for _, secret := range []string{"Alices private", "alices note", "alices-label"} {
			if strings.Contains(body, secret) {
				t.Errorf("%s %s shows %q", c.method, c.path, secret)
			}
		}
	}
	if status, _ := send("POST", "/library/items", formType, form(url.Values{"action": {"delete"}, "id": {it.ID}})); status != http.StatusSeeOther {
		t.Errorf("delete of another's item: HTTP %d, want 303 (nothing deleted)", status)
	}
	got := f.item(it.ID)
	hls, err := lib.ItemHighlights(ctx, f.member.ID, it.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != library.StatusActive || got.ReadAt != nil || got.ReadingProgress != 0 || len(got.LabelIDs) != 0 ||
		len(hls) != 1 || hls[0].Note != "alices note" {
		t.Errorf("Alice's item changed: %+v, highlights %+v", got, hls)
	}
	if b, err := lib.SavedItem(ctx, bobM.ID, bobs.ID); err != nil || len(b.LabelIDs) != 0 {
		t.Errorf("Bob's item has labels %v (%v)", b.LabelIDs, err)
	}
}
