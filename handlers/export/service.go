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
	"archive/zip"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
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
		x.serveExportAPI(w, r)
	case r.URL.Path == EPUBPath:
		x.serveEPUB(w, r)
	case r.URL.Path == FeedsAPIPath:
		x.serveFeedsAPI(w, r)
	case strings.HasPrefix(r.URL.Path, FeedPath):
		x.serveFeed(w, r)
	case strings.HasPrefix(r.URL.Path, ImageAPIPath):
		x.serveImageAPI(w, r)
	default:
		http.NotFound(w, r)
	}
}

// FileName names the export zip of m made at now.
func FileName(m *members.Member, now time.Time) string {
	return fmt.Sprintf("hearth-export-%s-%s.zip", m.Username, now.UTC().Format("2006-01-02"))
}

// WriteZip writes the Export page's zip of m's library to w.
func (x *Exports) WriteZip(ctx context.Context, w io.Writer, m *members.Member) error {
	labels, err := library.Of(x.store).Labels(ctx, m.ID)
	if err != nil {
		return err
	}
	names := make(map[string]string, len(labels))
	for _, l := range labels {
		names[l.ID] = l.Name
	}
	zw := zip.NewWriter(w)
	if err := x.writeExport(ctx, zw, m, labels, names); err != nil {
		return err
	}
	return zw.Close()
}
