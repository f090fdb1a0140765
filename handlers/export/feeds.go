package export

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

const (
	// FeedsAPIPath tells a member their feed URLs (GET), makes or renews
	// their feed secret and shows the URLs with it (POST), or revokes it
	// (DELETE); docs/export.md.
	FeedsAPIPath = "/api/feeds"
	// FeedPath is followed by a member's feed secret and "/atom": an Atom
	// feed of the items a search (?q=, default in:inbox) finds, with their
	// content. The secret is the only credential (feed readers send none),
	// so these requests stay out of the access log.
	FeedPath = "/api/feed/"
	// feedItems bounds a page of a feed; the next page is behind its next
	// link (RFC 5005 section 3).
	feedItems = 50
)

// FeedsRoute tells whether the member has feed URLs; FeedsChangeRoute
// renews or revokes them. A renewal answers URLs that read the library,
// so it needs read as well (serveFeedsAPI).
var (
	FeedsRoute       = access.Route{Name: "GET " + FeedsAPIPath, AnyScope: []string{access.Read}, APITokens: true, Sessions: true}
	FeedsChangeRoute = access.Route{Name: "POST " + FeedsAPIPath, AnyScope: []string{access.Write}, APITokens: true, Sessions: true}
)

// feedsAnswer is the JSON of FeedsAPIPath.
type feedsAnswer struct {
	// Secret is set only in the answer to the POST that made it: only
	// its digest is kept, so the URLs can be shown once.
	Secret    string     `json:"secret,omitempty"`
	CreatedAt *time.Time `json:"created_at"`
	Atom      string     `json:"atom,omitempty"`
	OPDS      string     `json:"opds,omitempty"`
	Help      string     `json:"help"`
}

const feedsHelp = "the feed URLs hold a secret that is shown only when made: POST " + FeedsAPIPath +
	" makes a new one (the old URLs stop working), DELETE revokes it; add ?label=<name> to the Atom URL for a label, ?q=<search> for any search"

// serveFeedsAPI serves FeedsAPIPath.
func (x *Exports) serveFeedsAPI(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeRESTError(w, r, http.StatusMethodNotAllowed, "use GET, POST or DELETE")
		return
	}
	route := FeedsRoute
	if r.Method != http.MethodGet {
		route = FeedsChangeRoute
	}
	c := x.gate.RESTCaller(w, r, route, "show feeds", shownPath(r.URL.Path))
	if c == nil {
		return
	}
	if r.Method == http.MethodPost && !c.Allows(access.Read) {
		writeRESTError(w, r, http.StatusForbidden, "the feed URLs show the library: making them needs the read scope too")
		return
	}
	tokens := apitokens.Of(x.store)
	out := feedsAnswer{Help: feedsHelp}
	switch r.Method {
	case http.MethodPost:
		secret, err := tokens.RenewFeedSecret(r.Context(), c.Member.ID)
		if err != nil {
			x.feedsFailed(w, r, err)
			return
		}
		now := time.Now().UTC()
		out.Secret, out.CreatedAt = secret, &now
		out.Atom, out.OPDS = FeedURLs(inboxtapi.SiteURL(r), secret)
	case http.MethodDelete:
		err := tokens.RevokeFeedSecret(r.Context(), c.Member.ID)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			x.feedsFailed(w, r, err)
			return
		}
	default:
		fs, err := tokens.FeedSecretInfo(r.Context(), c.Member.ID)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			x.feedsFailed(w, r, err)
			return
		}
		if fs != nil {
			out.CreatedAt = &fs.CreatedAt
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}

// FeedURLs returns the Atom and OPDS URLs of a feed secret on site.
func FeedURLs(site, secret string) (atom, opds string) {
	return site + FeedPath + secret + "/atom", site + FeedPath + secret + "/opds"
}

func (x *Exports) feedsFailed(w http.ResponseWriter, r *http.Request, err error) {
	x.restFailed(w, r, err, "feed", "the store cannot do this now ("+err.Error()+"); try again later", "the feed could not be read; try again")
}

// feedMember returns the member of a feed URL and what follows the secret
// ("atom", "opds", …), or answers 404 (the same for an unknown secret and
// a suspended member, so the URL reveals nothing) or 429 past the client
// address's budget and returns nil.
func (x *Exports) feedMember(w http.ResponseWriter, r *http.Request) (*members.Member, string) {
	secret, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, FeedPath), "/")
	if !x.feedRequest(w, r) {
		return nil, ""
	}
	m, err := apitokens.Of(x.store).FeedMember(r.Context(), secret)
	if apitokens.Unknown(err) {
		writeRESTError(w, r, http.StatusNotFound, "unknown feed")
		return nil, ""
	}
	if err != nil {
		x.feedsFailed(w, r, err)
		return nil, ""
	}
	return m, rest
}

// feedRequest answers a request of FeedPath that is no GET or HEAD, or
// past its client address's budget, and reports whether it may go on.
func (x *Exports) feedRequest(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeRESTError(w, r, http.StatusMethodNotAllowed, "use GET")
		return false
	}
	// The secret (or an image's signature) is the request's only
	// credential: every request counts against its client address's
	// tokenless budget, as the API's requests without a token do, so
	// neither guessing secrets nor fetching a leaked one's books is free.
	if retry, ok := x.gate.Limit(w.Header(), r, nil); !ok {
		writeRESTError(w, r, http.StatusTooManyRequests, (&inboxtapi.LimitError{RetryAfter: retry}).Error())
		return false
	}
	return true
}

// serveFeed serves FeedPath.
func (x *Exports) serveFeed(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, signedImagePath) {
		x.serveSignedImage(w, r)
		return
	}
	m, rest := x.feedMember(w, r)
	if m == nil {
		return
	}
	switch rest {
	case "atom":
		x.serveAtom(w, r, m)
	case "opds":
		x.serveOPDS(w, r, m)
	case "epub":
		x.ServeBook(w, r, m)
	default:
		writeRESTError(w, r, http.StatusNotFound, "no such feed: use atom, opds or epub")
	}
}

// The Atom document (RFC 4287) of a feed.
type atomFeed struct {
	XMLName xml.Name    `xml:"http://www.w3.org/2005/Atom feed"`
	ID      string      `xml:"id"`
	Title   string      `xml:"title"`
	Updated string      `xml:"updated"`
	Author  atomPerson  `xml:"author"`
	Links   []atomLink  `xml:"link"`
	Entries []atomEntry `xml:"entry"`
}

type atomPerson struct {
	Name string `xml:"name"`
}

type atomLink struct {
	Rel  string `xml:"rel,attr,omitempty"`
	Type string `xml:"type,attr,omitempty"`
	Href string `xml:"href,attr"`
}

type atomText struct {
	Type string `xml:"type,attr,omitempty"`
	Body string `xml:",chardata"`
}

type atomEntry struct {
	ID        string      `xml:"id"`
	Title     string      `xml:"title"`
	Updated   string      `xml:"updated"`
	Published string      `xml:"published,omitempty"`
	Author    *atomPerson `xml:"author,omitempty"`
	Links     []atomLink  `xml:"link"`
	Summary   *atomText   `xml:"summary,omitempty"`
	Content   *atomText   `xml:"content,omitempty"`
}

func atomTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// feedSearch reads the search of a feed, catalog or book request: ?q=
// (def when absent) narrowed to ?label=, a label's exact name, which the
// search syntax cannot always spell (a comma or a quote in the name).
func (x *Exports) feedSearch(r *http.Request, def, what string) (q, label string, srch *Query, err error) {
	q, label = r.URL.Query().Get("q"), r.URL.Query().Get("label")
	if q == "" {
		q = def
	}
	if srch, err = x.parse(q); err != nil {
		return "", "", nil, err
	}
	if srch.Highlights {
		return "", "", nil, errors.New(what + " is made of items: type:highlights lists highlights")
	}
	if label != "" {
		// No label has such a name, and the feed's title, id and links
		// would each repeat it.
		if !library.LabelNameCanBe(label) {
			return "", "", nil, fmt.Errorf("label: a label's name is 1 to %d characters", library.MaxLabelNameLen)
		}
		srch.Filter.LabelsAll = append(srch.Filter.LabelsAll, []string{label})
	}
	return q, label, srch, nil
}

// feedTitle names the search of a feed request.
func feedTitle(q, label string) string {
	switch {
	case label == "":
		return q
	case q == "" || q == "in:inbox":
		return "label " + label
	}
	return q + ", label " + label
}

// feedPage reads the page a feed request asks for of its search
// (feedSearch: def and what as there): the first, or the one after
// ?after=, the cursor of a next link. It answers a bad search or cursor
// itself (ok false).
func (x *Exports) feedPage(w http.ResponseWriter, r *http.Request, m *members.Member, def, what string) (q, label string, page *library.ItemPage, ok bool) {
	q, label, srch, err := x.feedSearch(r, def, what)
	if err != nil {
		writeRESTError(w, r, http.StatusBadRequest, err.Error())
		return "", "", nil, false
	}
	page, err = library.Of(x.store).SavedItemsPage(r.Context(), m.ID, srch.Filter,
		library.PageRequest{Field: srch.Field, Desc: srch.Desc, First: feedItems, After: r.URL.Query().Get("after")})
	if storage.IsInvalid(err) {
		writeRESTError(w, r, http.StatusBadRequest, "after: "+err.Error()+" (use the feed's next link)")
		return "", "", nil, false
	}
	if err != nil {
		x.feedsFailed(w, r, err)
		return "", "", nil, false
	}
	return q, label, page, true
}

// pageLinks are the links of one page of a paged feed (RFC 5005 section
// 3): self, first, and next when there is more; href is the feed's URL
// without a query, kind its media type.
func pageLinks(r *http.Request, href, kind string, page *library.ItemPage) []atomLink {
	v := url.Values{}
	for _, k := range []string{"q", "label"} {
		if x := r.URL.Query().Get(k); x != "" {
			v.Set(k, x)
		}
	}
	at := func(v url.Values) string {
		if len(v) == 0 {
			return href
		}
		return href + "?" + v.Encode()
	}
	links := []atomLink{{Rel: "first", Type: kind, Href: at(v)}}
	self := url.Values{}
	for k, x := range v {
		self[k] = x
	}
	if a := r.URL.Query().Get("after"); a != "" {
		self.Set("after", a)
	}
	links = append(links, atomLink{Rel: "self", Type: kind, Href: at(self)})
	if next := page.NextAfter(); next != "" {
		v.Set("after", next)
		links = append(links, atomLink{Rel: "next", Type: kind, Href: at(v)})
	}
	return links
}

// serveAtom serves the Atom feed of the search ?q= (default in:inbox) and
// ?label=: its items with their content, feedItems a page, newest first.
func (x *Exports) serveAtom(w http.ResponseWriter, r *http.Request, m *members.Member) {
	q, label, page, ok := x.feedPage(w, r, m, "in:inbox", "a feed")
	if !ok {
		return
	}
	site := inboxtapi.SiteURL(r)
	secret, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, FeedPath), "/")
	id := "tag:" + hostOf(site) + ",2024:feed:" + m.ID + ":" + url.QueryEscape(q)
	if label != "" {
		id += ":label:" + url.QueryEscape(label)
	}
	feed := atomFeed{
		// The id stays the same when the secret is renewed, and on every
		// page (RFC 5005: the pages are one feed).
		ID:     id,
		Title:  "Hearth: " + feedTitle(q, label),
		Author: atomPerson{Name: m.Username},
		Links: append([]atomLink{{Rel: "alternate", Type: "text/html", Href: site + "/"}},
			pageLinks(r, site+FeedPath+secret+"/atom", "application/atom+xml", page)...),
	}
	updated := time.Unix(0, 0)
	for _, it := range page.Items {
		if it.UpdatedAt.After(updated) {
			updated = it.UpdatedAt
		}
		e := atomEntry{
			ID:        "tag:" + hostOf(site) + ",2024:item:" + it.ID,
			Title:     it.Title,
			Updated:   atomTime(it.UpdatedAt),
			Published: atomTime(it.CreatedAt),
		}
		if e.Title == "" {
			e.Title = it.OriginalURL
		}
		if it.Author != "" {
			e.Author = &atomPerson{Name: it.Author}
		}
		if it.OriginalURL != "" {
			e.Links = append(e.Links, atomLink{Rel: "alternate", Type: "text/html", Href: it.OriginalURL})
		}
		if it.Description != "" {
			e.Summary = &atomText{Type: "text", Body: it.Description}
		}
		feed.Entries = append(feed.Entries, e)
	}
	feed.Updated = atomTime(updated)
	w.Header().Set("Content-Type", "application/atom+xml; charset=utf-8")
	if r.Method == http.MethodHead {
		return
	}
	// The entries are written one at a time, each with its content read
	// just before: a page's contents (up to feedItems of
	// library.MaxContentLen each) are never held at once.
	content := func(i int) (*atomText, error) {
		return x.feedContent(r, m, page.Items[i], site, storage.Digest(secret))
	}
	// The first is read before the status line: a store that fails or
	// refuses for now (most often from the first read on) is answered as
	// such, with Retry-After when it says when, not with a feed cut short.
	var first *atomText
	if len(feed.Entries) > 0 {
		var err error
		if first, err = content(0); err != nil {
			x.feedsFailed(w, r, err)
			return
		}
	}
	_, _ = w.Write([]byte(xml.Header))
	enc := xml.NewEncoder(w)
	el := func(name string) xml.StartElement { return xml.StartElement{Name: xml.Name{Local: name}} }
	start := xml.StartElement{Name: xml.Name{Space: "http://www.w3.org/2005/Atom", Local: "feed"}}
	err := enc.EncodeToken(start)
	for _, f := range []struct {
		v    any
		name string
	}{{feed.ID, "id"}, {feed.Title, "title"}, {feed.Updated, "updated"}, {feed.Author, "author"}, {feed.Links, "link"}} {
		if err == nil {
			err = enc.EncodeElement(f.v, el(f.name))
		}
	}
	for i := 0; i < len(feed.Entries) && err == nil; i++ {
		e := feed.Entries[i]
		if e.Content = first; i > 0 {
			if e.Content, err = content(i); err != nil {
				break
			}
		}
		err = enc.EncodeElement(e, el("entry"))
	}
	if err == nil {
		err = enc.EncodeToken(start.End())
	}
	if err == nil {
		err = enc.Flush()
	}
	if err != nil {
		x.log.Warn("feed interrupted", zap.String("member", m.Username), zap.Error(err))
	}
}

// feedContent is an item's content in its feed (nil without HTML), as it
// leaves the site: without tracking pixels, its stored images at their
// addresses on site signed with the key of the feed's secret
// (ImageLinks), its other images at their own addresses.
func (x *Exports) feedContent(r *http.Request, m *members.Member, it *library.SavedItem, site, digest string) (*atomText, error) {
	c, err := library.Of(x.store).ItemContent(r.Context(), m.ID, it.ID)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	if c == nil || c.HTML == "" {
		return nil, nil
	}
	key := apitokens.FeedImageKey(digest)
	files, err := ImageLinks{Site: site, Key: &key}.Files(r.Context(), x.store, m.ID, it.ID, c.HTML)
	if err != nil {
		return nil, err
	}
	return &atomText{Type: "html", Body: articles.RewriteImages(c.HTML, it.OriginalURL, files)}, nil
}

// hostOf returns the host of a site URL (scheme://host).
func hostOf(site string) string {
	_, host, _ := strings.Cut(site, "://")
	host, _, _ = strings.Cut(host, ":")
	return host
}

// The media types of OPDS 1.2 catalogs (specs.opds.io/opds-1.2, section 3).
const (
	opdsNavigation  = "application/atom+xml;profile=opds-catalog;kind=navigation"
	opdsAcquisition = "application/atom+xml;profile=opds-catalog;kind=acquisition"
	opdsAcquire     = "http://opds-spec.org/acquisition"
)

// serveOPDS serves the OPDS 1.2 catalog: without ?q= or ?label= the
// navigation feed of the member's views, labels (by ?label=, whatever
// their name holds) and saved searches; with them the acquisition feed of
// that search: the whole search as one book, then its items each as a
// book, feedItems a page with RFC 5005 links to the next, all links to the
// EPUB export under the same secret.
func (x *Exports) serveOPDS(w http.ResponseWriter, r *http.Request, m *members.Member) {
	site := inboxtapi.SiteURL(r)
	secret, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, FeedPath), "/")
	base := site + FeedPath + secret
	now := atomTime(time.Now())
	id := "tag:" + hostOf(site) + ",2024:opds:" + m.ID
	feed := atomFeed{
		Updated: now,
		Author:  atomPerson{Name: m.Username},
	}
	start := atomLink{Rel: "start", Type: opdsNavigation, Href: base + "/opds"}
	lib := library.Of(x.store)
	q, label := r.URL.Query().Get("q"), r.URL.Query().Get("label")
	if q == "" && label == "" {
		feed.ID, feed.Title = id, "Hearth: "+m.Username
		feed.Links = []atomLink{start, {Rel: "self", Type: opdsNavigation, Href: base + "/opds"}}
		type view struct{ name, q, label string }
		views := []view{{"Inbox", "in:inbox", ""}, {"Archive", "in:archive", ""}, {"Newsletters", "in:inbox type:newsletter", ""}}
		labels, err := lib.Labels(r.Context(), m.ID)
		if err != nil {
			x.feedsFailed(w, r, err)
			return
		}
		for _, l := range labels {
			views = append(views, view{"Label: " + l.Name, "", l.Name})
		}
		saved, err := lib.SavedQueries(r.Context(), m.ID)
		if err != nil {
			x.feedsFailed(w, r, err)
			return
		}
		for _, sq := range saved {
			views = append(views, view{sq.Name, sq.Query, ""})
		}
		for _, v := range views {
			sel := url.Values{}
			if v.q != "" {
				sel.Set("q", v.q)
			}
			if v.label != "" {
				sel.Set("label", v.label)
			}
			feed.Entries = append(feed.Entries, atomEntry{
				ID: id + ":" + url.QueryEscape(v.q) + ":" + url.QueryEscape(v.label), Title: v.name, Updated: now,
				Links:   []atomLink{{Rel: "subsection", Type: opdsAcquisition, Href: base + "/opds?" + sel.Encode()}},
				Content: &atomText{Type: "text", Body: "Books of " + feedTitle(v.q, v.label)},
			})
		}
	} else {
		q, label, page, ok := x.feedPage(w, r, m, "", "a catalog")
		if !ok {
			return
		}
		sel := url.Values{}
		if q != "" {
			sel.Set("q", q)
		}
		if label != "" {
			sel.Set("label", label)
		}
		feed.ID, feed.Title = id+":"+url.QueryEscape(q)+":"+url.QueryEscape(label), feedTitle(q, label)
		feed.Links = append([]atomLink{start}, pageLinks(r, base+"/opds", opdsAcquisition, page)...)
		if r.URL.Query().Get("after") == "" {
			feed.Entries = append(feed.Entries, atomEntry{
				ID: feed.ID + ":all", Title: "All of " + feed.Title, Updated: now, Author: &atomPerson{Name: m.Username},
				Links:   []atomLink{{Rel: opdsAcquire, Type: "application/epub+zip", Href: base + "/epub?" + sel.Encode()}},
				Summary: &atomText{Type: "text", Body: "Every item of the search in one book"},
			})
		}
		for _, it := range page.Items {
			e := atomEntry{
				ID: "tag:" + hostOf(site) + ",2024:item:" + it.ID, Title: it.Title, Updated: atomTime(it.UpdatedAt),
				Published: atomTime(it.CreatedAt),
				Links:     []atomLink{{Rel: opdsAcquire, Type: "application/epub+zip", Href: base + "/epub?id=" + url.QueryEscape(it.ID)}},
			}
			if e.Title == "" {
				e.Title = it.OriginalURL
			}
			if it.Author != "" {
				e.Author = &atomPerson{Name: it.Author}
			}
			if it.Description != "" {
				e.Summary = &atomText{Type: "text", Body: it.Description}
			}
			feed.Entries = append(feed.Entries, e)
		}
	}
	w.Header().Set("Content-Type", opdsNavigation)
	if q != "" || label != "" {
		w.Header().Set("Content-Type", opdsAcquisition)
	}
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(feed)
}

// restFailed answers a store error of a REST route in Inboxt's REST shape:
// busy when the store refused for now (inboxtapi.Refusal: 503 or 507 with
// Retry-After), else 500 with failed, logging err as what.
func (x *Exports) restFailed(w http.ResponseWriter, r *http.Request, err error, what, busy, failed string) {
	if status, _, ok := inboxtapi.Refusal(w, err); ok {
		writeRESTError(w, r, status, busy)
		return
	}
	x.log.Error(what, zap.Error(err))
	writeRESTError(w, r, http.StatusInternalServerError, failed)
}

// writeRESTError answers in Inboxt's REST error shape, naming the request's
// path as shownPath shows it.
func writeRESTError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	inboxtapi.WriteREST(w, status, msg, shownPath(r.URL.Path))
}

// shownPath is the path an error names: a feed URL's secret is its only
// credential, so it is never written back (the response may be kept by a
// feed reader, a proxy or a log that the URL itself stays out of).
func shownPath(p string) string {
	rest, ok := strings.CutPrefix(p, FeedPath)
	if !ok {
		return p
	}
	if signed, ok := strings.CutPrefix(p, signedImagePath); ok {
		// A signed image's address: its credential is its last part.
		return signedImagePath + signed[:strings.LastIndexByte(signed, '/')+1] + "SIGNATURE"
	}
	_, after, _ := strings.Cut(rest, "/")
	return FeedPath + "SECRET/" + after
}
