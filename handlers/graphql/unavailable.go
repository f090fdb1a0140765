package graphql

import (
	"encoding/json"
	"net/http"

	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
)

// writeUnavailable answers, outside gqlgen, a request the store refused for
// now (storage.Unavailable: a restore or reload, 503; a full disk, 507) as
// Inboxt answers such errors: HTTP 200, extensions.status, Retry-After. It
// returns false, writing nothing, for any other error.
func writeUnavailable(w http.ResponseWriter, err error) bool {
	status, code, ok := refusal(w, err)
	if !ok {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []any{map[string]any{"message": err.Error(), "extensions": map[string]any{"code": code, "status": status}}},
		"data":   nil,
	})
	return true
}

// refusal is inboxtapi.Refusal: the store's refusal for now, if err is
// one, with Retry-After set.
var refusal = inboxtapi.Refusal
