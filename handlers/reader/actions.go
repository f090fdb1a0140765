package reader

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// maxUndo bounds the items one undo puts back (a page's worth and more).
const maxUndo = 100

// returnURL is where a form goes back to: its return field when that is a
// library page, else the inbox.
func returnURL(r *http.Request) string {
	ret := r.PostFormValue("return")
	if ret == "" || len(ret) > 4096 || !strings.HasPrefix(ret, Path) || strings.ContainsAny(ret, "\\\r\n") {
		return Path
	}
	u, err := url.Parse(ret)
	if err != nil || u.Scheme != "" || u.Host != "" || !(u.Path == Path || strings.HasPrefix(u.Path, Path+"/")) {
		return Path
	}
	return ret
}

// withOutcome adds what was done (and how to undo it) to a library URL,
// for the notice the next page shows.
func withOutcome(ret, done, undo string) string {
	u, err := url.Parse(ret)
	if err != nil {
		return Path
	}
	v := u.Query()
	v.Del("done")
	v.Del("undo")
	if done != "" {
		v.Set("done", done)
	}
	if undo != "" {
		v.Set("undo", undo)
	}
	u.RawQuery = v.Encode()
	return u.String()
}

// statusCode and statusOf write an item's status in an undo token.
var statusCode = map[string]string{library.StatusActive: "A", library.StatusArchived: "R"}

func statusOf(code string) (string, bool) {
	for s, c := range statusCode {
		if c == code {
			return s, true
		}
	}
	return "", false
}

// serveBulk applies one action of the library or the reader to the
// selected items (the form's id fields): archive, unarchive, trash,
// restore, undo (a trash), read, unread, label-add, label-remove, labels
// (set), delete (forever, from the trash).
func (h *Handler) serveBulk(w http.ResponseWriter, r *http.Request, m *members.Member) {
	if !h.pages.ParseForm(w, r) {
		return
	}
	ctx := r.Context()
	lib := library.Of(h.store)
	ids := r.PostForm["id"]
	action := r.PostFormValue("action")
	if len(ids) == 0 && action != "undo" {
		h.fail(w, r, http.StatusBadRequest, "Nothing selected", "Select one or more items first, then choose what to do with them.")
		return
	}
	if len(ids) > library.MaxBatchIDs {
		h.fail(w, r, http.StatusBadRequest, "Too many items", "Choose at most "+strconv.Itoa(library.MaxBatchIDs)+" items at once.")
		return
	}
	var done, undo string
	var err error
	switch action {
	case "archive":
		_, err = lib.SetItemsStatus(ctx, m.ID, ids, library.StatusArchived)
		done = "archived"
	case "unarchive", "restore":
		_, err = lib.SetItemsStatus(ctx, m.ID, ids, library.StatusActive)
		done = map[string]string{"unarchive": "unarchived", "restore": "restored"}[action]
	case "trash":
		var items []*library.SavedItem
		if items, err = lib.SavedItems(ctx, m.ID, ids); err == nil {
			if _, err = lib.SetItemsStatus(ctx, m.ID, ids, library.StatusDeleted); err == nil {
				undo = undoToken(items)
			}
		}
		done = "trashed"
	case "undo":
		err = h.undo(r, m.ID, r.PostFormValue("undo"))
		done = "restored"
	case "read", "unread":
		_, err = lib.SetItemsRead(ctx, m.ID, ids, action == "read")
		done = action
	case "label-add", "label-remove":
		label := r.PostFormValue("label")
		if label == "" {
			h.fail(w, r, http.StatusBadRequest, "No label chosen", "Choose a label, then add it or remove it.")
			return
		}
		c := library.LabelChange{}
		if action == "label-add" {
			c.Add = []string{label}
		} else {
			c.Remove = []string{label}
		}
		_, err = lib.SetItemLabels(ctx, m.ID, ids, c)
		done = "labelled"
	case "labels":
		set := append([]string{}, r.PostForm["label"]...)
		var id string
		var made bool
		if id, made, err = h.newLabel(r, m.ID); err == nil {
			if id != "" {
				set = append(set, id)
			}
			_, err = lib.SetItemLabels(ctx, m.ID, ids, library.LabelChange{Set: &set})
			if err != nil && made {
				// A refused form changes nothing: the label made for
				// it goes, unless another request has found it by its
				// name and put it on an item meanwhile.
				_, _ = lib.DeleteUnusedLabel(ctx, m.ID, id)
			}
		}
		done = "labelled"
	case "delete":
		err = lib.PermanentlyDeleteItems(ctx, m.ID, ids)
		done = "deleted"
	default:
		h.unknownAction(w, r)
		return
	}
	h.answerAction(w, r, err, map[string]string{"done": done, "undo": undo}, withOutcome(returnURL(r), done, undo))
}

// unknownAction refuses a form whose action the library does not know.
func (h *Handler) unknownAction(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, http.StatusBadRequest, "Unknown action", "That action is not one the library knows. Reload the page and try again.")
}

// answerAction ends a form action: the store's refusal or failure
// (storeError), else v as JSON to the script (which asks for JSON), else
// a redirect to back, the page the form came from.
func (h *Handler) answerAction(w http.ResponseWriter, r *http.Request, err error, v any, back string) {
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, v)
		return
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// newLabelColor is the colour of labels made in the reader (the API
// requires one; apps may change it).
const newLabelColor = "#7a6a5a"

// newLabel returns the id of the label named in the form's new_label (made
// if the member has none of that name, and then made is true), or "" when
// it is empty.
func (h *Handler) newLabel(r *http.Request, memberID string) (id string, made bool, err error) {
	name := strings.TrimSpace(r.PostFormValue("new_label"))
	if name == "" {
		return "", false, nil
	}
	lib := library.Of(h.store)
	labels, err := lib.Labels(r.Context(), memberID)
	if err != nil {
		return "", false, err
	}
	for _, l := range labels {
		if strings.EqualFold(l.Name, name) {
			return l.ID, false, nil
		}
	}
	l, err := lib.CreateLabel(r.Context(), memberID, name, newLabelColor)
	if err != nil {
		return "", false, err
	}
	return l.ID, true, nil
}

// undoToken records the statuses items had before a move to the trash:
// id:A (inbox) or id:R (archive), comma-separated.
func undoToken(items []*library.SavedItem) string {
	var parts []string
	for _, it := range items {
		if c, ok := statusCode[it.Status]; ok && len(parts) < maxUndo {
			parts = append(parts, it.ID+":"+c)
		}
	}
	return strings.Join(parts, ",")
}

// undo puts items back where an undo token says they were.
func (h *Handler) undo(r *http.Request, memberID, token string) error {
	parts := strings.Split(token, ",")
	if token == "" || len(parts) > maxUndo {
		return storage.Invalid("there is nothing to undo")
	}
	status := make(map[string]string, len(parts))
	for _, p := range parts {
		id, code, _ := strings.Cut(p, ":")
		st, ok := statusOf(code)
		if !ok || !storage.IsID(id) {
			return storage.Invalid("there is nothing to undo")
		}
		status[id] = st
	}
	// One change: an item the member does not have refuses the whole
	// undo, and a store that stops taking writes midway leaves none of it.
	_, err := library.Of(h.store).RestoreItemsStatus(r.Context(), memberID, status)
	return err
}

// serveProgress records how far the member has read (0 to 100), posted by
// the script as the member scrolls.
func (h *Handler) serveProgress(w http.ResponseWriter, r *http.Request, m *members.Member, id string) {
	if !h.pages.ParseForm(w, r) {
		return
	}
	p, err := strconv.ParseFloat(r.PostFormValue("progress"), 64)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Not changed", "progress must be a number from 0 to 100.")
		return
	}
	_, err = library.Of(h.store).UpdateReadingProgress(r.Context(), m.ID, id, p)
	h.answerAction(w, r, err, map[string]float64{"readingProgress": p}, returnURL(r))
}

// segmentJSON is a highlight segment as Inboxt's web app sends it to
// createHighlight (CreateHighlightSegmentInput).
type segmentJSON struct {
	XPath       string `json:"xpath"`
	StartOffset int    `json:"startOffset"`
	EndOffset   int    `json:"endOffset"`
	Text        string `json:"text"`
	BeforeText  string `json:"beforeText"`
	AfterText   string `json:"afterText"`
}

type highlightJSON struct {
	ID       string        `json:"id"`
	Note     string        `json:"note"`
	Quote    string        `json:"quote,omitempty"`
	Segments []segmentJSON `json:"segments"`
}

func toSegmentsJSON(segs []library.HighlightSegment) []segmentJSON {
	out := make([]segmentJSON, len(segs))
	for i, s := range segs {
		out[i] = segmentJSON{XPath: s.XPath, StartOffset: s.StartOffset, EndOffset: s.EndOffset, Text: s.Text,
			BeforeText: s.BeforeText, AfterText: s.AfterText}
	}
	return out
}

// createHighlight stores a highlight the script made from a selection:
// its segments in the shape of Inboxt's web app, and a note.
func (h *Handler) createHighlight(w http.ResponseWriter, r *http.Request, m *members.Member, itemID string) {
	var in highlightJSON
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "the highlight is too long"})
			return
		}
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the highlight could not be read"})
		return
	}
	segs := make([]library.HighlightSegment, len(in.Segments))
	for i, s := range in.Segments {
		segs[i] = library.HighlightSegment{XPath: s.XPath, StartOffset: s.StartOffset, EndOffset: s.EndOffset,
			Text: s.Text, BeforeText: s.BeforeText, AfterText: s.AfterText}
	}
	hl, err := library.Of(h.store).CreateHighlight(r.Context(), m.ID, itemID, segs, in.Note)
	if err != nil {
		r.Header.Set("Accept", "application/json")
		h.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, highlightJSON{ID: hl.ID, Note: hl.Note, Quote: quote(hl), Segments: toSegmentsJSON(hl.Segments)})
}

// serveHighlight changes a highlight's note (action=note) or deletes it
// (action=delete).
func (h *Handler) serveHighlight(w http.ResponseWriter, r *http.Request, m *members.Member, id string) {
	if !h.pages.ParseForm(w, r) {
		return
	}
	lib := library.Of(h.store)
	var err error
	done := ""
	switch r.PostFormValue("action") {
	case "note":
		_, err = lib.SetHighlightNote(r.Context(), m.ID, id, r.PostFormValue("note"))
		done = "note"
	case "delete":
		err = lib.DeleteHighlights(r.Context(), m.ID, []string{id})
		done = "unhighlighted"
	default:
		h.unknownAction(w, r)
		return
	}
	h.answerAction(w, r, err, map[string]string{"done": done}, withOutcome(returnURL(r), done, "")+"#highlights")
}

// servePrefs keeps the member's text settings.
func (h *Handler) servePrefs(w http.ResponseWriter, r *http.Request, m *members.Member) {
	if !h.pages.ParseForm(w, r) {
		return
	}
	step := func(name string) int {
		n, _ := strconv.Atoi(r.PostFormValue(name))
		return n
	}
	p := library.ReaderPrefs{Size: step("size"), Width: step("width"), Height: step("height"),
		Font: r.PostFormValue("font"), Theme: r.PostFormValue("theme")}
	err := library.Of(h.store).SetReaderPrefs(r.Context(), m.ID, p)
	h.answerAction(w, r, err, p, withOutcome(returnURL(r), "", ""))
}
