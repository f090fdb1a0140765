package oauth

import (
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// The member's own e-mail address, as the OpenID provider hands it to the
// site's other apps: a member may set it, and it is then unverified (Hearth
// sends no mail to check it); the operator's caddy hearth member email
// marks an address verified.
const (
	EmailPath  = "/settings/email"
	EmailTitle = "E-mail address"
)

var emailTmpl = parse("oidc_email.html")

// EmailPage is the settings page where a member sets the address.
func (s *Server) EmailPage() http.Handler { return http.HandlerFunc(s.serveEmail) }

func (s *Server) serveEmail(w http.ResponseWriter, r *http.Request) {
	m, posted, ok := s.memberForm(w, r)
	if !ok {
		return
	}
	status, notice, problem := http.StatusOK, "", ""
	email := strings.TrimSpace(r.PostForm.Get("email"))
	switch {
	case !posted:
	case email == m.Email:
		notice = "Nothing changed."
	default:
		updated, err := members.Of(s.store).SetEmail(r.Context(), m.Username, email, false)
		var inv *storage.InvalidError
		switch {
		case errors.As(err, &inv):
			status, problem = http.StatusBadRequest, upper(inv.Msg)+"."
		case err != nil:
			if _, _, ok := storage.Unavailable(err); ok {
				s.storeFailurePage(w, r, err, "set e-mail address", "")
				return
			}
			s.log.Error("set e-mail address", zap.Error(err))
			status, problem = http.StatusInternalServerError, "The address could not be saved; try again."
		default:
			m = updated
			notice = "Saved. Apps that sign you in through this site see it from your next sign-in, marked unverified."
			if email == "" {
				notice = "Removed."
			}
		}
	}
	s.opts.Pages.Render(w, r, status, EmailTitle, emailTmpl, struct {
		Member          *members.Member
		Path            string
		Notice, Problem string
	}{m, EmailPath, notice, problem})
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
