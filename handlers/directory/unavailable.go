package directory

import (
	"context"
	"errors"
	"net/http"

	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/storage"
)

// writeStoreFailure answers a store error in the directory's plain JSON
// errors: 503 or 507 with Retry-After when the store refused for now
// (inboxtapi.Refusal: a restore, a reload, a full disk), else 500 with
// msg.
func writeStoreFailure(w http.ResponseWriter, err error, msg string) {
	if status, _, ok := inboxtapi.Refusal(w, err); ok {
		writeError(w, status, "error: "+err.Error()+"; try again later")
		return
	}
	writeError(w, http.StatusInternalServerError, msg)
}

// logStoreFailure logs a store error as the handler's error, unless the
// store only refused for now (answered 503/507 by writeStoreFailure: a
// reload or a restore is no fault).
func (d *Directory) logStoreFailure(what string, err error) {
	if errors.Is(err, context.Canceled) {
		return // the work was stopped (shutdown, a lease lost, a client gone): nothing failed
	}
	if _, _, refusing := storage.Unavailable(err); !refusing {
		d.opts.Logger.Error(what + ": " + err.Error())
	}
}
