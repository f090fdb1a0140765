package inboxtapi

import (
	"encoding/json"
	"net/http"
)

// ConfigPath is Inboxt's runtime configuration for its web app, which the
// app reads once on start (GET /api/config: appUrl, webErrorsDsn,
// apiErrorsDsnConfigured, in the web app's runtime-config.ts @ 45f4314).
// The app shows the API's URL as appUrl + /api/graphql.
const ConfigPath = "/api/config"

// Config serves ConfigPath beside the API.
type Config struct{}

// Handles reports a read of ConfigPath; other methods are the site's.
func (Config) Handles(r *http.Request) bool {
	return r.URL.Path == ConfigPath && (r.Method == http.MethodGet || r.Method == http.MethodHead)
}

// ServeHTTP answers Inboxt's runtime configuration: the site the request
// came to as appUrl, and no error reporting (Hearth sends errors nowhere).
func (Config) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"appUrl":                 SiteURL(r),
		"webErrorsDsn":           nil,
		"apiErrorsDsnConfigured": false,
	})
}
