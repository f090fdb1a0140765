package oauth

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
)

// writeStoreFailure answers a store error of a Mastodon API endpoint in
// Mastodon's format ({"error": ...}): 503 or 507 with Retry-After when the
// store refused for now (inboxtapi.Refusal: a restore, a reload, a full
// disk), else 500 with msg.
func writeStoreFailure(w http.ResponseWriter, err error, msg string) {
	if status, _, ok := inboxtapi.Refusal(w, err); ok {
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
	if status, _, ok := inboxtapi.Refusal(w, err); ok {
		s.errorPage(w, r, status, account.StoreRefusalText(status))
		return
	}
	if r.Context().Err() == nil { // else the client went away: the store stopped with its request
		s.log.Error(what, zap.Error(err))
	}
	s.errorPage(w, r, http.StatusInternalServerError, text)
}
