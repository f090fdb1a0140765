package caddymodule

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// The admin API's side of member self-service: reset links for members who
// forgot their password, and a member's web sessions.
func init() {
	registerAdminEndpoint("/hearth/members/{username}/reset_link", adminMethods{http.MethodPost: adminResetLink})
	registerAdminEndpoint("/hearth/members/{username}/sessions", adminMethods{
		http.MethodGet:    adminListSessions,
		http.MethodDelete: adminEndAllSessions,
	})
	registerAdminEndpoint("/hearth/members/{username}/sessions/{id}", adminMethods{http.MethodDelete: adminEndSession})
}

type resetLinkRequest struct {
	// Expires is a Go duration or a number of days ("24h", "3d"); default
	// 24h, at most 7 days.
	Expires string `json:"expires,omitempty"`
	// DisableTwoFactor makes the link turn the member's two-factor sign-in
	// off when it is used (the member lost their authenticator too).
	DisableTwoFactor bool `json:"disable_2fa,omitempty"`
	// RevokeAccess makes the link also revoke the member's API tokens and
	// OAuth grants when it is used (a compromised account).
	RevokeAccess bool `json:"revoke_access,omitempty"`
}

type resetLinkView struct {
	Path             string    `json:"path"`
	ExpiresAt        time.Time `json:"expires_at"`
	DisableTwoFactor bool      `json:"disable_2fa"`
	RevokeAccess     bool      `json:"revoke_access"`
	TwoFactor        bool      `json:"two_factor"`
}

// parseLifetime reads a Go duration or a whole number of days ("3d").
func parseLifetime(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 {
			return 0, errors.New("bad number of days")
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

func adminResetLink(w http.ResponseWriter, r *http.Request, app *App) error {
	name := r.PathValue("username")
	var req resetLinkRequest
	if err := decodeJSONBody(w, r, &req); err != nil {
		return err
	}
	ttl := members.DefaultResetLinkLifetime
	if req.Expires != "" {
		d, err := parseLifetime(req.Expires)
		if err != nil || d <= 0 || d > members.MaxResetLinkLifetime {
			return apiError(http.StatusBadRequest, "expires must be a duration such as 24h or 3d, at most 7d")
		}
		ttl = d
	}
	token, m, link, err := members.Of(app.Store()).CreateResetLink(r.Context(), name, ttl, members.ResetLinkOptions{DisableTwoFactor: req.DisableTwoFactor, RevokeAccess: req.RevokeAccess})
	if err != nil {
		return memberError(name, err)
	}
	app.logger.Info("issued a password reset link", zap.String("username", m.Username), zap.Bool("disable_2fa", req.DisableTwoFactor), zap.Bool("revoke_access", req.RevokeAccess))
	return writeJSON(w, http.StatusCreated, resetLinkView{
		Path: account.ResetPathPrefix + token, ExpiresAt: link.ExpiresAt,
		DisableTwoFactor: req.DisableTwoFactor, RevokeAccess: req.RevokeAccess, TwoFactor: m.TwoFactor,
	})
}

// sessionView is a web session as the admin API shows it: its public id,
// never the cookie's secret.
type sessionView struct {
	ID         string    `json:"id"`
	Device     string    `json:"device"`
	Address    string    `json:"address"`
	CreatedAt  time.Time `json:"created_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
	ExpiresAt  time.Time `json:"expires_at"`
}

func adminListSessions(w http.ResponseWriter, r *http.Request, app *App) error {
	m, err := adminMember(r, app)
	if err != nil {
		return err
	}
	list, err := members.Of(app.Store()).Sessions(r.Context(), m.ID)
	if err != nil {
		return storeError(err, "session")
	}
	out := make([]sessionView, 0, len(list))
	for _, s := range list {
		out = append(out, sessionView{ID: s.ID, Device: s.Device, Address: s.Address, CreatedAt: s.CreatedAt, LastSeenAt: s.LastSeen(), ExpiresAt: s.ExpiresAt})
	}
	return writeJSON(w, http.StatusOK, out)
}

func adminEndSession(w http.ResponseWriter, r *http.Request, app *App) error {
	m, err := adminMember(r, app)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	err = members.Of(app.Store()).EndSession(r.Context(), m.ID, id)
	if errors.Is(err, storage.ErrNotFound) {
		return apiError(http.StatusNotFound, "%s has no session %q", m.Username, id)
	}
	if err != nil {
		return storeError(err, "session")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func adminEndAllSessions(w http.ResponseWriter, r *http.Request, app *App) error {
	m, err := adminMember(r, app)
	if err != nil {
		return err
	}
	n, err := members.Of(app.Store()).EndOtherSessions(r.Context(), m.ID, "")
	if err != nil {
		return storeError(err, "session")
	}
	return writeJSON(w, http.StatusOK, map[string]int{"ended": n})
}
