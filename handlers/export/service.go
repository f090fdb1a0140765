// Package export gives a member's library back out: the Export settings
// page and GET /api/export (a zip of saved_items.json, labels.json and a
// Markdown file per item with its images), GET /api/export/epub (an EPUB 3
// of one item or of the items a search finds), and the feeds behind a
// member's feed secret (/api/feed/<secret>/atom, an OPDS catalog whose
// acquisition links are books, managed at /api/feeds), and the stored
// images of items (/api/images/<item>/<n>). Everything is
// written while it downloads, from the store, so a library of any size
// never sits in memory.
package export

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// What the routes of this package take (access.Route).
var (
	// The export shows the whole library.
	APIRoute = access.Route{Name: "GET " + APIPath, AnyScope: []string{access.Read}, APITokens: true, Sessions: true}
	// A book shows the items it holds.
	EPUBRoute = access.Route{Name: "GET " + EPUBPath, AnyScope: []string{access.Read}, APITokens: true, Sessions: true}
)

// A Query is a search of the library API's syntax (?q= of a feed, a
// catalog or a book), parsed by Options.ParseQuery.
type Query struct {
	// Highlights: the search asks for highlights (type:highlights), which
	// a feed or a book cannot show.
	Highlights bool
	Filter     library.ItemFilter
	// Field and Desc are the order: the search's sort, or newest first.
	Field library.SortField
	Desc  bool
}

// Options configure Exports; every field but Now and Logger is required.
type Options struct {
	// Gate says who a request to APIPath or EPUBPath acts for, within
	// the API's rate limits.
	Gate *inboxtapi.Gate
	// ParseQuery reads a search; its error is for the member.
	ParseQuery func(q string) (*Query, error)
	// Now is the clock (tests); default time.Now.
	Now    func() time.Time
	Logger *zap.Logger
}

// Exports serves the export routes of one site. Build it with New; it is
// safe for concurrent use.
type Exports struct {
	store *storage.Store
	gate  *inboxtapi.Gate
	parse func(q string) (*Query, error)
	now   func() time.Time
	log   *zap.Logger
}

// exporting holds, by store and member, the zips this process is writing:
// one at a time each (an export reads the whole library, a book of a
// search up to maxEPUBItems items with their images), whichever of a site's
// handlers or configurations (before and after a reload) serves it.
var exporting sync.Map

// exportKey is a key of exporting: a member's export and its book of a
// search are written one at a time each, not one of the two.
type exportKey struct {
	store    *storage.Store
	memberID string
	book     bool
}

// New returns the export routes of a site on store.
func New(store *storage.Store, opts Options) *Exports {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Exports{store: store, gate: opts.Gate, parse: opts.ParseQuery, now: opts.Now, log: opts.Logger}
}

// Handles reports whether r is for the export routes: APIPath, EPUBPath,
// FeedsAPIPath, the feeds under FeedPath and the stored images under
// ImageAPIPath (the settings page is served by the member pages, Page).
func (x *Exports) Handles(r *http.Request) bool {
	return r.URL.Path == APIPath || r.URL.Path == EPUBPath || r.URL.Path == FeedsAPIPath || strings.HasPrefix(r.URL.Path, FeedPath) ||
		strings.HasPrefix(r.URL.Path, ImageAPIPath)
}

// ServeHTTP serves the export routes; other paths get 404.
func (x *Exports) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == APIPath:
		// The export zip, as the settings page's download, to any
		// credential that may read the library.
		x.serveGET(w, r, APIRoute, "run an export", shownPath(r.URL.Path), x.serveExport)
	case r.URL.Path == EPUBPath:
		x.serveGET(w, r, EPUBRoute, "make a book", shownPath(r.URL.Path), x.ServeBook)
	case r.URL.Path == FeedsAPIPath:
		x.serveFeedsAPI(w, r)
	case strings.HasPrefix(r.URL.Path, FeedPath):
		x.serveFeed(w, r)
	case strings.HasPrefix(r.URL.Path, ImageAPIPath):
		x.serveGET(w, r, ImageRoute, "read an image", r.URL.Path, x.serveImage)
	default:
		http.NotFound(w, r)
	}
}

// serveGET answers a method other than GET or HEAD with 405, and
// otherwise serve for the member of the caller the gate lets through to
// route (what and path as Gate.RESTCaller's, which answers a refusal).
func (x *Exports) serveGET(w http.ResponseWriter, r *http.Request, route access.Route, what, path string, serve func(http.ResponseWriter, *http.Request, *members.Member)) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		writeRESTError(w, r, http.StatusMethodNotAllowed, "use GET")
		return
	}
	if c := x.gate.RESTCaller(w, r, route, what, path); c != nil {
		serve(w, r, c.Member)
	}
}
