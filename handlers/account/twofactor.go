package account

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// TwoFactorPath is the second step of signing in for members with
// two-factor sign-in on.
const TwoFactorPath = "/auth/two_factor"

// challengeCookie carries the sign-in challenge between the password and the
// code: a random secret naming a short-lived server-side record, which is
// not a session (it signs nobody in and opens no page but TwoFactorPath).
const challengeCookie = "hearth_2fa"

// ErrSecondFactorRequired is SignIn's answer when the password was right
// but the member signs in with a second factor: no session was started.
// The sign-in page goes on to TwoFactorPath; other sign-in forms (GraphQL's
// signIn, which has no field for a code) refuse.
var ErrSecondFactorRequired = errors.New("this account uses two-factor sign-in: sign in on the site's sign-in page")

type twoFactorData struct {
	Error    string
	ReturnTo string
	// Passkey: the member has a passkey, which may answer instead of a
	// code.
	Passkey bool
}

// startSecondFactor makes m's sign-in challenge, keeps it in the browser
// and sends it to the code page.
func (p *Pages) startSecondFactor(w http.ResponseWriter, r *http.Request, m *members.Member, returnTo string) {
	secret, err := members.Of(p.store).CreateSignInChallenge(r.Context(), m)
	if errors.Is(err, members.ErrCredentialsChanged) || errors.Is(err, members.ErrSuspended) {
		p.renderSignIn(w, r, http.StatusUnauthorized, signInData{ReturnTo: returnTo, Error: signInAgain})
		return
	}
	if err != nil {
		p.renderStoreFailure(w, r, err, "Signing in failed. Try again in a moment.")
		return
	}
	http.SetCookie(w, p.challengeCookie(r, secret, int(members.SignInChallengeLifetime.Seconds())))
	to := TwoFactorPath
	if returnTo != "" {
		to += "?return_to=" + url.QueryEscape(returnTo)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func (p *Pages) challengeCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	c := p.cookie(r, value, maxAge)
	c.Name = challengeCookie
	c.Path = TwoFactorPath
	return c
}

func (p *Pages) serveTwoFactor(w http.ResponseWriter, r *http.Request) {
	if !p.allowed(w, r, http.MethodGet, http.MethodPost) {
		return
	}
	if r.Method == http.MethodPost && !p.ParseForm(w, r) {
		return
	}
	d := twoFactorData{ReturnTo: p.returnTo(r)}
	c, err := r.Cookie(challengeCookie)
	secret := ""
	if err == nil {
		secret = c.Value
	}
	m, err := members.Of(p.store).SignInChallengeMember(r.Context(), secret)
	if _, _, busy := storage.Unavailable(err); busy {
		p.renderStoreFailure(w, r, err, "")
		return
	}
	if err != nil || m == nil || m.Suspended {
		http.SetCookie(w, p.challengeCookie(r, "", -1))
		p.renderSignIn(w, r, http.StatusUnauthorized, signInData{ReturnTo: d.ReturnTo,
			Error: "Your sign-in took too long or had too many wrong codes. Sign in again."})
		return
	}
	if keys, err := members.Of(p.store).Passkeys(r.Context(), m.ID); err == nil {
		d.Passkey = len(keys) > 0
	}
	if r.Method != http.MethodPost {
		p.renderWithPasskeys(w, r, http.StatusOK, "Two-factor sign-in", twoFactorTmpl, d)
		return
	}
	code := strings.TrimSpace(r.PostForm.Get("code"))
	if code == "" {
		d.Error = "Enter the code from your authenticator app, or a recovery code."
		p.renderWithPasskeys(w, r, http.StatusBadRequest, "Two-factor sign-in", twoFactorTmpl, d)
		return
	}
	var recovery bool
	err = p.underFailureLimits(r, m.Username, func() error {
		var err error
		m, recovery, err = members.Of(p.store).AnswerSignInChallenge(r.Context(), secret, code)
		return err
	}, isCodeFailure)
	var limited *SignInLimitedError
	switch {
	case errors.As(err, &limited):
		metrics.SignIn(metrics.SignInRateLimited)
		p.renderTooMany(w, r, limited.Wait, "Too many wrong codes.")
		return
	case errors.Is(err, members.ErrWrongCode), errors.Is(err, members.ErrCodeReused):
		metrics.SignIn(metrics.SignInFailure)
		p.opts.Logger.Info("sign-in code refused", zap.String("client_ip", p.opts.ClientIP(r)))
		d.Error = "That code is not right. Check your app and try again."
		if errors.Is(err, members.ErrCodeReused) {
			d.Error = "That code was already used. Wait for your app to show the next one."
		}
		p.renderWithPasskeys(w, r, http.StatusUnauthorized, "Two-factor sign-in", twoFactorTmpl, d)
		return
	case errors.Is(err, storage.ErrNotFound), errors.Is(err, members.ErrTwoFactorOff):
		http.SetCookie(w, p.challengeCookie(r, "", -1))
		p.renderSignIn(w, r, http.StatusUnauthorized, signInData{ReturnTo: d.ReturnTo,
			Error: "Your sign-in took too long or had too many wrong codes. Sign in again."})
		return
	case err != nil:
		p.renderStoreFailure(w, r, err, "Signing in failed. Try again in a moment.")
		return
	}
	http.SetCookie(w, p.challengeCookie(r, "", -1))
	p.resetFailures(r.Context(), m.Username)
	if err := p.startSession(w, r, m, amrPasswordAndCode...); err != nil {
		p.logSessionRefused(m, err)
		if errors.Is(err, members.ErrCredentialsChanged) || errors.Is(err, members.ErrSuspended) {
			p.renderSignIn(w, r, http.StatusUnauthorized, signInData{ReturnTo: d.ReturnTo, Error: signInAgain})
			return
		}
		p.renderStoreFailure(w, r, err, "Signing in failed. Try again in a moment.")
		return
	}
	metrics.SignIn(metrics.SignInSuccess)
	p.opts.Logger.Info("signed in", zap.String("username", m.Username), zap.Bool("recovery_code", recovery))
	http.Redirect(w, r, p.orSettings(r, d.ReturnTo), http.StatusSeeOther)
}
