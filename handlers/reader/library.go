package reader

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/library/query"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// DefaultQuery is the view a member lands on: the inbox.
const DefaultQuery = "in:inbox"

// view is one entry of the library's menu: a query in the API's syntax.
type view struct {
	Name, Query string
}

// views are the fixed views. A label's view is label:"name" (labelView);
// a saved query's view is its query.
var views = []view{
	{"Inbox", DefaultQuery},
	{"Archive", "in:archive"},
	{"Trash", "in:trash"},
	{"Newsletters", "in:inbox type:newsletter"},
	{"Highlights", "type:highlight"},
	{"All", "in:all"},
}

// sorts are the choices of the sort menu, as q's sort: values.
var sorts = []struct{ Value, Label string }{
	{"saved-desc", "Newest first"},
	{"saved-asc", "Oldest first"},
	{"updated-desc", "Recently changed"},
	{"title-asc", "Title"},
	{"wordcount-asc", "Shortest"},
	{"wordcount-desc", "Longest"},
	{"progress-desc", "Most read"},
}

// DefaultSort is the sort when neither q nor the menu names one.
const DefaultSort = "saved-desc"

// listState is what a library URL says: the query, the sort and the page,
// and a label's exact name narrowing the query (labelView).
type listState struct {
	Q, Sort, After, Label string
	// badLabel: the URL's label can be no label's name. It is left out of
	// the links (each would repeat it) and parse refuses it.
	badLabel bool
}

func stateOf(r *http.Request) listState {
	s := listState{Q: strings.TrimSpace(r.FormValue("q")), Sort: r.FormValue("sort"), After: r.FormValue("after"),
		Label: strings.TrimSpace(r.FormValue("label"))}
	if _, ok := r.Form["q"]; !ok {
		s.Q = DefaultQuery
	}
	if !validSort(s.Sort) {
		s.Sort = DefaultSort
	}
	if !library.LabelNameCanBe(s.Label) {
		s.Label, s.badLabel = "", true
	}
	return s
}

func validSort(v string) bool {
	for _, s := range sorts {
		if s.Value == v {
			return true
		}
	}
	return false
}

// values are the URL parameters of s (the default query and sort left
// out: a page lists 50 links with them).
func (s listState) values() url.Values {
	v := url.Values{}
	if s.Q != DefaultQuery {
		v.Set("q", s.Q)
	}
	if s.Sort != DefaultSort {
		v.Set("sort", s.Sort)
	}
	if s.After != "" {
		v.Set("after", s.After)
	}
	if s.Label != "" {
		v.Set("label", s.Label)
	}
	return v
}

// URL is the library page of s.
func (s listState) URL() string { return withQuery(Path, s.values()) }

// at is the same list from the page after the cursor after ("": its first).
func (s listState) at(after string) listState {
	s.After = after
	return s
}

func withQuery(path string, v url.Values) string {
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// itemURL is the reader page of an item opened from s (which next and
// previous follow).
func (s listState) itemURL(id string) string {
	return itemPath(id) + s.itemQuery()
}

// itemQuery is the query of s's links to items ("" or "?…"): s without
// its page. A library page builds it once for its 50 links.
func (s listState) itemQuery() string {
	s.After = ""
	if v := s.values(); len(v) > 0 {
		return "?" + v.Encode()
	}
	return ""
}

func itemPath(id string) string { return Path + "/item/" + url.PathEscape(id) }

// parse reads s as the API reads q, with the menu's sort when q names none.
func (s listState) parse() (*query.Query, library.PageRequest, error) {
	if s.badLabel {
		return nil, library.PageRequest{}, fmt.Errorf("label: a label's name is 1 to %d characters", library.MaxLabelNameLen)
	}
	q, err := query.Parse(s.Q)
	if err != nil {
		return nil, library.PageRequest{}, err
	}
	if s.Label != "" && !q.Highlights {
		q.Filter.LabelsAll = append(q.Filter.LabelsAll, []string{s.Label})
	}
	p := library.PageRequest{First: PageSize, After: s.After}
	if q.Sort != nil {
		p.Field, p.Desc = q.Sort.Field, q.Sort.Desc
	} else {
		sq, _ := query.Parse("sort:" + s.Sort)
		p.Field, p.Desc = sq.Sort.Field, sq.Sort.Desc
	}
	if q.Highlights && !library.ValidHighlightSortField(p.Field) && p.Field != library.SortTitle {
		p.Field = library.SortCreatedAt
	}
	return q, p, nil
}

type menuLink struct {
	Name, URL string
	Current   bool
}

type itemRow struct {
	ID, Title, URL, Site, Sender string
	Saved                        time.Time
	Minutes                      int
	Progress                     int
	Labels                       []string
	Newsletter, Read             bool
	Status                       string
}

type highlightRow struct {
	ID, Quote, Note, ItemTitle, ItemURL string
	Created                             time.Time
}

type libraryData struct {
	State             listState
	NavHTML           template.HTML // the views, labels' views and saved searches (navHTML)
	SortsHTML         template.HTML // the sort menu's options (sortsHTML)
	Heading           string
	Error             string
	Notice            string
	Undo              string
	Items             []itemRow
	Highlights        []highlightRow
	IsHighlights      bool
	InTrash           bool
	Labels            []*library.Label
	NextURL, FirstURL string
	Return            string
	Empty             emptyHint
	CanAdd            bool
}

// emptyHint is what an empty view says to do next: each view of the menu
// what fills it, a search how to widen it.
type emptyHint struct {
	Search, Inbox, Trash, Highlights, Archive, Newsletters, All bool
}

func (h *Handler) serveLibrary(w http.ResponseWriter, r *http.Request, m *members.Member) {
	ctx := r.Context()
	lib := library.Of(h.store)
	st := stateOf(r)
	labels, err := lib.Labels(ctx, m.ID)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	queries, err := lib.SavedQueries(ctx, m.ID)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	d := libraryData{State: st, Labels: labels, Return: st.URL(), CanAdd: h.opts.SaveURL != nil}
	d.Heading = "Search results"
	link := func(name string, l listState) menuLink {
		l.Sort = st.Sort
		cur := strings.EqualFold(strings.TrimSpace(l.Q), st.Q) && l.Label == st.Label
		if cur {
			d.Heading = name
		}
		return menuLink{Name: name, URL: l.URL(), Current: cur}
	}
	fixed := make([]menuLink, 0, len(views))
	for _, v := range views {
		fixed = append(fixed, link(v.Name, listState{Q: v.Query}))
	}
	labelViews := make([]menuLink, 0, len(labels))
	for _, l := range labels {
		labelViews = append(labelViews, link(l.Name, labelView(l.Name)))
	}
	queryViews := make([]menuLink, 0, len(queries))
	for _, q := range queries {
		queryViews = append(queryViews, link(q.Name, listState{Q: q.Query}))
	}
	d.NavHTML, d.SortsHTML = navHTML(fixed, labelViews, queryViews), sortsHTML(st.Sort)
	d.Notice = notices[r.FormValue("done")]
	if u := r.FormValue("undo"); u != "" && len(u) < 2000 {
		d.Undo = u
	}
	status := http.StatusOK
	q, p, err := st.parse()
	parseErr := err != nil
	if err == nil && q.Highlights {
		d.IsHighlights = true
		var page *library.HighlightPage
		page, err = lib.HighlightsPage(ctx, m.ID, q.Filter, p)
		if err == nil {
			for _, hl := range page.Highlights {
				d.Highlights = append(d.Highlights, highlightRow{ID: hl.ID, Quote: quote(hl), Note: hl.Note,
					ItemTitle: hl.ItemTitle, ItemURL: st.itemURL(hl.SavedItemID) + "#hl-" + hl.ID, Created: hl.CreatedAt})
			}
			if next := page.NextAfter(); next != "" {
				d.NextURL = st.at(next).URL()
			}
		}
	} else if err == nil {
		d.InTrash = q.Filter.Status == library.StatusDeleted
		var page *library.ItemPage
		page, err = lib.SavedItemsPage(ctx, m.ID, q.Filter, p)
		if err == nil {
			names := make(map[string]string, len(labels))
			for _, l := range labels {
				names[l.ID] = l.Name
			}
			d.Items = make([]itemRow, 0, len(page.Items))
			query := st.itemQuery()
			for _, it := range page.Items {
				d.Items = append(d.Items, row(it, names, query))
			}
			if next := page.NextAfter(); next != "" {
				d.NextURL = st.at(next).URL()
			}
		}
	}
	if err != nil {
		if !parseErr && !isMemberError(err) {
			h.storeError(w, r, err)
			return
		}
		d.Error = err.Error()
		status = http.StatusBadRequest
	}
	if st.After != "" {
		d.FirstURL = st.at("").URL()
	}
	if len(d.Items) == 0 && len(d.Highlights) == 0 && d.Error == "" {
		switch {
		case d.IsHighlights:
			d.Empty.Highlights = true
		case d.InTrash:
			d.Empty.Trash = true
		case st.Label != "":
			d.Empty.Search = true
		case st.Q == DefaultQuery:
			d.Empty.Inbox = true
		case st.Q == "in:archive":
			d.Empty.Archive = true
		case st.Q == "in:inbox type:newsletter":
			d.Empty.Newsletters = true
		case st.Q == "in:all":
			d.Empty.All = true
		default:
			d.Empty.Search = true
		}
	}
	h.renderHTML(w, r, status, d.Heading, func(b *bytes.Buffer) { writeLibrary(b, &d) })
}

// notices say what the last action did, on the page it returns to.
var notices = map[string]string{
	"archived":      "Archived.",
	"unarchived":    "Moved to the inbox.",
	"restored":      "Restored.",
	"labelled":      "Labels changed.",
	"read":          "Marked as read.",
	"unread":        "Marked as unread.",
	"added":         "Saved. The article is being fetched; it shows in your inbox in a moment.",
	"trashed":       "Moved to the trash.",
	"deleted":       "Deleted for good.",
	"note":          "Note saved.",
	"unhighlighted": "Highlight deleted.",
	"last":          "This is the last item of the list.",
	"first":         "This is the first item of the list.",
}

// labelView is the view of a label: label:"name" in the API's syntax, or,
// for a name that syntax cannot spell (label: splits its value at commas
// and drops quotes), every item narrowed to the label by its exact name,
// as the feeds' ?label= does.
func labelView(name string) listState {
	if strings.ContainsAny(name, `,"`) {
		return listState{Label: name}
	}
	return listState{Q: `label:"` + name + `"`}
}

// row is an item of a library page, linking to it with query (itemQuery).
func row(it *library.SavedItem, labelNames map[string]string, query string) itemRow {
	r := itemRow{ID: it.ID, Title: it.Title, URL: itemPath(it.ID) + query, Site: it.SourceDomain, Saved: it.CreatedAt,
		Minutes: minutes(it.WordCount), Progress: int(it.ReadingProgress), Newsletter: it.Type == library.TypeNewsletter,
		Read: it.ReadAt != nil, Status: it.Status}
	if r.Newsletter {
		r.Sender = it.FromName
		if r.Sender == "" {
			r.Sender = it.FromAddress
		}
	}
	if r.Title == "" {
		r.Title = it.OriginalURL
	}
	for _, id := range it.LabelIDs {
		if n, ok := labelNames[id]; ok {
			r.Labels = append(r.Labels, n)
		}
	}
	return r
}

// minutes is the reading time at 200 words a minute, rounded up as the
// API's reading-time: filter counts it: zero only for an item without
// words (a failed fetch, a highlight-only import), which then shows none.
func minutes(words int) int {
	return (max(words, 0) + 199) / 200
}

// quote is the text of a highlight: its segments joined in reverse, as
// Inboxt's web app shows them (HighlightItem.tsx, Inboxt/inboxt@45f4314):
// it writes them last first (highlightsDOM.ts createHighlightsFromSelection).
func quote(hl *library.Highlight) string {
	var b strings.Builder
	for i := len(hl.Segments) - 1; i >= 0; i-- {
		t := hl.Segments[i].Text
		if b.Len() > 0 && t != "" && !strings.HasSuffix(b.String(), " ") && !strings.HasPrefix(t, " ") {
			b.WriteString(" ")
		}
		b.WriteString(t)
	}
	return b.String()
}

// isMemberError reports whether err is the member's mistake (a cursor or
// a value the library refuses), said in plain words.
func isMemberError(err error) bool {
	var inv *storage.InvalidError
	return errors.As(err, &inv)
}

// serveHelp explains the search syntax (the API's).
func (h *Handler) serveHelp(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "How to search", helpTmpl, nil, false)
}
