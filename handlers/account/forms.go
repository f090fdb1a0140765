package account

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

type signInData struct {
	Error string
	// SignedOut: the page follows a sign-out, and says so. Reason says who
	// asks the member to sign in (an app's authorization request).
	SignedOut        bool
	Reason           string
	Username         string
	ReturnTo         string
	OpenRegistration bool
	// SignedInAs names the member already signed in when the form is shown
	// anyway (SignInForm: an app switching accounts).
	SignedInAs string
}

type signUpData struct {
	Error          string
	Username       string
	DisplayName    string
	ReturnTo       string
	MinPassword    int
	MaxPassword    int
	MaxDisplayName int
}

type signOutData struct{ Member *members.Member }

type settingsData struct {
	Member *members.Member
	Pages  []SettingsPage
}

// orSettings is rt, or where a member goes after signing in without a
// page to go back to: the home page (the library) if the site has one,
// else the settings.
func (p *Pages) orSettings(r *http.Request, rt string) string {
	if rt != "" {
		return rt
	}
	if h := Home(r); h != "" {
		return h
	}
	return SettingsPath
}

// ParseForm reads a posted form within the size limit, answering 413 or 400
// itself when it can't. Settings pages of other packages use it too.
func (p *Pages) ParseForm(w http.ResponseWriter, r *http.Request) bool {
	err := r.ParseForm()
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		p.renderError(w, r, http.StatusRequestEntityTooLarge, "Form too large", "The form sent was too large. Go back and try again.")
		return false
	}
	p.renderError(w, r, http.StatusBadRequest, "Bad request", "The form could not be read. Go back, reload the page and try again.")
	return false
}

func (p *Pages) serveSignIn(w http.ResponseWriter, r *http.Request) {
	if !p.allowed(w, r, http.MethodGet, http.MethodPost) {
		return
	}
	if r.Method != http.MethodPost {
		rt := p.returnTo(r)
		if p.CurrentMember(r) != nil {
			http.Redirect(w, r, p.orSettings(r, rt), http.StatusSeeOther)
			return
		}
		p.renderSignIn(w, r, http.StatusOK, signInData{ReturnTo: rt, SignedOut: r.URL.Query().Get("signed_out") == "1"})
		return
	}
	if !p.ParseForm(w, r) {
		return
	}
	d := signInData{
		Username: strings.TrimSpace(r.PostForm.Get("username")),
		ReturnTo: p.returnTo(r),
	}
	password := r.PostForm.Get("password")
	switch {
	case d.Username == "" || password == "":
		d.Error = "Enter your username and your password."
		p.renderSignIn(w, r, http.StatusBadRequest, d)
		return
	case members.ValidateUsername(d.Username) != nil:
		d.Error = "A username is 1 to 30 letters, digits or underscores."
		d.Username = ""
		p.renderSignIn(w, r, http.StatusBadRequest, d)
		return
	case utf8.RuneCountInString(password) > members.MaxPasswordLen:
		d.Error = "Wrong username or password."
		p.renderSignIn(w, r, http.StatusBadRequest, d)
		return
	}

	m, err := p.SignIn(w, r, d.Username, password)
	var limited *SignInLimitedError
	switch {
	case errors.Is(err, ErrSecondFactorRequired):
		p.startSecondFactor(w, r, m, d.ReturnTo)
		return
	case errors.Is(err, ErrCookieWouldBeDropped):
		d.Error = CookieDroppedMessage
		p.renderSignIn(w, r, http.StatusBadRequest, d)
		return
	case errors.As(err, &limited):
		p.renderTooMany(w, r, limited.Wait, "Too many failed sign-ins. Wait a few minutes before trying again.")
		return
	case errors.Is(err, members.ErrBadCredentials):
		d.Error = "Wrong username or password."
		p.renderSignIn(w, r, http.StatusUnauthorized, d)
		return
	case errors.Is(err, members.ErrSuspended):
		d.Error = "This account is suspended, so it can't sign in. Contact the site's administrator."
		p.renderSignIn(w, r, http.StatusForbidden, d)
		return
	case errors.Is(err, members.ErrCredentialsChanged):
		d.Error = signInAgain
		p.renderSignIn(w, r, http.StatusUnauthorized, d)
		return
	case err != nil:
		p.renderStoreFailure(w, r, err, "Signing in failed. Try again in a moment.")
		return
	}
	http.Redirect(w, r, p.orSettings(r, d.ReturnTo), http.StatusSeeOther)
}

// signInAgain is the sign-in page's message for a sign-in whose member
// changed its password or second factor (or was suspended) while it ran.
const signInAgain = "Your password or sign-in settings changed while you were signing in. Sign in again."

// logSessionRefused logs why startSession made no session for m: a change
// of its credentials meanwhile is an event, anything else an error.
func (p *Pages) logSessionRefused(m *members.Member, err error) {
	if errors.Is(err, members.ErrCredentialsChanged) || errors.Is(err, members.ErrSuspended) {
		p.opts.Logger.Info("sign-in refused: the credentials changed while it ran", zap.String("username", m.Username))
		return
	}
	p.opts.Logger.Error("start session", zap.Error(err))
}

// SignInLimitedError is SignIn's answer when the client address or the
// username has too many recent failures, and SignUp's when the address
// made too many accounts: try again after Wait.
type SignInLimitedError struct{ Wait time.Duration }

func (e *SignInLimitedError) Error() string { return "too many failed sign-ins" }

// SignIn checks username and password under the sign-in rate limits (per
// client address and per username) and, when they are right, starts the
// member's session on w. Its errors: ErrCookieWouldBeDropped (logged;
// nothing is checked), *SignInLimitedError,
// members.ErrBadCredentials, members.ErrSuspended,
// members.ErrCredentialsChanged (the password was right when checked, but
// the member's credentials changed before the session was made),
// ErrSecondFactorRequired
// (the password was right, with the member, but no session was started:
// the member signs in with a code too), or an internal error (logged).
// The sign-in page and other sign-in forms (the GraphQL signIn) share it.
func (p *Pages) SignIn(w http.ResponseWriter, r *http.Request, username, password string) (*members.Member, error) {
	if p.cookieDropped(r) {
		return nil, ErrCookieWouldBeDropped
	}
	m, err := p.checkPassword(r, username, password)
	var limited *SignInLimitedError
	switch {
	case errors.As(err, &limited):
		metrics.SignIn(metrics.SignInRateLimited)
		p.opts.Logger.Info("sign-in rate limited", p.typedUsername(r.Context(), username), zap.String("client_ip", p.opts.ClientIP(r)))
		return nil, err
	case errors.Is(err, members.ErrBadCredentials):
		metrics.SignIn(metrics.SignInFailure)
		p.opts.Logger.Info("sign-in failed", p.typedUsername(r.Context(), username), zap.String("client_ip", p.opts.ClientIP(r)))
		return nil, err
	case errors.Is(err, members.ErrSuspended):
		metrics.SignIn(metrics.SignInSuspended)
		p.opts.Logger.Info("sign-in refused: suspended", zap.String("username", username))
		return nil, err
	case err != nil:
		p.opts.Logger.Error("sign-in", zap.Error(err))
		return nil, err
	}
	if m.TwoFactor {
		// No session before the second factor.
		p.opts.Logger.Info("sign-in password accepted; code needed", zap.String("username", m.Username))
		return m, ErrSecondFactorRequired
	}
	p.resetFailures(r.Context(), username)
	if err := p.startSession(w, r, m, amrPassword...); err != nil {
		p.logSessionRefused(m, err)
		return nil, err
	}
	metrics.SignIn(metrics.SignInSuccess)
	p.opts.Logger.Info("signed in", zap.String("username", m.Username))
	return m, nil
}

// typedUsername is how a refused sign-in's log line names what was typed
// as the username: the member's username when it is one, else only that
// it is none (username_known false). What is typed there is sometimes the
// password, typed into the wrong field or after a username the browser
// filled in itself: it is not written to a log.
func (p *Pages) typedUsername(ctx context.Context, username string) zap.Field {
	if members.ValidateUsername(username) == nil {
		if m, err := members.Of(p.store).Member(ctx, username); err == nil {
			return zap.String("username", m.Username)
		}
	}
	return zap.Bool("username_known", false)
}

// checkPassword checks username's password under the sign-in failure limits
// (per client address and per username): the sign-in form and every form
// that asks for the current password again share them. Its errors:
// *SignInLimitedError, members.ErrBadCredentials, members.ErrSuspended, or
// the store's.
func (p *Pages) checkPassword(r *http.Request, username, password string) (*members.Member, error) {
	if members.ValidateUsername(username) != nil || password == "" || utf8.RuneCountInString(password) > members.MaxPasswordLen {
		return nil, members.ErrBadCredentials
	}
	var m *members.Member
	err := p.underFailureLimits(r, username, func() error {
		var err error
		m, err = members.Of(p.store).Authenticate(r.Context(), username, password)
		return err
	}, func(err error) bool { return errors.Is(err, members.ErrBadCredentials) })
	return m, err
}

// underFailureLimits runs check under the sign-in failure limits of
// username and the client address: beyond them it answers
// *SignInLimitedError without running check; an error isFailure reports
// counts as a failure. Success does not reset username's count: only a
// complete sign-in does (resetFailures), so a known password does not buy
// an unlimited number of tries at the second factor.
func (p *Pages) underFailureLimits(r *http.Request, username string, check func() error, isFailure func(error) bool) error {
	// The attempt is counted as a failure before the check (concurrent
	// attempts must not all pass it) and given back when it was not one.
	ctx := r.Context()
	ip := ratelimit.AddressKey(p.opts.ClientIP(r))
	user := "user:" + strings.ToLower(username)
	byIP, byUser := p.byIP.Allow(ctx, ip), p.byUsername.Allow(ctx, user)
	notAFailure := func() {
		if byIP.Allowed {
			p.byIP.Undo(ctx, ip)
		}
		if byUser.Allowed {
			p.byUsername.Undo(ctx, user)
		}
	}
	// Not counted (a shared store that did not answer) and refused: the
	// limits fail closed (ratelimit.FailClosed), so the attempt is answered
	// 503 as a store failure, and no guess is checked.
	for _, res := range []ratelimit.Result{byIP, byUser} {
		if !res.Allowed && res.Err != nil {
			notAFailure()
			return res.Err
		}
	}
	if wait, limited := limitedFor(byIP, byUser); limited {
		notAFailure()
		metrics.RateLimited(metrics.LimitSignIn)
		return &SignInLimitedError{Wait: wait}
	}
	err := check()
	if err == nil || !isFailure(err) {
		notAFailure()
	}
	return err
}

// resetFailures forgets username's failed attempts after a complete sign-in.
func (p *Pages) resetFailures(ctx context.Context, username string) {
	p.byUsername.Reset(ctx, "user:"+strings.ToLower(username))
}

func (p *Pages) renderSignIn(w http.ResponseWriter, r *http.Request, status int, d signInData) {
	d.OpenRegistration = p.opts.OpenRegistration
	if fn := p.reason.Load(); fn != nil && d.ReturnTo != "" {
		d.Reason = (*fn)(r.Context(), d.ReturnTo)
	}
	p.renderWithPasskeys(w, r, status, "Sign in", signInTmpl, d)
}

// limitedFor reports whether any of results refuses, and the longest wait.
func limitedFor(results ...ratelimit.Result) (time.Duration, bool) {
	var wait time.Duration
	limited := false
	for _, res := range results {
		if !res.Allowed {
			limited = true
			wait = max(wait, res.RetryAfter)
		}
	}
	return wait, limited
}

func (p *Pages) renderTooMany(w http.ResponseWriter, r *http.Request, wait time.Duration, text string) {
	secs := ratelimit.RetryAfterSeconds(wait)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	p.Render(w, r, http.StatusTooManyRequests, "Too many attempts", messageTmpl, message{
		Text:     text + " You can try again in " + humanWait(secs) + ".",
		LinkHref: SignInPath,
		LinkText: "Back to sign-in",
	})
}

func humanWait(secs int) string {
	switch {
	case secs <= 1:
		return "a second"
	case secs < 60:
		return strconv.Itoa(secs) + " seconds"
	case secs < 120:
		return "a minute"
	default:
		return strconv.Itoa((secs+59)/60) + " minutes"
	}
}

func (p *Pages) serveSignOut(w http.ResponseWriter, r *http.Request) {
	if !p.allowed(w, r, http.MethodGet, http.MethodPost) {
		return
	}
	if r.Method != http.MethodPost {
		// Signing out changes state, so GET only offers the button.
		p.Render(w, r, http.StatusOK, "Sign out", signOutTmpl, signOutData{Member: p.CurrentMember(r)})
		return
	}
	if !p.ParseForm(w, r) {
		return
	}
	p.SignOut(w, r)
	// The sign-in page the member lands on says what happened.
	http.Redirect(w, r, SignedOutURL(r.PostForm.Get("return_to")), http.StatusSeeOther)
}

func (p *Pages) serveSignUp(w http.ResponseWriter, r *http.Request) {
	if !p.allowed(w, r, http.MethodGet, http.MethodPost) {
		return
	}
	d := signUpData{MinPassword: members.MinPasswordLen, MaxPassword: members.MaxPasswordLen, MaxDisplayName: members.MaxDisplayNameLen}
	if r.Method != http.MethodPost {
		d.ReturnTo = p.returnTo(r)
		if p.CurrentMember(r) != nil {
			http.Redirect(w, r, p.orSettings(r, d.ReturnTo), http.StatusSeeOther)
			return
		}
		p.Render(w, r, http.StatusOK, "Create an account", signUpTmpl, d)
		return
	}
	if !p.ParseForm(w, r) {
		return
	}
	d.Username = strings.TrimSpace(r.PostForm.Get("username"))
	d.DisplayName = strings.TrimSpace(r.PostForm.Get("display_name"))
	d.ReturnTo = p.returnTo(r)
	password := r.PostForm.Get("password")
	bad := func(status int, msg string) {
		d.Error = msg
		p.Render(w, r, status, "Create an account", signUpTmpl, d)
	}
	if err := members.ValidateUsername(d.Username); err != nil {
		bad(http.StatusBadRequest, upperFirst(err.Error())+".")
		return
	}
	if err := members.ValidatePassword(password); err != nil {
		bad(http.StatusBadRequest, upperFirst(err.Error())+".")
		return
	}
	if password != r.PostForm.Get("password_confirmation") {
		bad(http.StatusBadRequest, "The two passwords don't match.")
		return
	}
	_, err := p.SignUp(w, r, d.Username, d.DisplayName, password)
	var limited *SignInLimitedError
	switch {
	case errors.Is(err, ErrCookieWouldBeDropped):
		bad(http.StatusBadRequest, CookieDroppedMessage)
		return
	case errors.As(err, &limited):
		p.renderTooMany(w, r, limited.Wait, "Too many accounts were created from your network.")
		return
	case errors.Is(err, storage.ErrConflict):
		bad(http.StatusConflict, "The username "+d.Username+" is taken. Choose another one.")
		return
	case storage.IsInvalid(err):
		bad(http.StatusBadRequest, upperFirst(err.Error())+".")
		return
	case err != nil:
		p.renderStoreFailure(w, r, err, "The account could not be created. Try again in a moment.")
		return
	}
	http.Redirect(w, r, p.orSettings(r, d.ReturnTo), http.StatusSeeOther)
}

// ErrRegistrationClosed is SignUp's answer when the site does not let
// visitors create accounts (Options.OpenRegistration off).
var ErrRegistrationClosed = errors.New("this site does not let visitors create accounts")

// SignUp creates a member under the sign-up limit per client address
// (which a username found taken counts against too), when the site's
// registration is open, and signs it in on w. Its errors:
// ErrRegistrationClosed, ErrCookieWouldBeDropped (logged; nothing is
// made), *SignInLimitedError, storage.ErrConflict (the
// username is taken), a storage invalid-input error, or an internal one
// (logged); the member and its session are made together or not at all
// (members.CreateMemberSignedIn). The sign-up page and the GraphQL
// createAccount share it.
func (p *Pages) SignUp(w http.ResponseWriter, r *http.Request, username, displayName, password string) (*members.Member, error) {
	if !p.opts.OpenRegistration {
		return nil, ErrRegistrationClosed
	}
	if p.cookieDropped(r) {
		return nil, ErrCookieWouldBeDropped
	}
	// Reserved before the account is created, given back if it is not.
	ip := ratelimit.AddressKey(p.opts.ClientIP(r))
	if wait, limited := limitedFor(p.signUps.Allow(r.Context(), ip)); limited {
		metrics.RateLimited(metrics.LimitSignUp)
		return nil, &SignInLimitedError{Wait: wait}
	}
	m, id, err := members.Of(p.store).CreateMemberSignedIn(r.Context(), username, displayName, password, p.opts.SessionLifetime, p.sessionInfo(r, amrPassword))
	if err != nil {
		// A taken username is found once the password is hashed (argon2id:
		// tens of milliseconds and 19 MiB), so it counts like an account
		// made: given back, it would let one address have the server hash
		// without end by signing up as an existing member. Bad input,
		// refused before the hash, and the store's failures are given back.
		if !errors.Is(err, storage.ErrConflict) {
			p.signUps.Undo(r.Context(), ip)
		}
		if !errors.Is(err, storage.ErrConflict) && !storage.IsInvalid(err) {
			p.opts.Logger.Error("sign-up", zap.Error(err))
		}
		return nil, err
	}
	p.opts.Logger.Info("member signed up", zap.String("username", m.Username))
	p.endPlantedSession(r)
	p.setSessionCookie(w, r, id)
	return m, nil
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func (p *Pages) serveSettings(w http.ResponseWriter, r *http.Request) {
	m, ok := p.RequireMember(w, r)
	if !ok {
		return
	}
	if !p.allowed(w, r, http.MethodGet) {
		return
	}
	r = withMember(r, m)
	p.Render(w, r, http.StatusOK, "Settings", settingsTmpl, settingsData{Member: m, Pages: p.SettingsPages()})
}
