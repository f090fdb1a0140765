package directory

import (
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// BrowsePath is the page where people browse the directory.
const BrowsePath = "/directory"

// Limits of the browse page.
const (
	browsePageSize   = 50
	maxBrowseQuery   = 100 // characters of the search box
	browseCapChoices = 50  // capabilities offered in the filter, most common first
)

var browseTemplate = template.Must(template.ParseFS(templateFS, "templates/browse.html"))

// BrowsePath returns the path of the browse page, "" when the document is
// served there (Options.Path /directory) and the page is not.
func (d *Directory) BrowsePath() string {
	if d.opts.Path == BrowsePath {
		return ""
	}
	return BrowsePath
}

// browseList is the document's agents decoded once per document (by ETag),
// with the capabilities offered in the filter.
type browseList struct {
	etag    string
	entries []Entry
	caps    []string
	// lower holds each entry's searched text in lower case, made once per
	// document: a search reads every entry, and lowering them on each
	// request cost allocations in proportion to the directory.
	lower []entryText
}

// entryText is an Entry's searched text in lower case.
type entryText struct {
	name, purpose, operator string
	caps                    []string
}

func lowerText(e *Entry) entryText {
	t := entryText{name: strings.ToLower(e.Name), purpose: strings.ToLower(e.Purpose), caps: make([]string, len(e.Capabilities))}
	if e.Operator != nil {
		t.operator = strings.ToLower(*e.Operator)
	}
	for i, c := range e.Capabilities {
		t.caps[i] = strings.ToLower(c)
	}
	return t
}

// browseEntries returns the agents of the document served now. The page
// reads the same document as /directory.json, on every node alike.
func (d *Directory) browseEntries() (*browseList, error) {
	doc := d.doc.Load()
	if l := d.browse.Load(); l != nil && l.etag == doc.etag {
		return l, nil
	}
	// One decode per document, however many requests ask at once.
	d.browseMu.Lock()
	defer d.browseMu.Unlock()
	if l := d.browse.Load(); l != nil && l.etag == doc.etag {
		return l, nil
	}
	var parsed Document
	if err := json.NewDecoder(doc.reader()).Decode(&parsed); err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, e := range parsed.Agents {
		for _, c := range e.Capabilities {
			counts[c]++
		}
	}
	caps := make([]string, 0, len(counts))
	for c := range counts {
		caps = append(caps, c)
	}
	slices.SortFunc(caps, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	caps = caps[:min(len(caps), browseCapChoices)]
	slices.Sort(caps)
	l := &browseList{etag: doc.etag, entries: parsed.Agents, caps: caps, lower: make([]entryText, len(parsed.Agents))}
	for i := range parsed.Agents {
		l.lower[i] = lowerText(&parsed.Agents[i])
	}
	d.browse.Store(l)
	return l, nil
}

type browseChoice struct {
	Value, Label string
	Selected     bool
}

type browseRow struct {
	Entry
	URL       string
	LevelName string
}

type browseView struct {
	Path, DocumentPath string
	Q, Capability      string
	Levels, Caps       []browseChoice
	Filtered           bool
	Total, Matches     int
	Rows               []browseRow
	Page, Pages        int
	Prev, Next         string
}

// serveBrowse serves the browse page: the document's agents, filtered by
// level, capability and a search over name, purpose, operator,
// capabilities and key, 50 to a page.
func (d *Directory) serveBrowse(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	list, err := d.browseEntries()
	if err != nil {
		d.logStoreFailure("browse page", err)
		writeStoreFailure(w, err, "error: could not read the directory; try again")
		return
	}
	q := r.URL.Query()
	v := browseView{Path: BrowsePath, DocumentPath: d.opts.Path, Total: len(list.entries)}
	v.Q = strings.TrimSpace(q.Get("q"))
	if utf8.RuneCountInString(v.Q) > maxBrowseQuery {
		v.Q = string([]rune(v.Q)[:maxBrowseQuery])
	}
	level := -1
	if n, err := strconv.Atoi(q.Get("level")); err == nil && n >= 0 && n < len(levelNames) {
		level = n
	}
	v.Capability = strings.TrimSpace(q.Get("capability"))
	if len(v.Capability) > 4*MaxCapabilityLen {
		v.Capability = ""
	}
	v.Levels = []browseChoice{{Value: "", Label: "Any level", Selected: level < 0}}
	for i := len(levelNames) - 1; i >= 0; i-- {
		v.Levels = append(v.Levels, browseChoice{Value: strconv.Itoa(i), Label: strconv.Itoa(i) + " · " + levelNames[i], Selected: level == i})
	}
	v.Caps = []browseChoice{{Value: "", Label: "Any capability", Selected: v.Capability == ""}}
	for _, c := range list.caps {
		v.Caps = append(v.Caps, browseChoice{Value: c, Label: c, Selected: c == v.Capability})
	}
	if v.Capability != "" && !slices.Contains(list.caps, v.Capability) {
		v.Caps = append(v.Caps, browseChoice{Value: v.Capability, Label: v.Capability, Selected: true})
	}
	v.Filtered = v.Q != "" || level >= 0 || v.Capability != ""

	needle := strings.ToLower(v.Q)
	var match []int
	for i := range list.entries {
		e := &list.entries[i]
		if (level < 0 || e.Level == level) && (v.Capability == "" || slices.Contains(e.Capabilities, v.Capability)) &&
			(needle == "" || entryMatches(e, &list.lower[i], needle)) {
			match = append(match, i)
		}
	}
	v.Matches = len(match)
	v.Pages = max(1, (len(match)+browsePageSize-1)/browsePageSize)
	v.Page = 1
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n >= 1 {
		v.Page = min(n, v.Pages)
	}
	for _, i := range match[min(len(match), (v.Page-1)*browsePageSize):min(len(match), v.Page*browsePageSize)] {
		e := list.entries[i]
		v.Rows = append(v.Rows, browseRow{Entry: e, URL: ProfilePrefix + e.Npub, LevelName: levelNames[e.Level]})
	}
	page := func(n int) string {
		p := url.Values{}
		if v.Q != "" {
			p.Set("q", v.Q)
		}
		if level >= 0 {
			p.Set("level", strconv.Itoa(level))
		}
		if v.Capability != "" {
			p.Set("capability", v.Capability)
		}
		if n > 1 {
			p.Set("page", strconv.Itoa(n))
		}
		if len(p) == 0 {
			return BrowsePath
		}
		return BrowsePath + "?" + p.Encode()
	}
	if v.Page > 1 {
		v.Prev = page(v.Page - 1)
	}
	if v.Page < v.Pages {
		v.Next = page(v.Page + 1)
	}
	cache := "public, max-age=" + strconv.Itoa(int(d.opts.MaxAge/time.Second))
	d.opts.Pages.RenderPublicSearch(w, r, http.StatusOK, cache, "Agent directory", browseTemplate, v)
}

// entryMatches reports whether needle (lowercase) is in e's name, purpose,
// operator or a capability (t, e's text in lower case), or starts its npub
// or hex key.
func entryMatches(e *Entry, t *entryText, needle string) bool {
	if strings.HasPrefix(e.Npub, needle) || strings.HasPrefix(e.Pubkey, needle) ||
		strings.Contains(t.name, needle) || strings.Contains(t.purpose, needle) || strings.Contains(t.operator, needle) {
		return true
	}
	for _, c := range t.caps {
		if strings.Contains(c, needle) {
			return true
		}
	}
	return false
}
