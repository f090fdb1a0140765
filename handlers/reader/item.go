package reader

import (
	"bytes"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

type labelChoice struct {
	ID, Name string
	Checked  bool
}

type itemHighlight struct {
	ID, Quote, Note string
	// Segments is the highlight's segments as JSON, for the script that
	// marks them in the text.
	Segments string
}

type itemData struct {
	Item                *library.SavedItem
	Title, Site, Sender string
	Minutes, Progress   int
	Saved               time.Time
	Content             template.HTML
	Labels              []labelChoice
	HasLabels           bool
	Highlights          []itemHighlight
	Prefs               library.ReaderPrefs
	Classes             string
	ListURL, Self       string
	PrevURL, NextURL    string
	Notice              string
	Archived, Trashed   bool
	Read                bool
	PrefsHTML           template.HTML // the text settings' menus (prefsHTML)
	MaxLabel            int
}

// prefSelect is one menu of the text settings.
type prefSelect struct {
	Name, Label string
	Options     []prefOption
}

type prefOption struct {
	Value, Label string
	Selected     bool
}

// prefSelects are the text settings' menus, with p's choices selected.
func prefSelects(p library.ReaderPrefs) []prefSelect {
	steps := func(n, cur int) []prefOption {
		o := make([]prefOption, n)
		for i := range o {
			o[i] = prefOption{Value: strconv.Itoa(i), Label: "Step " + strconv.Itoa(i), Selected: i == cur}
		}
		o[0].Label = "Normal"
		return o
	}
	named := func(cur string, pairs ...string) []prefOption {
		o := make([]prefOption, 0, len(pairs)/2)
		for i := 0; i < len(pairs); i += 2 {
			o = append(o, prefOption{Value: pairs[i], Label: pairs[i+1], Selected: pairs[i] == cur})
		}
		return o
	}
	return []prefSelect{
		{"size", "Size", steps(library.MaxReaderPrefStep+1, p.Size)},
		{"width", "Line width", named(strconv.Itoa(p.Width), "0", "Normal", "1", "Narrow", "2", "Wide", "3", "Full")},
		{"height", "Line height", steps(4, p.Height)},
		{"font", "Font", named(p.Font, "", "Sans-serif", "serif", "Serif")},
		{"theme", "Theme", named(p.Theme, "", "As the system", "light", "Light", "dark", "Dark")},
	}
}

// prefsMenuCache holds the text settings' menus written for each
// combination of settings met, the same for every member with those
// settings; only the combinations the library accepts (1,296) are kept.
var prefsMenuCache sync.Map // library.ReaderPrefs → template.HTML

// prefsMenus is prefsHTML(prefSelects(p)), written once per settings.
func prefsMenus(p library.ReaderPrefs) template.HTML {
	if h, ok := prefsMenuCache.Load(p); ok {
		return h.(template.HTML)
	}
	h := prefsHTML(prefSelects(p))
	steps := func(v int) bool { return v >= 0 && v <= library.MaxReaderPrefStep }
	if steps(p.Size) && steps(p.Width) && steps(p.Height) && (p.Font == "" || p.Font == "serif") &&
		(p.Theme == "" || p.Theme == "light" || p.Theme == "dark") {
		prefsMenuCache.Store(p, h)
	}
	return h
}

// serveItem is the reader view of one item.
func (h *Handler) serveItem(w http.ResponseWriter, r *http.Request, m *members.Member, id string) {
	ctx := r.Context()
	lib := library.Of(h.store)
	it, err := lib.SavedItem(ctx, m.ID, id)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	content, err := lib.ItemHTML(ctx, m.ID, id)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	var images []library.ItemImage
	if articles.HasTag(content, "img") {
		if images, err = lib.ItemImages(ctx, m.ID, id); err != nil {
			h.storeError(w, r, err)
			return
		}
	}
	labels, err := lib.Labels(ctx, m.ID)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	// Most items have no highlight: their count, kept with the item (as
	// the Highlights view and has:highlights read it), spares the scan.
	var hls []*library.Highlight
	if it.HighlightCount > 0 {
		if hls, err = lib.ItemHighlights(ctx, m.ID, id); err != nil {
			h.storeError(w, r, err)
			return
		}
	}
	prefs, err := lib.ReaderPrefs(ctx, m.ID)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	st := stateOf(r)
	st.After = ""
	d := itemData{Item: it, Title: it.Title, Site: it.SourceDomain, Minutes: minutes(it.WordCount),
		Progress: int(it.ReadingProgress), Saved: it.CreatedAt,
		// The content was sanitised when it was saved (handlers/articles'
		// sanitiser); the page's policy runs no script it might still hold.
		Content: template.HTML(readerContent(content, id, it.OriginalURL, images)),
		Prefs:   prefs, Classes: prefClasses(prefs), ListURL: st.URL(), Self: st.itemURL(id),
		Archived: it.Status == library.StatusArchived, Trashed: it.Status == library.StatusDeleted,
		Read: it.ReadAt != nil, PrefsHTML: prefsMenus(prefs), MaxLabel: library.MaxLabelNameLen}
	if d.Title == "" {
		d.Title = it.OriginalURL
	}
	if it.Type == library.TypeNewsletter {
		d.Sender = it.FromName
		if d.Sender == "" {
			d.Sender = it.FromAddress
		}
	}
	has := map[string]bool{}
	for _, l := range it.LabelIDs {
		has[l] = true
	}
	for _, l := range labels {
		d.Labels = append(d.Labels, labelChoice{ID: l.ID, Name: l.Name, Checked: has[l.ID]})
		d.HasLabels = d.HasLabels || has[l.ID]
	}
	for _, hl := range hls {
		b, _ := json.Marshal(toSegmentsJSON(hl.Segments))
		d.Highlights = append(d.Highlights, itemHighlight{ID: hl.ID, Quote: quote(hl), Note: hl.Note, Segments: string(b)})
	}
	// Next and previous follow the view the member came from, in its
	// order. They are found when followed (serveNeighbour): finding them
	// here took two page queries on every view of the page.
	items := st.Q == DefaultQuery // the inbox, without parsing it again
	if !items {
		q, _, err := st.parse()
		items = err == nil && !q.Highlights
	}
	if items {
		d.NextURL, d.PrevURL = st.neighbourURL(id, "next"), st.neighbourURL(id, "previous")
	}
	d.Notice = notices[r.FormValue("done")]
	h.renderHTML(w, r, http.StatusOK, d.Title, func(b *bytes.Buffer) { writeItem(b, &d) })
}

// prefClasses are the reader's classes for the member's text settings
// (classes, not style attributes: the policy allows no inline style).
func prefClasses(p library.ReaderPrefs) string {
	c := "reader size-" + itoa(p.Size) + " width-" + itoa(p.Width) + " lh-" + itoa(p.Height)
	if p.Font == "serif" {
		c += " serif"
	}
	if p.Theme != "" {
		c += " theme-" + p.Theme
	}
	return c
}

func itoa(n int) string { return string(rune('0' + n%10)) }

// neighbourURL is the link to the item after (dir "next") or before
// ("previous") the item id in the view of s, which serveNeighbour answers.
func (s listState) neighbourURL(id, dir string) string {
	return itemPath(id) + "/" + dir + s.itemQuery()
}

// serveNeighbour sends the member to the item after or before the item id
// in the view of r's query and sort: the item's neighbour in that list,
// found from the item itself (the API's after takes an item id). At either
// end of the list, or when the item is not in the view, the member stays
// on the item, told there is no other.
func (h *Handler) serveNeighbour(w http.ResponseWriter, r *http.Request, m *members.Member, id string, previous bool) {
	st := stateOf(r)
	st.After = ""
	none := "last"
	if previous {
		none = "first"
	}
	q, p, err := st.parse()
	if err != nil || q.Highlights {
		http.Redirect(w, r, withOutcome(st.itemURL(id), none, ""), http.StatusSeeOther)
		return
	}
	p.First, p.After = 1, id
	if previous {
		p.Desc = !p.Desc
	}
	page, err := library.Of(h.store).SavedItemsPage(r.Context(), m.ID, q.Filter, p)
	switch {
	case err != nil && !isMemberError(err) && !errors.Is(err, storage.ErrNotFound):
		h.storeError(w, r, err)
	case err != nil || len(page.Items) == 0:
		http.Redirect(w, r, withOutcome(st.itemURL(id), none, ""), http.StatusSeeOther)
	default:
		http.Redirect(w, r, st.itemURL(page.Items[0].ID), http.StatusSeeOther)
	}
}
