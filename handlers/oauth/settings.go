package oauth

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// AuthorizedAppsTitle is the settings menu entry of the authorized
// applications page.
const AuthorizedAppsTitle = "Authorized applications"

// AuthorizedAppsPage serves the settings page that lists the applications
// the signed-in member approved, with their scopes and when, and revokes
// one (every token of that app for the member) on POST. Add it to the
// member pages with account.Pages.AddSettingsPage at AuthorizedAppsPath;
// those pages run it only for a signed-in member, behind cross-origin form
// protection.
func (s *Server) AuthorizedAppsPage() http.Handler {
	return http.HandlerFunc(s.serveAuthorizedApps)
}

func (s *Server) serveAuthorizedApps(w http.ResponseWriter, r *http.Request) {
	m, posted, ok := s.memberForm(w, r)
	if !ok {
		return
	}
	notice := ""
	if posted {
		clientID := r.PostForm.Get("client_id")
		app, err := grants.Of(s.store).App(r.Context(), clientID)
		if err != nil || clientID == "" {
			s.renderAuthorizedApps(w, r, m, http.StatusBadRequest, "That application is not authorized (any more).")
			return
		}
		if err := grants.Of(s.store).RevokeAppForMember(r.Context(), m.ID, clientID); err != nil {
			if _, _, ok := storage.Unavailable(err); ok {
				s.storeFailurePage(w, r, err, "revoke application", "")
				return
			}
			s.log.Error("revoke application", zap.Error(err))
			s.renderAuthorizedApps(w, r, m, http.StatusInternalServerError, "The application could not be revoked; try again.")
			return
		}
		s.log.Info("member revoked application", zap.String("member", m.Username), zap.String("client_id", clientID))
		notice = app.Name + " was revoked: its access to your account has ended."
	}
	s.renderAuthorizedApps(w, r, m, http.StatusOK, notice)
}

func (s *Server) renderAuthorizedApps(w http.ResponseWriter, r *http.Request, m *members.Member, status int, notice string) {
	apps, err := grants.Of(s.store).AuthorizedApps(r.Context(), m.ID)
	if err != nil {
		s.storeFailurePage(w, r, err, "list authorized applications", "Your applications could not be listed; try again.")
		return
	}
	type row struct {
		grants.AuthorizedApp
		Scopes []scopeItem
	}
	rows := make([]row, 0, len(apps))
	for _, a := range apps {
		rows = append(rows, row{a, describeScopes(a.Scopes)})
	}
	s.opts.Pages.Render(w, r, status, AuthorizedAppsTitle, authorizedAppsTmpl, struct {
		Notice string
		Apps   []row
		Path   string
	}{notice, rows, AuthorizedAppsPath})
}
