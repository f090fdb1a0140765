package account

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// ResetPathPrefix starts the reset links an operator issues (`caddy hearth
// member reset-link`): ResetPathPrefix + token. The token in the path is a
// secret: the caddymodule keeps these requests out of the access log.
const ResetPathPrefix = "/auth/reset/"

// IsResetPath reports whether path is a reset link, whose path carries a
// secret.
func IsResetPath(path string) bool { return strings.HasPrefix(path, ResetPathPrefix) }

type resetData struct {
	Member      *members.Member
	Action      string
	NeedsCode   bool
	Error       string
	MinPassword int
	MaxPassword int
}

var errResetLinkDead = "This reset link does not work: it was already used, it expired, or it was copied incompletely. Ask the site's operator for a new one."

func (p *Pages) serveReset(w http.ResponseWriter, r *http.Request) {
	if !p.allowed(w, r, http.MethodGet, http.MethodPost) {
		return
	}
	// The token is in this page's address: no link or form on it may send
	// that address on as a Referer (which access logs record).
	w.Header().Set("Referrer-Policy", "no-referrer")
	token := strings.TrimPrefix(r.URL.Path, ResetPathPrefix)
	m, link, err := members.Of(p.store).ResetLinkMember(r.Context(), token)
	if _, _, busy := storage.Unavailable(err); busy {
		p.renderStoreFailure(w, r, err, "")
		return
	}
	if err != nil {
		p.Render(w, r, http.StatusNotFound, "Reset link not valid", messageTmpl, message{Text: errResetLinkDead, LinkHref: SignInPath, LinkText: "Go to sign-in"})
		return
	}
	d := resetData{Member: m, Action: r.URL.Path, NeedsCode: m.TwoFactor && !link.DisableTwoFactor,
		MinPassword: members.MinPasswordLen, MaxPassword: members.MaxPasswordLen}
	if r.Method != http.MethodPost {
		p.Render(w, r, http.StatusOK, "Set a new password", resetTmpl, d)
		return
	}
	if !p.ParseForm(w, r) {
		return
	}
	bad := func(status int, msg string) {
		d.Error = msg
		p.Render(w, r, status, "Set a new password", resetTmpl, d)
	}
	next := r.PostForm.Get("password")
	if members.ValidatePassword(next) != nil {
		bad(http.StatusBadRequest, "The new password must be "+strconv.Itoa(members.MinPasswordLen)+" to "+strconv.Itoa(members.MaxPasswordLen)+" characters long.")
		return
	}
	if next != r.PostForm.Get("password_confirmation") {
		bad(http.StatusBadRequest, "The two passwords don't match.")
		return
	}
	if d.NeedsCode {
		code := strings.TrimSpace(r.PostForm.Get("code"))
		err := p.underFailureLimits(r, m.Username, func() error {
			_, err := members.Of(p.store).CheckSecondFactor(r.Context(), m.ID, code)
			return err
		}, isCodeFailure)
		var limited *SignInLimitedError
		switch {
		case errors.As(err, &limited):
			p.renderTooMany(w, r, limited.Wait, "Too many wrong codes.")
			return
		case errors.Is(err, members.ErrWrongCode):
			bad(http.StatusUnauthorized, "That code is not right. Enter the code your authenticator app shows, or a recovery code.")
			return
		case errors.Is(err, members.ErrCodeReused):
			bad(http.StatusUnauthorized, "That code was already used. Wait for your app to show the next one.")
			return
		case errors.Is(err, members.ErrTwoFactorOff):
			// Turned off meanwhile: nothing to check.
		case err != nil:
			p.renderStoreFailure(w, r, err, "The password could not be set. Try again in a moment.")
			return
		}
	}
	used, err := members.Of(p.store).UseResetLink(r.Context(), token, next)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		p.Render(w, r, http.StatusNotFound, "Reset link not valid", messageTmpl, message{Text: errResetLinkDead, LinkHref: SignInPath, LinkText: "Go to sign-in"})
		return
	case err != nil:
		p.renderStoreFailure(w, r, err, "The password could not be set. Try again in a moment.")
		return
	default:
		m = used
	}
	p.resetFailures(r.Context(), m.Username)
	p.opts.Logger.Info("member set a new password with a reset link", zap.String("username", m.Username), zap.Bool("two_factor_turned_off", link.DisableTwoFactor), zap.Bool("access_revoked", link.RevokeAccess))
	// Every session ended, this browser's too.
	http.SetCookie(w, p.cookie(r, "", -1))
	r = withMember(r, nil)
	r.Header.Del("Cookie")
	p.Render(w, r, http.StatusOK, "Password set", messageTmpl, message{
		Text: "Your new password is set, and you were signed out everywhere. Sign in with it now.", LinkHref: SignInPath, LinkText: "Sign in"})
}
