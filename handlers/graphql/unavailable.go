package graphql

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
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

// refusal reports whether the store refused err for now
// (storage.Unavailable), with the HTTP status and error code to answer;
// when it did, it sets Retry-After on w.
func refusal(w http.ResponseWriter, err error) (status int, code string, ok bool) {
	status, retry, ok := storage.Unavailable(err)
	if !ok {
		return 0, "", false
	}
	code = codeUnavailable
	if status == http.StatusInsufficientStorage {
		code = codeInsufficient
	}
	w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(retry)))
	return status, code, true
}
