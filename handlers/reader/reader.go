// Package reader serves the members' library in the browser, under
// /library: the views of saved items (inbox, archive, trash, newsletters,
// highlights, all, one per label and per saved query), search with the
// API's query syntax, the reader view of one item with its highlights, and
// the pages that save a link from the browser (the add form, the confirm
// page of the bookmarklet and of the web app's share target).
//
// Pages are rendered on the server inside the member pages' layout
// (handlers/account) and work without JavaScript: every action is a plain
// form, protected against cross-site posts like the other member pages.
// One small script, embedded and served under a versioned URL, adds
// highlighting, reading progress, keyboard shortcuts and in-place updates.
// Every change goes through the library operations the GraphQL API uses
// (storage/library); nothing here writes a record of its own kind except
// the member's text settings.
package reader

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Path is where the library lives; every page of this package is under it.
const Path = "/library"

// PageSize is how many items a library page lists.
const PageSize = 50

// MaxHighlightBody bounds the JSON body that creates a highlight (up to
// library.MaxSegments segments with their text and context).
const MaxHighlightBody = 1 << 20

// Options configure the library pages.
type Options struct {
	// Pages are the member pages: layout, sessions and form protection.
	Pages *account.Pages
	// SaveURL saves a link for a member as the API's addArticleFromUrl
	// does (libraryservice.Service.SaveURL). Nil: the add form says
	// saving links is not available.
	SaveURL func(ctx context.Context, memberID, rawURL string, labelIDs []string) error
	// Logger receives failures (never content or secrets).
	Logger *zap.Logger
}

// Handler serves the library pages. Build it with New.
type Handler struct {
	store *storage.Store
	pages *account.Pages
	opts  Options
}

// New returns the library pages over store.
func New(store *storage.Store, opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Handler{store: store, pages: opts.Pages, opts: opts}
}

// Handles reports whether r is for one of the library pages.
func (h *Handler) Handles(r *http.Request) bool {
	return r.URL.Path == Path || strings.HasPrefix(r.URL.Path, Path+"/")
}

// ServeHTTP serves the library pages.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, Path)
	// Assets and the manifest are the same for everyone: no session needed.
	switch {
	case strings.HasPrefix(rest, "/assets/"):
		serveAsset(w, r, strings.TrimPrefix(rest, "/assets/"))
		return
	case rest == "/manifest.webmanifest":
		h.serveManifest(w, r)
		return
	}
	if strings.HasPrefix(rest, "/item/") && strings.HasSuffix(rest, "/highlights") {
		// Highlights come as JSON from the script, larger than a form.
		id := strings.TrimSuffix(strings.TrimPrefix(rest, "/item/"), "/highlights")
		h.withMember(w, r, func(w http.ResponseWriter, r *http.Request, m *members.Member) {
			if h.allow(w, r, http.MethodPost) {
				h.createHighlight(w, r, m, id)
			}
		}, false)
		return
	}
	h.withMember(w, r, func(w http.ResponseWriter, r *http.Request, m *members.Member) {
		switch {
		case rest == "" || rest == "/":
			if h.allow(w, r, http.MethodGet) {
				h.serveLibrary(w, r, m)
			}
		case rest == "/help":
			if h.allow(w, r, http.MethodGet) {
				h.serveHelp(w, r)
			}
		case rest == "/items":
			if h.allow(w, r, http.MethodPost) {
				h.serveBulk(w, r, m)
			}
		case rest == "/add":
			if h.allow(w, r, http.MethodGet, http.MethodPost) {
				h.serveAdd(w, r, m)
			}
		case rest == "/prefs":
			if h.allow(w, r, http.MethodPost) {
				h.servePrefs(w, r, m)
			}
		case strings.HasPrefix(rest, "/item/"):
			id, sub, _ := strings.Cut(strings.TrimPrefix(rest, "/item/"), "/")
			switch sub {
			case "":
				if h.allow(w, r, http.MethodGet, http.MethodPost) {
					h.serveItem(w, r, m, id)
				}
			case "next", "previous":
				if h.allow(w, r, http.MethodGet) {
					h.serveNeighbour(w, r, m, id, sub == "previous")
				}
			case "progress":
				if h.allow(w, r, http.MethodPost) {
					h.serveProgress(w, r, m, id)
				}
			default:
				h.notFound(w, r)
			}
		case strings.HasPrefix(rest, "/image/"):
			if h.allow(w, r, http.MethodGet) {
				h.serveImage(w, r, m, strings.TrimPrefix(rest, "/image/"))
			}
		case strings.HasPrefix(rest, "/highlight/"):
			if h.allow(w, r, http.MethodPost) {
				h.serveHighlight(w, r, m, strings.TrimPrefix(rest, "/highlight/"))
			}
		default:
			h.notFound(w, r)
		}
	}, true)
}

// withMember runs fn for the signed-in member behind the member pages'
// cross-origin protection (and, with form, their form size limit); a
// visitor without a session goes to the sign-in page and comes back.
func (h *Handler) withMember(w http.ResponseWriter, r *http.Request, fn func(http.ResponseWriter, *http.Request, *members.Member), form bool) {
	m, ok := h.pages.RequireMember(w, r)
	if !ok {
		return
	}
	r = account.WithMember(r, m)
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fn(w, r, m) })
	if form {
		h.pages.Protect(inner).ServeHTTP(w, r)
		return
	}
	if err := h.pages.CheckCrossOrigin(r); err != nil {
		h.fail(w, r, http.StatusForbidden, "Request refused", "This request was sent from another site, so it was refused. Reload the page and try again.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxHighlightBody)
	inner.ServeHTTP(w, r)
}

// allow reports whether r's method is one of methods; otherwise it
// answers 405.
func (h *Handler) allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m || m == http.MethodGet && r.Method == http.MethodHead {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	h.fail(w, r, http.StatusMethodNotAllowed, "Method not allowed", "This page can't be used that way.")
	return false
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, http.StatusNotFound, "Not found", "There is no page here. Go back to your library.")
}

// message is the data of the message page.
type message struct{ Text string }

// fail answers with a message page, or with the message as JSON to the
// script (which asks for JSON).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, title, text string) {
	if wantsJSON(r) {
		writeJSON(w, status, map[string]string{"error": text})
		return
	}
	h.render(w, r, status, title, messageTmpl, message{Text: text}, false)
}

// storeError answers for an error of the library: the member's mistake in
// plain words, a store that refuses for now with 503 or 507 (a full disk)
// and Retry-After, anything else as a failure that is logged.
func (h *Handler) storeError(w http.ResponseWriter, r *http.Request, err error) {
	var inv *storage.InvalidError
	switch {
	case errors.Is(err, storage.ErrNotFound):
		h.fail(w, r, http.StatusNotFound, "Not found", "That item is not in your library (it may have been deleted).")
	case errors.As(err, &inv):
		h.fail(w, r, http.StatusBadRequest, "Not changed", inv.Msg+".")
	default:
		if status, retry, ok := storage.Unavailable(err); ok {
			if retry > 0 {
				w.Header().Set("Retry-After", retryAfter(retry))
			}
			// The member pages' words: a full disk is not a library
			// that cannot be reached (it still reads).
			h.fail(w, r, status, http.StatusText(status), account.StoreRefusalText(status))
			return
		}
		h.opts.Logger.Error("library page", zap.String("path", r.URL.Path), zap.Error(err))
		h.fail(w, r, http.StatusInternalServerError, "Something went wrong", "This could not be done. Try again later.")
	}
}

// render writes a page in the member pages' layout with the library's
// stylesheet, script and manifest, under a policy that allows them alone.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, title string, t *template.Template, data any, noHeading bool) {
	w.Header().Set("Content-Security-Policy", policy)
	h.pages.RenderWith(w, r, status, title, t, data, account.PageExtras{Head: headTags, Wide: true, NoHeading: noHeading})
}

// renderHTML is render for a page written in Go (write), which starts
// with its own heading.
func (h *Handler) renderHTML(w http.ResponseWriter, r *http.Request, status int, title string, write func(*bytes.Buffer)) {
	w.Header().Set("Content-Security-Policy", policy)
	h.pages.RenderHTML(w, r, status, title, write, account.PageExtras{Head: headTags, Wide: true, NoHeading: true})
}
