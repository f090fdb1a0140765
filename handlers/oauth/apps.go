package oauth

import (
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage/grants"
)

// Limits of a registration, as Mastodon's Application model has them.
const (
	maxAppNameLen     = 60
	maxURILen         = 2000
	maxRedirectURIs   = 20
	maxWebsiteLen     = 2000
	validationPrefix  = "Validation failed: "
	errBadRequestBody = "The request body could not be parsed"
)

// registration is a decoded POST /api/v1/apps request.
type registration struct {
	ClientName   string
	RedirectURIs []string
	Scopes       string
	Website      string
}

// decodeRegistration reads a form-encoded, multipart or JSON registration.
// redirect_uris is a newline-separated string, or (JSON, or repeated
// redirect_uris[] form fields) an array. It returns an error only for a
// body that can't be parsed.
func decodeRegistration(r *http.Request, maxBytes int64) (registration, error) {
	var reg registration
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" {
		var raw map[string]json.RawMessage
		dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBytes))
		if err := dec.Decode(&raw); err != nil {
			return reg, err
		}
		reg.ClientName = jsonString(raw["client_name"])
		reg.Website = jsonString(raw["website"])
		reg.Scopes = strings.Join(jsonStrings(raw["scopes"]), " ")
		for _, u := range jsonStrings(raw["redirect_uris"]) {
			reg.RedirectURIs = append(reg.RedirectURIs, splitLines(u)...)
		}
		return reg, nil
	}
	r.Body = http.MaxBytesReader(nil, r.Body, maxBytes)
	var err error
	if ct == "multipart/form-data" {
		err = r.ParseMultipartForm(maxBytes)
	} else {
		err = r.ParseForm()
	}
	if err != nil {
		return reg, err
	}
	f := r.Form
	if r.PostForm != nil {
		f = r.PostForm
	}
	if r.MultipartForm != nil {
		f = r.MultipartForm.Value
	}
	reg.ClientName = f.Get("client_name")
	reg.Website = f.Get("website")
	reg.Scopes = strings.Join(f["scopes"], " ")
	for _, name := range []string{"redirect_uris", "redirect_uris[]"} {
		for _, u := range f[name] {
			reg.RedirectURIs = append(reg.RedirectURIs, splitLines(u)...)
		}
	}
	return reg, nil
}

// jsonString is the string in raw, or "" for anything else.
func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// jsonStrings accepts a string or an array of strings.
func jsonStrings(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list
	}
	return nil
}

func splitLines(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// validate checks a registration and returns the cleaned redirect URIs and
// scopes, or Mastodon's validation messages.
func (s *Server) validate(reg registration) (uris, scopes []string, problems []string) {
	name := strings.TrimSpace(reg.ClientName)
	switch {
	case name == "":
		problems = append(problems, "Application name can't be blank")
	case !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl):
		problems = append(problems, "Application name is invalid")
	case utf8.RuneCountInString(name) > maxAppNameLen:
		problems = append(problems, "Application name is too long (maximum is 60 characters)")
	}

	if len(reg.RedirectURIs) == 0 {
		problems = append(problems, "Redirect URI can't be blank")
	} else if len(reg.RedirectURIs) > maxRedirectURIs {
		problems = append(problems, "Redirect URI has too many entries (maximum is 20)")
	} else {
		for _, u := range reg.RedirectURIs {
			if msg := s.checkRedirectURI(u); msg != "" {
				if !contains(problems, msg) {
					problems = append(problems, msg)
				}
				continue
			}
			if !contains(uris, u) {
				uris = append(uris, u)
			}
		}
	}

	scopeStr := reg.Scopes
	if strings.TrimSpace(scopeStr) == "" {
		scopeStr = "read"
	}
	var ok bool
	if scopes, ok = parseScopes(scopeStr); !ok {
		problems = append(problems, "Scopes doesn't match configured on the server.")
	}

	if w := strings.TrimSpace(reg.Website); w != "" {
		u, err := url.Parse(w)
		if len(w) > maxWebsiteLen || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, "Application website is invalid")
		}
	}
	return uris, scopes, problems
}

// checkRedirectURI applies the redirect URI rules and returns Mastodon's
// message for a broken one, or "".
func (s *Server) checkRedirectURI(raw string) string {
	if raw == OOBRedirectURI {
		return ""
	}
	if len(raw) > maxURILen {
		return "Redirect URI is too long (maximum is 2000 characters)"
	}
	if !utf8.ValidString(raw) || strings.ContainsFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return "Redirect URI must be a valid URI."
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "Redirect URI must be a valid URI."
	}
	if strings.Contains(raw, "#") {
		return "Redirect URI cannot contain a fragment."
	}
	if u.Scheme == "" {
		return "Redirect URI must be an absolute URI."
	}
	switch strings.ToLower(u.Scheme) {
	case "javascript", "data", "vbscript", "file", "blob", "about":
		return "Redirect URI is forbidden by the server."
	case "http":
		if u.Host == "" {
			return "Redirect URI must be an absolute URI."
		}
		if !s.opts.AllowHTTPRedirects && !isLoopback(u.Hostname()) {
			return "Redirect URI must be an HTTPS/SSL URI."
		}
	case "https":
		if u.Host == "" {
			return "Redirect URI must be an absolute URI."
		}
	default:
		// A native app's custom scheme (com.example.app:/cb, myapp://cb).
		if u.Opaque == "" && u.Host == "" && u.Path == "" {
			return "Redirect URI must be an absolute URI."
		}
	}
	if u.User != nil {
		return "Redirect URI must be a valid URI."
	}
	return ""
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// credentialApplication is Mastodon's CredentialApplication entity.
type credentialApplication struct {
	application
	ClientID              string `json:"client_id"`
	ClientSecret          string `json:"client_secret"`
	ClientSecretExpiresAt int    `json:"client_secret_expires_at"`
}

// application is Mastodon's Application entity.
type application struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Website      *string  `json:"website"`
	Scopes       []string `json:"scopes"`
	RedirectURI  string   `json:"redirect_uri"`
	RedirectURIs []string `json:"redirect_uris"`
}

func applicationOf(app *grants.App) application {
	a := application{
		ID:           app.ID,
		Name:         app.Name,
		Scopes:       app.Scopes,
		RedirectURI:  strings.Join(app.RedirectURIs, "\n"),
		RedirectURIs: app.RedirectURIs,
	}
	if app.Website != "" {
		w := app.Website
		a.Website = &w
	}
	return a
}

func (s *Server) serveRegister(w http.ResponseWriter, r *http.Request) {
	if res := s.registrations.Allow(r.Context(), ratelimit.AddressKey(s.opts.ClientIP(r))); !res.Allowed {
		metrics.RateLimited(metrics.LimitOAuthRegistration)
		tooMany(w, res)
		return
	}
	reg, err := decodeRegistration(r, s.opts.MaxBodyBytes)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "The request body is too large"})
			return
		}
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": errBadRequestBody})
		return
	}
	uris, scopes, problems := s.validate(reg)
	if len(problems) > 0 {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": validationPrefix + strings.Join(problems, ", ")})
		return
	}
	app, secret, err := grants.Of(s.store).CreateApp(r.Context(), strings.TrimSpace(reg.ClientName), strings.TrimSpace(reg.Website), uris, scopes)
	if err != nil {
		s.log.Error("register app", zap.Error(err))
		writeStoreFailure(w, err, "The application could not be registered; try again later")
		return
	}
	s.log.Debug("registered app", zap.String("app_id", app.ID), zap.String("name", app.Name), zap.Strings("scopes", scopes))
	metrics.AppRegistered()
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, credentialApplication{
		application:  applicationOf(app),
		ClientID:     app.ClientID,
		ClientSecret: secret,
	})
}

// serveAppVerify is GET /api/v1/apps/verify_credentials: the application of
// any valid token.
func (s *Server) serveAppVerify(w http.ResponseWriter, r *http.Request) {
	tok, _, ok := s.bearer(w, r, routeAppVerify)
	if !ok {
		return
	}
	app, err := grants.Of(s.store).App(r.Context(), tok.ClientID)
	if err != nil {
		unauthorized(w)
		return
	}
	writeJSON(w, http.StatusOK, applicationOf(app))
}
