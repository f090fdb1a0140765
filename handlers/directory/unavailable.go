package directory

import (
	"net/http"
	"strconv"

	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
)

// writeStoreFailure answers a store error in the directory's plain JSON
// errors: 503 or 507 with Retry-After when the store refused for now
// (storage.Unavailable: a restore, a reload, a full disk), else 500 with
// msg.
func writeStoreFailure(w http.ResponseWriter, err error, msg string) {
	if status, retry, ok := storage.Unavailable(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(retry)))
		writeError(w, status, "error: "+err.Error()+"; try again later")
		return
	}
	writeError(w, http.StatusInternalServerError, msg)
}
