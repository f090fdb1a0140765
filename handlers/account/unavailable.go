package account

import (
	"net/http"
	"strconv"

	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
)

// renderStoreFailure answers a store error of a member page with the plain
// error page: 503 or 507 with Retry-After when the store refused for now
// (storage.Unavailable: a restore, a reload, a full disk), else 500 with
// text.
func (p *Pages) renderStoreFailure(w http.ResponseWriter, r *http.Request, err error, text string) {
	if status, retry, ok := storage.Unavailable(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(retry)))
		msg := "The site is busy (a restore or a reload). Try again in a moment."
		if status == http.StatusInsufficientStorage {
			msg = "The site's disk is full, so nothing can be saved now. Try again later."
		}
		p.renderError(w, r, status, http.StatusText(status), msg)
		return
	}
	p.renderError(w, r, http.StatusInternalServerError, "Something went wrong", text)
}
