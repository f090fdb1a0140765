package oauth

import (
	"net/http"
	"strconv"

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
