package account

import (
	"bytes"
	"encoding/base64"
	"errors"
	"html/template"
	"image/png"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// AccountPath is the member's account page: display name, password,
// two-factor sign-in, sessions, deleting the account. Its forms post to
// paths below it.
const AccountPath = SettingsPath + "/account"

// ConfirmPath is where a signed-in member gives its password again, so that
// the operations needing a recent sign-in (RecentSignIn: GraphQL's
// updateAccount and deleteAccount, whose inputs carry no password) work
// for members.RecentSignIn from then on. It comes back to its return_to.
const ConfirmPath = AccountPath + "/confirm"

type sessionRow struct {
	*members.Session
	Current bool
}

type twoFactorSetup struct {
	Secret string
	URI    template.URL
	QR     template.URL
}

type accountData struct {
	Member         *members.Member
	Notice         string
	Err            map[string]string
	DisplayName    string
	Sessions       []sessionRow
	MinPassword    int
	MaxPassword    int
	MaxDisplayName int
	TwoFactorOn    bool
	RecoveryLeft   int
	Setup          *twoFactorSetup
	RecoveryCodes  []string
	Passkeys       []members.Passkey
	// RecentSignIn: the session gave its password lately, so passkeys may
	// be added and removed (recentSession).
	RecentSignIn   bool
	MaxPasskeyName int
}

// Notices shown after a change, named by the redirect's ?done=.
var accountNotices = map[string]string{
	"name":            "Your display name was saved.",
	"password":        "Your password was changed. You were signed out everywhere except on this device.",
	"password_access": "Your password was changed. You were signed out everywhere except on this device, and your API tokens and authorized apps were revoked.",
	"session":         "The session was ended.",
	"others":          "You were signed out everywhere else.",
	"twofactor_off":   "Two-factor sign-in is off. You were signed out everywhere except on this device.",
	"passkey_added":   "The passkey was added. You were signed out everywhere except on this device.",
	"passkey_renamed": "The passkey was renamed.",
	"passkey_removed": "The passkey was removed. You were signed out everywhere except on this device.",
	"confirmed":       "Confirmed. For the next few minutes this browser may change your password or delete your account from the site's apps.",
}

// serveAccountPages serves AccountPath and its forms to the signed-in
// member. Signed out, the page and every form go to sign-in, which comes
// back to the page (not to a form's path).
func (p *Pages) serveAccountPages(w http.ResponseWriter, r *http.Request) {
	m, err := p.sessionMember(r)
	if err != nil {
		p.renderStoreFailure(w, r, err, "")
		return
	}
	if m == nil {
		http.Redirect(w, r, SignInURL(AccountPath), http.StatusSeeOther)
		return
	}
	p.Protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serveAccount(w, r, m) })).ServeHTTP(w, withMember(r, m))
}

func (p *Pages) serveAccount(w http.ResponseWriter, r *http.Request, m *members.Member) {
	sub := strings.TrimPrefix(r.URL.Path, AccountPath)
	if sub == "" || sub == "/" {
		if !p.allowed(w, r, http.MethodGet) {
			return
		}
		p.renderAccount(w, r, m, http.StatusOK, accountData{Notice: accountNotices[r.URL.Query().Get("done")]})
		return
	}
	if sub == "/confirm" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		p.renderConfirm(w, r, m, http.StatusOK, "")
		return
	}
	handlers := map[string]func(http.ResponseWriter, *http.Request, *members.Member){
		"/confirm":                   p.postConfirm,
		"/display_name":              p.postDisplayName,
		"/password":                  p.postPassword,
		"/sessions/end":              p.postEndSession,
		"/sessions/end_others":       p.postEndOtherSessions,
		"/delete":                    p.postDeleteAccount,
		"/two_factor/start":          p.postTwoFactorStart,
		"/two_factor/confirm":        p.postTwoFactorConfirm,
		"/two_factor/disable":        p.postTwoFactorDisable,
		"/two_factor/recovery_codes": p.postRecoveryCodes,
		"/passkeys/rename":           p.postPasskeyRename,
		"/passkeys/remove":           p.postPasskeyRemove,
	}
	jsonForms := map[string]func(http.ResponseWriter, *http.Request, *members.Member){
		"/passkeys/options": p.postPasskeyOptions,
		"/passkeys/add":     p.postPasskeyAdd,
	}
	if h, ok := jsonForms[sub]; ok {
		if !p.allowed(w, r, http.MethodPost) {
			return
		}
		if res := p.changes.Allow(r.Context(), "member:"+m.ID); !res.Allowed {
			metrics.RateLimited(metrics.LimitAccountChanges)
			w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(res.RetryAfter)))
			passkeyError(w, http.StatusTooManyRequests, "You made many changes in a short time. Try again in a few minutes.")
			return
		}
		h(w, r, m)
		return
	}
	h, ok := handlers[sub]
	if !ok {
		p.renderError(w, r, http.StatusNotFound, "Not found", "There is no page here.")
		return
	}
	if !p.allowed(w, r, http.MethodPost) || !p.ParseForm(w, r) {
		return
	}
	if res := p.changes.Allow(r.Context(), "member:"+m.ID); !res.Allowed {
		metrics.RateLimited(metrics.LimitAccountChanges)
		secs := ratelimit.RetryAfterSeconds(res.RetryAfter)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		p.renderAccount(w, r, m, http.StatusTooManyRequests, accountData{
			Notice: "You made many changes in a short time. You can try again in " + humanWait(secs) + "."})
		return
	}
	h(w, r, m)
}

// renderAccount shows the account page with d's notice, errors and one-time
// values, filling in the rest from the store.
func (p *Pages) renderAccount(w http.ResponseWriter, r *http.Request, m *members.Member, status int, d accountData) {
	d.Member = m
	if d.DisplayName == "" && d.Err["name"] == "" {
		d.DisplayName = m.DisplayName
	}
	d.MinPassword, d.MaxPassword, d.MaxDisplayName = members.MinPasswordLen, members.MaxPasswordLen, members.MaxDisplayNameLen
	current := ""
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		current = members.SessionPublicID(c.Value)
	}
	sessions, err := members.Of(p.store).Sessions(r.Context(), m.ID)
	if err == nil {
		d.TwoFactorOn, d.RecoveryLeft, err = members.Of(p.store).TwoFactorStatus(r.Context(), m.ID)
	}
	if err == nil {
		d.Passkeys, err = members.Of(p.store).Passkeys(r.Context(), m.ID)
	}
	d.RecentSignIn, d.MaxPasskeyName = p.recentSession(r), members.MaxPasskeyNameLen
	if err != nil {
		p.renderStoreFailure(w, r, err, "Your account page could not be shown. Try again in a moment.")
		return
	}
	for _, s := range sessions {
		d.Sessions = append(d.Sessions, sessionRow{Session: s, Current: s.ID == current})
	}
	if !d.TwoFactorOn {
		if secret, err := members.Of(p.store).TwoFactorSetupSecret(r.Context(), m.ID); err == nil {
			d.Setup = p.twoFactorSetup(r, m, secret)
		}
	}
	p.renderWithPasskeys(w, r, status, "Your account", accountTmpl, d)
}

// accountError shows the account page with msg in section's place.
func (p *Pages) accountError(w http.ResponseWriter, r *http.Request, m *members.Member, status int, section, msg string) {
	p.renderAccount(w, r, m, status, accountData{Err: map[string]string{section: msg}})
}

// passwordError answers a failed current-password check (or a failed
// code check) in section.
func (p *Pages) passwordError(w http.ResponseWriter, r *http.Request, m *members.Member, section string, err error) {
	var limited *SignInLimitedError
	switch {
	case errors.As(err, &limited):
		secs := ratelimit.RetryAfterSeconds(limited.Wait)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		p.accountError(w, r, m, http.StatusTooManyRequests, section,
			"Too many wrong passwords or codes. You can try again in "+humanWait(secs)+".")
	case errors.Is(err, members.ErrBadCredentials):
		p.accountError(w, r, m, http.StatusUnauthorized, section, "Your current password is not right.")
	case errors.Is(err, members.ErrWrongCode):
		p.accountError(w, r, m, http.StatusUnauthorized, section, "That code is not right. Check your app and try again.")
	case errors.Is(err, members.ErrCodeReused):
		p.accountError(w, r, m, http.StatusUnauthorized, section, "That code was already used. Wait for your app to show the next one.")
	case errors.Is(err, members.ErrSuspended):
		p.renderError(w, r, http.StatusForbidden, "Account suspended", "This account is suspended. Contact the site's administrator.")
	default:
		p.opts.Logger.Error("account page", zap.Error(err))
		p.renderStoreFailure(w, r, err, "That could not be done. Try again in a moment.")
	}
}

func done(w http.ResponseWriter, r *http.Request, notice string) {
	http.Redirect(w, r, AccountPath+"?done="+notice, http.StatusSeeOther)
}

func (p *Pages) postDisplayName(w http.ResponseWriter, r *http.Request, m *members.Member) {
	name := strings.TrimSpace(r.PostForm.Get("display_name"))
	if _, err := members.Of(p.store).SetDisplayName(r.Context(), m.ID, name); err != nil {
		if storage.IsInvalid(err) {
			p.renderAccount(w, r, m, http.StatusBadRequest, accountData{DisplayName: name, Err: map[string]string{"name": upperFirst(err.Error()) + "."}})
			return
		}
		p.renderStoreFailure(w, r, err, "Your display name could not be saved. Try again in a moment.")
		return
	}
	done(w, r, "name")
}

func (p *Pages) postPassword(w http.ResponseWriter, r *http.Request, m *members.Member) {
	current, next := r.PostForm.Get("current_password"), r.PostForm.Get("password")
	if err := members.ValidatePassword(next); err != nil {
		p.accountError(w, r, m, http.StatusBadRequest, "password", "The new password must be "+
			strconv.Itoa(members.MinPasswordLen)+" to "+strconv.Itoa(members.MaxPasswordLen)+" characters long.")
		return
	}
	if next != r.PostForm.Get("password_confirmation") {
		p.accountError(w, r, m, http.StatusBadRequest, "password", "The two new passwords don't match.")
		return
	}
	if _, err := p.checkPassword(r, m.Username, current); err != nil {
		p.passwordError(w, r, m, "password", err)
		return
	}
	keep := ""
	if c, err := r.Cookie(CookieName); err == nil {
		keep = c.Value
	}
	revoke := r.PostForm.Get("revoke_access") != ""
	tokens, apps, err := members.Of(p.store).ChangePassword(r.Context(), m.ID, next, keep, revoke)
	if err != nil {
		p.renderStoreFailure(w, r, err, "Your password could not be changed. Try again in a moment.")
		return
	}
	p.opts.Logger.Info("member changed password", zap.String("username", m.Username))
	if revoke {
		p.opts.Logger.Info("member revoked access", zap.String("username", m.Username), zap.Int("api_tokens", tokens), zap.Int("apps", apps))
		done(w, r, "password_access")
		return
	}
	done(w, r, "password")
}

func (p *Pages) postEndSession(w http.ResponseWriter, r *http.Request, m *members.Member) {
	err := members.Of(p.store).EndSession(r.Context(), m.ID, r.PostForm.Get("id"))
	switch {
	case errors.Is(err, storage.ErrNotFound):
		p.accountError(w, r, m, http.StatusNotFound, "sessions", "That session has already ended.")
		return
	case err != nil:
		p.renderStoreFailure(w, r, err, "The session could not be ended. Try again in a moment.")
		return
	}
	done(w, r, "session")
}

func (p *Pages) postEndOtherSessions(w http.ResponseWriter, r *http.Request, m *members.Member) {
	keep := ""
	if c, err := r.Cookie(CookieName); err == nil {
		keep = c.Value
	}
	if _, err := members.Of(p.store).EndOtherSessions(r.Context(), m.ID, keep); err != nil {
		p.renderStoreFailure(w, r, err, "Your other sessions could not be ended. Try again in a moment.")
		return
	}
	done(w, r, "others")
}

func (p *Pages) postDeleteAccount(w http.ResponseWriter, r *http.Request, m *members.Member) {
	if !strings.EqualFold(strings.TrimSpace(r.PostForm.Get("confirm_username")), m.Username) {
		p.accountError(w, r, m, http.StatusBadRequest, "delete", "Type your username, "+m.Username+", exactly to confirm.")
		return
	}
	if _, err := p.checkPassword(r, m.Username, r.PostForm.Get("current_password")); err != nil {
		p.passwordError(w, r, m, "delete", err)
		return
	}
	if err := members.Of(p.store).DeleteMember(r.Context(), m.Username); err != nil {
		p.renderStoreFailure(w, r, err, "Your account could not be deleted. Try again in a moment.")
		return
	}
	p.opts.Logger.Info("member deleted their account", zap.String("username", m.Username))
	http.SetCookie(w, p.cookie(r, "", -1))
	// The page is shown signed out: the member no longer exists.
	r = withMember(r, nil)
	r.Header.Del("Cookie")
	p.Render(w, r, http.StatusOK, "Account deleted", messageTmpl, message{
		Text: "Your account and everything in it were deleted.", LinkHref: "/", LinkText: "Go to the home page"})
}

func (p *Pages) postTwoFactorStart(w http.ResponseWriter, r *http.Request, m *members.Member) {
	if _, err := p.checkPassword(r, m.Username, r.PostForm.Get("current_password")); err != nil {
		p.passwordError(w, r, m, "twofactor", err)
		return
	}
	key, err := totp.Generate(totp.GenerateOpts{Issuer: p.opts.SiteName, AccountName: m.Username + "@" + hostOnly(r.Host)})
	if err == nil {
		err = members.Of(p.store).StartTwoFactorSetup(r.Context(), m.ID, key.Secret())
	}
	switch {
	case errors.Is(err, members.ErrTwoFactorOn):
		p.accountError(w, r, m, http.StatusConflict, "twofactor", "Two-factor sign-in is already on.")
		return
	case err != nil:
		p.renderStoreFailure(w, r, err, "Two-factor sign-in could not be set up. Try again in a moment.")
		return
	}
	http.Redirect(w, r, AccountPath+"#two-factor-heading", http.StatusSeeOther)
}

func (p *Pages) postTwoFactorConfirm(w http.ResponseWriter, r *http.Request, m *members.Member) {
	code := strings.TrimSpace(r.PostForm.Get("code"))
	keep := ""
	if c, err := r.Cookie(CookieName); err == nil {
		keep = c.Value
	}
	var codes []string
	err := p.underFailureLimits(r, m.Username, func() error {
		var err error
		codes, err = members.Of(p.store).ConfirmTwoFactor(r.Context(), m.ID, code, keep)
		return err
	}, isCodeFailure)
	switch {
	case errors.Is(err, members.ErrNoSetup):
		p.accountError(w, r, m, http.StatusConflict, "twofactor", "The key expired before it was confirmed. Start again.")
		return
	case errors.Is(err, members.ErrTwoFactorOn):
		p.accountError(w, r, m, http.StatusConflict, "twofactor", "Two-factor sign-in is already on.")
		return
	case err != nil:
		p.passwordError(w, r, m, "twofactor", err)
		return
	}
	p.opts.Logger.Info("member turned two-factor sign-in on", zap.String("username", m.Username))
	m.TwoFactor = true
	p.renderAccount(w, r, m, http.StatusOK, accountData{
		Notice:        "Two-factor sign-in is on. Save your recovery codes now. You were signed out everywhere else.",
		RecoveryCodes: codes,
	})
}

func (p *Pages) postTwoFactorDisable(w http.ResponseWriter, r *http.Request, m *members.Member) {
	if _, err := p.checkPassword(r, m.Username, r.PostForm.Get("current_password")); err != nil {
		p.passwordError(w, r, m, "twofactor", err)
		return
	}
	err := p.checkSecondFactor(r, m)
	if errors.Is(err, members.ErrTwoFactorOff) {
		done(w, r, "twofactor_off")
		return
	}
	if err != nil {
		p.passwordError(w, r, m, "twofactor", err)
		return
	}
	keep := ""
	if c, err := r.Cookie(CookieName); err == nil {
		keep = c.Value
	}
	if err := members.Of(p.store).DisableTwoFactor(r.Context(), m.ID, keep); err != nil {
		p.renderStoreFailure(w, r, err, "Two-factor sign-in could not be turned off. Try again in a moment.")
		return
	}
	p.opts.Logger.Info("member turned two-factor sign-in off", zap.String("username", m.Username))
	done(w, r, "twofactor_off")
}

// postRecoveryCodes replaces the recovery codes, with the password and a
// code (or a recovery code) as for turning two-factor sign-in off.
func (p *Pages) postRecoveryCodes(w http.ResponseWriter, r *http.Request, m *members.Member) {
	if _, err := p.checkPassword(r, m.Username, r.PostForm.Get("current_password")); err != nil {
		p.passwordError(w, r, m, "twofactor", err)
		return
	}
	err := p.checkSecondFactor(r, m)
	if errors.Is(err, members.ErrTwoFactorOff) {
		p.accountError(w, r, m, http.StatusConflict, "twofactor", "Two-factor sign-in is off, so there are no recovery codes.")
		return
	}
	if err != nil {
		p.passwordError(w, r, m, "twofactor", err)
		return
	}
	codes, err := members.Of(p.store).NewRecoveryCodes(r.Context(), m.ID)
	if err != nil {
		p.renderStoreFailure(w, r, err, "New recovery codes could not be made. Try again in a moment.")
		return
	}
	p.opts.Logger.Info("member made new recovery codes", zap.String("username", m.Username))
	p.renderAccount(w, r, m, http.StatusOK, accountData{
		Notice:        "Your new recovery codes are below; the old ones no longer work. Save them now.",
		RecoveryCodes: codes,
	})
}

type confirmData struct {
	Member   *members.Member
	Error    string
	Action   string
	ReturnTo string
	Back     string
	Minutes  int
}

func (p *Pages) renderConfirm(w http.ResponseWriter, r *http.Request, m *members.Member, status int, msg string) {
	d := confirmData{Member: m, Error: msg, Action: ConfirmPath, ReturnTo: p.returnTo(r), Back: AccountPath,
		Minutes: int(members.RecentSignIn / time.Minute)}
	p.Render(w, r, status, "Confirm it is you", confirmTmpl, d)
}

// postConfirm checks the password again (under the sign-in failure
// limits) and records it in the session (members.ConfirmSession), then
// goes back to return_to, or to the account page.
func (p *Pages) postConfirm(w http.ResponseWriter, r *http.Request, m *members.Member) {
	var limited *SignInLimitedError
	_, err := p.checkPassword(r, m.Username, r.PostForm.Get("current_password"))
	switch {
	case errors.As(err, &limited):
		secs := ratelimit.RetryAfterSeconds(limited.Wait)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		p.renderConfirm(w, r, m, http.StatusTooManyRequests, "Too many wrong passwords. You can try again in "+humanWait(secs)+".")
		return
	case errors.Is(err, members.ErrBadCredentials):
		p.renderConfirm(w, r, m, http.StatusUnauthorized, "That password is not right.")
		return
	case err != nil:
		p.passwordError(w, r, m, "confirm", err)
		return
	}
	c, _ := r.Cookie(CookieName)
	if err := members.Of(p.store).ConfirmSession(r.Context(), c.Value); errors.Is(err, storage.ErrNotFound) {
		http.Redirect(w, r, SignInURL(ConfirmPath), http.StatusSeeOther)
		return
	} else if err != nil {
		p.renderStoreFailure(w, r, err, "That could not be confirmed. Try again in a moment.")
		return
	}
	p.opts.Logger.Info("member confirmed their password", zap.String("username", m.Username))
	if rt := p.returnTo(r); rt != "" {
		http.Redirect(w, r, rt, http.StatusSeeOther)
		return
	}
	done(w, r, "confirmed")
}

// RecentSignIn reports whether the member signed in on r gave its password
// in this session within members.RecentSignIn (at sign-in or on
// ConfirmPath): what GraphQL's updateAccount and deleteAccount need, as
// GitHub's "sudo mode" does, since their inputs carry no password. An
// error is the store's.
func (p *Pages) RecentSignIn(r *http.Request) (bool, error) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return false, nil
	}
	_, sess, err := members.Of(p.store).SessionAndMember(r.Context(), c.Value)
	if errors.Is(err, storage.ErrNotFound) || errors.Is(err, members.ErrSuspended) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return sess.RecentlyAuthenticated(time.Now()), nil
}

// checkSecondFactor checks the form's code (or recovery code) of a member
// who turns two-factor sign-in off or replaces the recovery codes, under the
// sign-in failure limits.
func (p *Pages) checkSecondFactor(r *http.Request, m *members.Member) error {
	code := r.PostForm.Get("code")
	return p.underFailureLimits(r, m.Username, func() error {
		_, err := members.Of(p.store).CheckSecondFactor(r.Context(), m.ID, code)
		return err
	}, isCodeFailure)
}

// isCodeFailure: a wrong or reused second-factor code counts as a failed
// attempt.
func isCodeFailure(err error) bool {
	return errors.Is(err, members.ErrWrongCode) || errors.Is(err, members.ErrCodeReused)
}

// twoFactorSetup is what the page shows to add secret to an app: the key,
// its otpauth:// URI and a QR code of it as a PNG data: URI (the pages'
// policy allows data: images; no outside service sees the key).
func (p *Pages) twoFactorSetup(r *http.Request, m *members.Member, secret string) *twoFactorSetup {
	label := url.PathEscape(p.opts.SiteName) + ":" + url.PathEscape(m.Username+"@"+hostOnly(r.Host))
	q := url.Values{}
	q.Set("secret", secret)
	q.Set("issuer", p.opts.SiteName)
	q.Set("algorithm", "SHA1")
	q.Set("digits", strconv.Itoa(members.TOTPDigits))
	q.Set("period", strconv.Itoa(members.TOTPPeriod))
	uri := "otpauth://totp/" + label + "?" + q.Encode()
	s := &twoFactorSetup{Secret: secret, URI: template.URL(uri)}
	if key, err := otp.NewKeyFromURL(uri); err == nil {
		if img, err := key.Image(200, 200); err == nil {
			var b bytes.Buffer
			if png.Encode(&b, img) == nil {
				s.QR = template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes()))
			}
		}
	}
	return s
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}
