package account

import (
	"net/http"

	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
)

// renderStoreFailure answers a store error of a member page with the plain
// error page: 503 or 507 with Retry-After when the store refused for now
// (inboxtapi.Refusal: a restore, a reload, a full disk), else 500 with
// text.
func (p *Pages) renderStoreFailure(w http.ResponseWriter, r *http.Request, err error, text string) {
	if status, _, ok := inboxtapi.Refusal(w, err); ok {
		p.renderError(w, r, status, http.StatusText(status), StoreRefusalText(status))
		return
	}
	p.renderError(w, r, http.StatusInternalServerError, "Something went wrong", text)
}

// StoreRefusalText is what a page tells the member when the store refused
// for now with status (inboxtapi.Refusal: 503 or 507).
func StoreRefusalText(status int) string {
	if status == http.StatusInsufficientStorage {
		return "The site's disk is full, so nothing can be saved now. Try again later."
	}
	return "The site is busy (a restore or a reload). Try again in a moment."
}
