package oauth

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Version is what the instance endpoints report. Mastodon clients read the
// leading version number to decide which API features to use; the suffix
// says what actually answers, as Pleroma and GoToSocial do.
const Version = "4.4.0 (compatible; Hearth)"

// Paths of the default avatar and header images account JSON points to.
const (
	MissingAvatarPath = "/avatars/original/missing.png"
	MissingHeaderPath = "/headers/original/missing.png"
)

// credentialAccount is Mastodon's CredentialAccount entity: an Account with
// the source attribute, as verify_credentials returns it.
type credentialAccount struct {
	ID             string        `json:"id"`
	Username       string        `json:"username"`
	Acct           string        `json:"acct"`
	DisplayName    string        `json:"display_name"`
	Locked         bool          `json:"locked"`
	Bot            bool          `json:"bot"`
	Discoverable   bool          `json:"discoverable"`
	Indexable      bool          `json:"indexable"`
	Group          bool          `json:"group"`
	CreatedAt      string        `json:"created_at"`
	Note           string        `json:"note"`
	URL            string        `json:"url"`
	URI            string        `json:"uri"`
	Avatar         string        `json:"avatar"`
	AvatarStatic   string        `json:"avatar_static"`
	Header         string        `json:"header"`
	HeaderStatic   string        `json:"header_static"`
	FollowersCount int           `json:"followers_count"`
	FollowingCount int           `json:"following_count"`
	StatusesCount  int           `json:"statuses_count"`
	LastStatusAt   *string       `json:"last_status_at"`
	HideCollection bool          `json:"hide_collections"`
	Noindex        bool          `json:"noindex"`
	Source         accountSource `json:"source"`
	Emojis         []struct{}    `json:"emojis"`
	Roles          []struct{}    `json:"roles"`
	Fields         []struct{}    `json:"fields"`
}

type accountSource struct {
	Privacy             string     `json:"privacy"`
	Sensitive           bool       `json:"sensitive"`
	Language            string     `json:"language"`
	Note                string     `json:"note"`
	Fields              []struct{} `json:"fields"`
	FollowRequestsCount int        `json:"follow_requests_count"`
	HideCollections     bool       `json:"hide_collections"`
	Discoverable        bool       `json:"discoverable"`
	Indexable           bool       `json:"indexable"`
}

// accountOf is the member as Mastodon's CredentialAccount.
func (s *Server) accountOf(r *http.Request, m *members.Member) credentialAccount {
	base := s.baseURL(r)
	display := m.DisplayName
	if display == "" {
		display = m.Username
	}
	// Mastodon rounds created_at to midnight UTC, so the join date does not
	// reveal the time of day.
	created := m.CreatedAt.UTC().Truncate(24 * time.Hour).Format("2006-01-02T15:04:05.000Z")
	return credentialAccount{
		ID:           m.ID,
		Username:     m.Username,
		Acct:         m.Username,
		DisplayName:  display,
		CreatedAt:    created,
		URL:          base + "/@" + m.Username,
		URI:          base + "/users/" + m.Username,
		Avatar:       base + MissingAvatarPath,
		AvatarStatic: base + MissingAvatarPath,
		Header:       base + MissingHeaderPath,
		HeaderStatic: base + MissingHeaderPath,
		Source:       accountSource{Privacy: "public", Fields: []struct{}{}},
		Emojis:       []struct{}{},
		Roles:        []struct{}{},
		Fields:       []struct{}{},
	}
}

// serveVerifyCredentials is GET /api/v1/accounts/verify_credentials: the
// token's member, for tokens with profile or read (Mastodon:
// doorkeeper_for :profile, :read, :'read:accounts').
func (s *Server) serveVerifyCredentials(w http.ResponseWriter, r *http.Request) {
	_, m, ok := s.bearer(w, r, routeVerifyCredentials)
	if !ok {
		return
	}
	if m == nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "This method requires an authenticated user"})
		return
	}
	w.Header().Set("Cache-Control", "private, no-store")
	writeJSON(w, http.StatusOK, s.accountOf(r, m))
}

// serveMetadata is the RFC 8414 document, in the shape Mastodon 4.4 serves,
// advertising only what this server supports.
func (s *Server) serveMetadata(w http.ResponseWriter, r *http.Request) {
	base := s.baseURL(r)
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                base + "/",
		"service_documentation":                 "https://docs.joinmastodon.org/",
		"authorization_endpoint":                base + AuthorizePath,
		"token_endpoint":                        base + TokenPath,
		"revocation_endpoint":                   base + RevokePath,
		"userinfo_endpoint":                     base + UserinfoPath,
		"app_registration_endpoint":             base + AppsPath,
		"scopes_supported":                      grants.Scopes,
		"response_types_supported":              []string{"code"},
		"response_modes_supported":              []string{"query"},
		"grant_types_supported":                 []string{"authorization_code", "client_credentials"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_post"},
		"code_challenge_methods_supported":      []string{"S256"},
	})
}

// memberCount is the number of members, for the instance endpoints and
// nodeinfo: one key read (members' counter), whatever the number of
// members, as anyone may ask without a limit.
func (s *Server) memberCount(ctx context.Context) int {
	n, err := members.Of(s.store).Count(ctx)
	if err != nil {
		s.log.Warn("count members", zap.Error(err))
		return 0
	}
	return n
}

// Limits Mastodon 4.4 reports; Hearth hosts no posts, so Mastodon's
// defaults stand for the clients that size their forms by them.
var (
	statusLimits = map[string]any{"max_characters": 500, "max_media_attachments": 4, "characters_reserved_per_url": 23}
	pollLimits   = map[string]any{"max_options": 4, "max_characters_per_option": 50, "min_expiration": 300, "max_expiration": 2629746}
)

func mediaLimits(v2 bool) map[string]any {
	m := map[string]any{
		"supported_mime_types":   []string{},
		"image_size_limit":       16777216,
		"image_matrix_limit":     33177600,
		"video_size_limit":       103809024,
		"video_frame_rate_limit": 120,
		"video_matrix_limit":     8294400,
	}
	if v2 {
		m["description_limit"] = 1500
	}
	return m
}

// streamingURL is the base URL with ws(s) for http(s).
func streamingURL(base string) string {
	return strings.Replace(base, "http", "ws", 1)
}

// instanceConfigurationV2 is the configuration of Mastodon 4.4's Instance
// entity (app/serializers/rest/instance_serializer.rb), every key present;
// null where Hearth has nothing (no push, so no VAPID key; no status,
// terms-of-service or privacy pages).
func instanceConfigurationV2(base string) map[string]any {
	feeds := map[string]any{"local": "disabled", "remote": "disabled"}
	return map[string]any{
		"urls": map[string]any{
			"streaming": streamingURL(base), "status": nil, "about": base + "/",
			"privacy_policy": nil, "terms_of_service": nil,
		},
		"vapid": map[string]any{"public_key": nil},
		"accounts": map[string]any{
			"max_note_length": 500, "max_featured_tags": 10, "max_pinned_statuses": 5,
			"max_profile_fields": 4, "profile_field_name_limit": 255, "profile_field_value_limit": 255,
		},
		"statuses":          statusLimits,
		"media_attachments": mediaLimits(true),
		"polls":             pollLimits,
		"translation":       map[string]any{"enabled": false},
		"timelines_access": map[string]any{
			"live_feeds": feeds, "hashtag_feeds": feeds, "trending_link_feeds": feeds,
		},
		"limited_federation": true,
	}
}

// serveInstanceV1 is Mastodon 4.4's V1_Instance entity
// (app/serializers/rest/v1/instance_serializer.rb), every key present.
// Mastodon.py 1.8 reads its version (mastodon/versions.py,
// internals.py __normalize_version_string takes what precedes the first
// space); toot 0.34 prints title and version.
func (s *Server) serveInstanceV1(w http.ResponseWriter, r *http.Request) {
	base := s.baseURL(r)
	members := s.memberCount(r.Context())
	writeJSON(w, http.StatusOK, map[string]any{
		"uri":               s.accountDomain(r),
		"title":             s.opts.InstanceTitle,
		"short_description": s.opts.InstanceDescription,
		"description":       s.opts.InstanceDescription,
		"email":             s.opts.ContactEmail,
		"version":           Version,
		"urls":              map[string]any{"streaming_api": streamingURL(base)},
		"stats":             map[string]any{"user_count": members, "status_count": 0, "domain_count": 0},
		"thumbnail":         base + MissingHeaderPath,
		"languages":         []string{"en"},
		"registrations":     s.opts.OpenRegistration,
		"approval_required": false,
		"invites_enabled":   false,
		"configuration": map[string]any{
			"accounts":          map[string]any{"max_featured_tags": 10},
			"statuses":          statusLimits,
			"media_attachments": mediaLimits(false),
			"polls":             pollLimits,
		},
		"contact_account": nil,
		"rules":           []struct{}{},
	})
}

// serveInstanceV2 is Mastodon 4.4's Instance entity, every key present.
func (s *Server) serveInstanceV2(w http.ResponseWriter, r *http.Request) {
	base := s.baseURL(r)
	writeJSON(w, http.StatusOK, map[string]any{
		"domain":        s.accountDomain(r),
		"title":         s.opts.InstanceTitle,
		"version":       Version,
		"source_url":    "https://github.com/hearthkit/caddy-hearth",
		"description":   s.opts.InstanceDescription,
		"usage":         map[string]any{"users": map[string]any{"active_month": s.memberCount(r.Context())}},
		"thumbnail":     map[string]any{"url": base + MissingHeaderPath},
		"icon":          []struct{}{},
		"languages":     []string{"en"},
		"configuration": instanceConfigurationV2(base),
		"registrations": map[string]any{
			"enabled": s.opts.OpenRegistration, "approval_required": false, "reason_required": false,
			"message": nil, "min_age": nil, "url": nil,
		},
		"api_versions": map[string]any{"mastodon": 6},
		"wrapstodon":   nil,
		"contact":      map[string]any{"email": s.opts.ContactEmail, "account": nil},
		"rules":        []struct{}{},
	})
}

// placeholderPNG is the grey square served as every member's avatar and
// header, so clients that load account images get an image, not a 404.
var placeholderPNG = func() []byte {
	img := image.NewGray(image.Rect(0, 0, 120, 120))
	for i := range img.Pix {
		img.Pix[i] = 0xb0
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	return buf.Bytes()
}()

func servePlaceholder(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "image/png")
	h.Set("Cache-Control", "public, max-age=86400")
	h.Set("Access-Control-Allow-Origin", "*")
	http.ServeContent(w, r, "missing.png", time.Time{}, bytes.NewReader(placeholderPNG))
}
