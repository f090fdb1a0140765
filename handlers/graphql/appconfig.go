package graphql

import (
	"encoding/json"
	"net/http"
)

// ConfigPath is Inboxt's runtime configuration for its web app, which the
// app reads once on start (GET /api/config: appUrl, webErrorsDsn,
// apiErrorsDsnConfigured, in the web app's runtime-config.ts @ 45f4314).
// The app shows the API's URL as appUrl + Path.
const ConfigPath = "/api/config"

// AppMailWebhookPath is the mail webhook's URL as Inboxt's web app shows
// it (appUrl + "/inbox/items/mail-webhook", without MailWebhookPath's
// /api): a mail provider set up from what the app shows reaches the same
// webhook. Only POST is taken there, so the path is otherwise the site's.
const AppMailWebhookPath = "/inbox/items/mail-webhook"

// IsMailWebhook reports a request for the mail webhook (MailWebhookPath or
// AppMailWebhookPath), whose secret header keeps it out of access logs.
func IsMailWebhook(r *http.Request) bool {
	return r.URL.Path == MailWebhookPath || (r.URL.Path == AppMailWebhookPath && r.Method == http.MethodPost)
}

// isConfig reports a read of ConfigPath; other methods are the site's.
func isConfig(r *http.Request) bool {
	return r.URL.Path == ConfigPath && (r.Method == http.MethodGet || r.Method == http.MethodHead)
}

// serveConfig answers Inboxt's runtime configuration: the site the request
// came to as appUrl, and no error reporting (Hearth sends errors nowhere).
func serveConfig(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"appUrl":                 siteURL(r),
		"webErrorsDsn":           nil,
		"apiErrorsDsnConfigured": false,
	})
}
