package oauth

import (
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
)

// writeStoreFailure answers a store error of a Mastodon API endpoint in
// Mastodon's format ({"error": ...}): 503 or 507 with Retry-After when the
// store refused for now (storage.Unavailable: a restore, a reload, a full
// disk), else 500 with msg.
func writeStoreFailure(w http.ResponseWriter, err error, msg string) {
	if status, retry, ok := storage.Unavailable(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(retry)))
		writeJSON(w, status, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusInternalServerError, map[string]string{"error": msg})
}

// storeFailurePage answers a store error of a member page (consent,
// authorized applications) with the error page: 503 or 507 with
// Retry-After when the store refused for now (a restore, a reload, a full
// disk), else 500 with text, logging err as what.
func (s *Server) storeFailurePage(w http.ResponseWriter, r *http.Request, err error, what, text string) {
	if status, retry, ok := storage.Unavailable(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(retry)))
		msg := "The site is busy (a restore or a reload). Try again in a moment."
		if status == http.StatusInsufficientStorage {
			msg = "The site's disk is full, so nothing can be saved now. Try again later."
		}
		s.errorPage(w, r, status, msg)
		return
	}
	if r.Context().Err() == nil { // else the client went away: the store stopped with its request
		s.log.Error(what, zap.Error(err))
	}
	s.errorPage(w, r, http.StatusInternalServerError, text)
}
