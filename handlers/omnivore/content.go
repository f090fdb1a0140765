// Package omnivore serves what Omnivore's clients call beside its GraphQL
// operations (which handlers/graphql serves): the content endpoint the
// Obsidian and Logseq plugins get items' content from, its download links,
// and the content in Omnivore's formats (HTML, Markdown, Markdown with
// ==highlights==), which the API's search answers too. hearth_graphql
// serves it beside the GraphQL API.
package omnivore

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Omnivore's content router (packages/api/src/routers/content_router.ts,
// omnivore-app/omnivore@322ce62), which the Obsidian and Logseq plugins
// call to get items' content: POST {libraryItemIds, format} answers
// {data: [{libraryItemId, downloadUrl}]}, and each downloadUrl serves the
// content once it is ready (404 until then; the plugins poll every
// second).
const (
	// ContentPath is Omnivore's content endpoint.
	ContentPath = "/api/content"
	// ContentDownloadPath is followed by a content link's secret: the URL
	// is a capability, so it is kept out of Caddy's access log as the
	// newsletter inbound URL is.
	ContentDownloadPath = "/api/content/download/"
	// MaxContentIDs is the most item ids of one request (Omnivore's 50).
	MaxContentIDs = 50
	// ContentLinkTTL is how long a download URL works (Omnivore's signed
	// URLs: one hour).
	ContentLinkTTL = time.Hour
	// maxContentRequestBytes bounds the request: 50 ids and a format.
	maxContentRequestBytes = 16 << 10
)

// Route is what POST ContentPath takes (access.Route): it reads items'
// content. The plugins send the API key alone, "Authorization: <key>"
// (getContent in src/api.ts of omnivore-app/obsidian-omnivore @ 619013b
// and omnivore-app/logseq-omnivore @ 0174149, vendored in
// interop/omnivore/plugins): BareAPIKey. The download URLs it answers are
// capabilities of their own (no credentials).
var Route = access.Route{Name: "POST " + ContentPath, AnyScope: []string{access.Read}, APITokens: true, BareAPIKey: true}

// Content serves ContentPath and the download links under
// ContentDownloadPath. Build it with NewContent; it is safe for concurrent
// use.
type Content struct {
	store *storage.Store
	gate  *inboxtapi.Gate
	log   *zap.Logger
}

// NewContent returns the content endpoint on store, taking its callers
// through gate (shared with the GraphQL API and its rate limits).
func NewContent(store *storage.Store, gate *inboxtapi.Gate, logger *zap.Logger) *Content {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Content{store: store, gate: gate, log: logger}
}

// Handles reports whether r is for the content endpoint or a download
// link.
func (s *Content) Handles(r *http.Request) bool {
	return r.URL.Path == ContentPath || strings.HasPrefix(r.URL.Path, ContentDownloadPath)
}

// ServeHTTP serves the content endpoint and the download links.
func (s *Content) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == ContentPath {
		s.serveContent(w, r)
		return
	}
	s.serveDownload(w, r)
}

// writeContentError answers as Omnivore's content router: {errorCode}.
func writeContentError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"errorCode": code})
}

func (s *Content) serveContent(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeContentError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
		return
	}
	c, err := s.gate.Admit(w.Header(), r, Route, inboxtapi.GuestsCounted)
	var limited *inboxtapi.LimitError
	switch {
	case errors.As(err, &limited):
		// The API's answer past its rate limits, as GraphQL's.
		inboxtapi.WriteError(w, http.StatusOK, inboxtapi.CodeTooManyRequests, err.Error())
		return
	case inboxtapi.WriteUnavailable(w, err):
		return
	case access.IsScopeError(err):
		writeContentError(w, http.StatusForbidden, "FORBIDDEN")
		return
	case err != nil || c == nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"UNAUTHORIZED"}`+"\n")
		return
	}
	var in struct {
		LibraryItemIDs []string `json:"libraryItemIds"`
		Format         string   `json:"format"`
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxContentRequestBytes))
	if err != nil || json.Unmarshal(body, &in) != nil || len(in.LibraryItemIDs) == 0 ||
		len(in.LibraryItemIDs) > MaxContentIDs || !ValidFormat(in.Format) {
		writeContentError(w, http.StatusBadRequest, "BAD_REQUEST")
		return
	}
	items, err := library.Of(s.store).SavedItems(r.Context(), c.Member.ID, in.LibraryItemIDs)
	if s.contentFailed(w, err) {
		return
	}
	if len(items) == 0 {
		writeContentError(w, http.StatusNotFound, "NOT_FOUND")
		return
	}
	tokenID := "" // an OAuth token's links show the images at ImageAPIPath
	if c.APIToken != nil {
		tokenID = c.APIToken.ID
	}
	links := make([]apitokens.ContentLink, len(items))
	for i, it := range items {
		links[i] = apitokens.ContentLink{MemberID: c.Member.ID, ItemID: it.ID, Format: in.Format, TokenID: tokenID}
	}
	secrets, err := apitokens.Of(s.store).CreateContentLinks(r.Context(), links, ContentLinkTTL)
	if s.contentFailed(w, err) {
		return
	}
	type entry struct {
		LibraryItemID string `json:"libraryItemId"`
		DownloadURL   string `json:"downloadUrl"`
	}
	out := struct {
		Data []entry `json:"data"`
	}{make([]entry, len(items))}
	site := inboxtapi.SiteURL(r)
	for i, it := range items {
		out.Data[i] = entry{it.ID, site + ContentDownloadPath + secrets[i]}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// contentFailed answers a store error of the content endpoints (503 when
// the store refuses for now, else 500, logged) and reports whether there
// was one.
func (s *Content) contentFailed(w http.ResponseWriter, err error) bool {
	if err == nil {
		return false
	}
	if status, code, ok := inboxtapi.Refusal(w, err); ok {
		writeContentError(w, status, code)
		return true
	}
	s.log.Error("content endpoint", zap.Error(err))
	writeContentError(w, http.StatusInternalServerError, "INTERNAL")
	return true
}

// serveDownload serves a content link: the content in the link's
// format, 404 while the item's page is being fetched (the plugins poll),
// 404 for an unknown or expired link, 410 for an item deleted since.
func (s *Content) serveDownload(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeContentError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
		return
	}
	secret := strings.TrimPrefix(r.URL.Path, ContentDownloadPath)
	l, _, key, err := apitokens.Of(s.store).ContentLinkOf(r.Context(), secret)
	if apitokens.Unknown(err) {
		// The secret is the request's only credential: a link that is
		// not one counts against its client address's tokenless budget,
		// as an unknown key does. Links that are one were counted when
		// POST ContentPath made them, and the plugins download a sync's
		// links (and poll those not ready) back to back.
		if _, ok := s.gate.Limit(w.Header(), r, nil); !ok {
			writeContentError(w, http.StatusTooManyRequests, inboxtapi.CodeTooManyRequests)
			return
		}
		writeContentError(w, http.StatusNotFound, "NOT_FOUND")
		return
	}
	if s.contentFailed(w, err) {
		return
	}
	// The plugins write the content into notes, which load its images
	// without credentials: at addresses signed with the link's API key.
	text, err := Render(r.Context(), s.store, export.ImageLinks{Site: inboxtapi.SiteURL(r), Key: key}, l.MemberID, l.ItemID, l.Format)
	if errors.Is(err, ErrPending) {
		writeContentError(w, http.StatusNotFound, "NOT_READY")
		return
	}
	if s.contentFailed(w, err) {
		return
	}
	if text == nil {
		writeContentError(w, http.StatusGone, "GONE")
		return
	}
	ct := "text/markdown; charset=utf-8"
	if l.Format == FormatHTML {
		ct = "text/html; charset=utf-8"
		// The saved page is shown as a document of its own, never with
		// the site's scripts or cookies, and a link followed from it sends
		// no Referer: the page's address is the link's secret.
		w.Header().Set("Content-Security-Policy", "sandbox")
		w.Header().Set("Referrer-Policy", "no-referrer")
	}
	w.Header().Set("Content-Type", ct)
	_, _ = io.WriteString(w, *text)
}
