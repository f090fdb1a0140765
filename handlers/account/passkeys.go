package account

import (
	"encoding/json"
	"errors"
	"html"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Passkeys (WebAuthn). The relying party is the site as the browser sees
// it: its RP ID is the host the page was served from, and an answer is
// accepted only from that exact origin (scheme, host and port), so a
// passkey made for this site answers nowhere else and no other site's
// answer is taken here. Each ceremony (the options sent, the answer
// checked) is kept in the store for members.PasskeyCeremonyLifetime under
// a random secret the browser holds in a cookie, and used once.
//
// The pages load passkey.js (a file allowed by its hash, like copy.js):
// without JavaScript or WebAuthn the passkey buttons stay hidden and the
// password and code forms work without them.

// Paths of the passkey ceremonies.
const (
	PasskeyScriptPath           = "/auth/passkey.js"
	PasskeySignInOptionsPath    = "/auth/passkey/options"
	PasskeySignInPath           = "/auth/passkey/sign_in"
	TwoFactorPasskeyOptionsPath = TwoFactorPath + "/passkey/options"
	TwoFactorPasskeyPath        = TwoFactorPath + "/passkey"
)

// passkeyCookie names the ceremony in flight.
const passkeyCookie = "hearth_webauthn"

// How members sign in, as RFC 8176 names the methods (members.Session.AMR;
// the OpenID provider's amr claim and hearth_gate's rules read them). A
// passkey is "hwk" (a key the authenticator holds); signing in with it
// alone asks the authenticator to verify the person (a PIN or biometric),
// so that is two factors too.
var (
	amrPassword        = []string{"pwd"}
	amrPasswordAndCode = []string{"pwd", "otp", "mfa"}
	amrPasswordAndKey  = []string{"pwd", "hwk", "mfa"}
	amrPasskey         = []string{"hwk", "mfa"}
)

// Ceremony purposes (members.PasskeyCeremony.Purpose).
const (
	ceremonySignIn    = "sign_in"
	ceremonyTwoFactor = "two_factor"
	ceremonyRegister  = "register"
)

// CeremoniesPerIP bounds the passkey ceremonies one client address starts
// within CeremonyWindow (each is a record in the store until it expires).
const (
	CeremoniesPerIP = 60
	CeremonyWindow  = 5 * time.Minute
)

var (
	passkeyScript     = mustRead("templates/passkey.js")
	passkeyScriptHash = cspHash(passkeyScript)
	passkeyHead       = template.HTML(`<script src="` + html.EscapeString(PasskeyScriptPath+"?v="+url.QueryEscape(passkeyScriptHash[8:20])) +
		`" integrity="` + html.EscapeString(strings.Trim(passkeyScriptHash, "'")) + `" defer></script>`)
)

// passkeyPolicy is the pages' policy (policy) that also runs passkey.js
// and lets it fetch from this site.
var passkeyPolicy = strings.Replace(strings.Replace(policy("'self'"),
	"script-src "+copyScriptHash, "script-src "+copyScriptHash+" "+passkeyScriptHash, 1),
	"; form-action", "; connect-src 'self'; form-action", 1)

// renderWithPasskeys renders a page that uses passkey.js: the page's
// policy allows it (and its requests to this site), unless the caller set
// its own policy.
func (p *Pages) renderWithPasskeys(w http.ResponseWriter, r *http.Request, status int, title string, content *template.Template, data any) {
	if w.Header().Get("Content-Security-Policy") == "" {
		w.Header().Set("Content-Security-Policy", passkeyPolicy)
	}
	p.RenderWith(w, r, status, title, content, data, PageExtras{Head: passkeyHead})
}

// relyingParty is the WebAuthn relying party of the site r was sent to.
func (p *Pages) relyingParty(r *http.Request) (*webauthn.WebAuthn, error) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := strings.ToLower(r.Host)
	if host == "" || strings.ContainsAny(host, "/\\@ ") {
		return nil, errors.New("no host")
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	timeout := webauthn.TimeoutConfig{Enforce: true, Timeout: members.PasskeyCeremonyLifetime, TimeoutUVD: members.PasskeyCeremonyLifetime}
	return webauthn.New(&webauthn.Config{
		RPID:          strings.TrimSuffix(name, "."),
		RPDisplayName: p.SiteName(),
		RPOrigins:     []string{scheme + "://" + host},
		Timeouts:      webauthn.TimeoutsConfig{Login: timeout, Registration: timeout},
	})
}

// passkeyUser is a member as the WebAuthn library sees it: the user
// handle is the member's id.
type passkeyUser struct {
	m    *members.Member
	keys []members.Passkey
}

func (u passkeyUser) WebAuthnID() []byte   { return []byte(u.m.ID) }
func (u passkeyUser) WebAuthnName() string { return u.m.Username }
func (u passkeyUser) WebAuthnDisplayName() string {
	if u.m.DisplayName != "" {
		return u.m.DisplayName
	}
	return u.m.Username
}
func (u passkeyUser) WebAuthnCredentials() []webauthn.Credential {
	out := make([]webauthn.Credential, len(u.keys))
	for i, k := range u.keys {
		out[i] = k.Credential
	}
	return out
}

func (p *Pages) passkeyUser(r *http.Request, m *members.Member) (passkeyUser, error) {
	keys, err := members.Of(p.store).Passkeys(r.Context(), m.ID)
	return passkeyUser{m: m, keys: keys}, err
}

// siteRelyingParty is relyingParty, or nil once it has answered the request
// when the page's address can't be used.
func (p *Pages) siteRelyingParty(w http.ResponseWriter, r *http.Request) *webauthn.WebAuthn {
	wa, err := p.relyingParty(r)
	if err != nil {
		passkeyError(w, http.StatusBadRequest, "This page's address can't be used with passkeys.")
		return nil
	}
	return wa
}

// passkeyParties are the two sides of a ceremony with member m: the site
// and m with its passkeys. ok is false once it has answered the request.
func (p *Pages) passkeyParties(w http.ResponseWriter, r *http.Request, m *members.Member) (wa *webauthn.WebAuthn, u passkeyUser, ok bool) {
	if wa = p.siteRelyingParty(w, r); wa == nil {
		return nil, u, false
	}
	u, err := p.passkeyUser(r, m)
	if err != nil {
		p.passkeyFailure(w, err)
		return nil, u, false
	}
	return wa, u, true
}

// passkeyJSON answers a passkey request (passkey.js reads it).
func passkeyJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func passkeyError(w http.ResponseWriter, status int, msg string) {
	passkeyJSON(w, status, map[string]string{"error": msg})
}

// passkeyFailure answers a store failure.
func (p *Pages) passkeyFailure(w http.ResponseWriter, err error) {
	if status, _, ok := inboxtapi.Refusal(w, err); ok {
		passkeyError(w, status, "The site is busy. Try again in a moment.")
		return
	}
	p.opts.Logger.Error("passkey", zap.Error(err))
	passkeyError(w, http.StatusInternalServerError, "That could not be done. Try again in a moment.")
}

// startCeremony keeps c, hands its secret to the browser and answers the
// options.
func (p *Pages) startCeremony(w http.ResponseWriter, r *http.Request, c members.PasskeyCeremony, options any) {
	if res := p.ceremonies.Allow(r.Context(), ratelimit.AddressKey(p.opts.ClientIP(r))); !res.Allowed {
		metrics.RateLimited(metrics.LimitSignIn)
		w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(res.RetryAfter)))
		passkeyError(w, http.StatusTooManyRequests, "Too many attempts. Try again in a few minutes.")
		return
	}
	secret, err := members.Of(p.store).StartPasskeyCeremony(r.Context(), c)
	if err != nil {
		p.passkeyFailure(w, err)
		return
	}
	ck := p.cookie(r, secret, int(members.PasskeyCeremonyLifetime.Seconds()))
	ck.Name = passkeyCookie
	ck.SameSite = http.SameSiteStrictMode
	http.SetCookie(w, ck)
	passkeyJSON(w, http.StatusOK, options)
}

// takeCeremony ends the ceremony of r's cookie for purpose and returns it
// with the body of r (the authenticator's answer). It answers itself and
// returns nil when there is none.
func (p *Pages) takeCeremony(w http.ResponseWriter, r *http.Request, purpose string) (*members.PasskeyCeremony, []byte) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		passkeyError(w, http.StatusRequestEntityTooLarge, "The answer was too large.")
		return nil, nil
	}
	secret := ""
	if c, err := r.Cookie(passkeyCookie); err == nil {
		secret = c.Value
	}
	ck := p.cookie(r, "", -1)
	ck.Name = passkeyCookie
	http.SetCookie(w, ck)
	c, err := members.Of(p.store).TakePasskeyCeremony(r.Context(), secret, purpose)
	if errors.Is(err, storage.ErrNotFound) {
		passkeyError(w, http.StatusBadRequest, "This took too long. Try again.")
		return nil, nil
	}
	if err != nil {
		p.passkeyFailure(w, err)
		return nil, nil
	}
	return c, body
}

// servePasskeyScript serves passkey.js, the same for everyone.
func servePasskeyScript(w http.ResponseWriter, r *http.Request) {
	serveScript(w, r, passkeyScript)
}

// postPasskeySignInOptions starts a sign-in with a discoverable passkey:
// no username, any passkey of this site the authenticator holds. The
// authenticator must verify the person (a PIN, a fingerprint): the passkey
// is then both factors.
func (p *Pages) postPasskeySignInOptions(w http.ResponseWriter, r *http.Request) {
	if !p.allowed(w, r, http.MethodPost) {
		return
	}
	wa := p.siteRelyingParty(w, r)
	if wa == nil {
		return
	}
	opts, sd, err := wa.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		p.passkeyFailure(w, err)
		return
	}
	p.startCeremony(w, r, members.PasskeyCeremony{Purpose: ceremonySignIn, Data: *sd}, opts)
}

// postPasskeySignIn checks the authenticator's answer to a sign-in without
// a username and signs its member in.
func (p *Pages) postPasskeySignIn(w http.ResponseWriter, r *http.Request) {
	if !p.allowed(w, r, http.MethodPost) {
		return
	}
	c, body := p.takeCeremony(w, r, ceremonySignIn)
	if c == nil {
		return
	}
	wa := p.siteRelyingParty(w, r)
	if wa == nil {
		return
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(body)
	if err != nil {
		passkeyError(w, http.StatusBadRequest, "The passkey's answer could not be read.")
		return
	}
	var m *members.Member
	var storeErr error
	user, cred, err := wa.ValidatePasskeyLogin(func(_, handle []byte) (webauthn.User, error) {
		mm, err := members.Of(p.store).MemberByID(r.Context(), string(handle))
		if err != nil {
			if !errors.Is(err, storage.ErrNotFound) {
				storeErr = err
			}
			return nil, err
		}
		u, err := p.passkeyUser(r, mm)
		if err != nil {
			storeErr = err
			return nil, err
		}
		m = mm
		return u, nil
	}, c.Data, parsed)
	if storeErr != nil {
		p.passkeyFailure(w, storeErr)
		return
	}
	if err != nil || user == nil || m == nil {
		metrics.SignIn(metrics.SignInFailure)
		p.opts.Logger.Info("passkey sign-in refused", zap.String("client_ip", p.opts.ClientIP(r)), zap.String("reason", passkeyReason(err)))
		passkeyError(w, http.StatusUnauthorized, "This passkey is not one of this site's. Sign in with your password, or use another passkey.")
		return
	}
	p.finishPasskeySignIn(w, r, m, cred, amrPasskey)
}

// passkeyReason is the library's reason for a refusal, for the log (it
// names no secret).
func passkeyReason(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Type + ": " + pe.Details
	}
	if err != nil {
		return err.Error()
	}
	return "no member"
}

// finishPasskeySignIn records the use of cred and starts m's session.
func (p *Pages) finishPasskeySignIn(w http.ResponseWriter, r *http.Request, m *members.Member, cred *webauthn.Credential, amr []string) {
	if cred.Authenticator.CloneWarning {
		// The signature counter went back: two authenticators hold this
		// key.
		p.opts.Logger.Warn("passkey sign-in refused: signature counter went back", zap.String("username", m.Username))
		passkeyError(w, http.StatusUnauthorized, "This passkey can't be trusted any more. Sign in another way and remove it.")
		return
	}
	if m.Suspended {
		metrics.SignIn(metrics.SignInSuspended)
		passkeyError(w, http.StatusForbidden, "This account is suspended. Contact the site's administrator.")
		return
	}
	if err := members.Of(p.store).PasskeyUsed(r.Context(), m.ID, *cred); err != nil && !errors.Is(err, members.ErrPasskeyNotFound) {
		p.passkeyFailure(w, err)
		return
	}
	if err := p.startSession(w, r, m, amr...); err != nil {
		p.logSessionRefused(m, err)
		if errors.Is(err, members.ErrCredentialsChanged) || errors.Is(err, members.ErrSuspended) {
			passkeyError(w, http.StatusUnauthorized, signInAgain)
			return
		}
		p.passkeyFailure(w, err)
		return
	}
	p.resetFailures(r.Context(), m.Username)
	metrics.SignIn(metrics.SignInSuccess)
	p.opts.Logger.Info("signed in", zap.String("username", m.Username), zap.Strings("amr", amr))
	passkeyJSON(w, http.StatusOK, map[string]string{"redirect": p.orSettings(r, p.returnTo(r))})
}

// twoFactorMember is the member of r's sign-in challenge (the password
// was right), or nil after answering.
func (p *Pages) twoFactorMember(w http.ResponseWriter, r *http.Request) (*members.Member, string) {
	secret := ""
	if c, err := r.Cookie(challengeCookie); err == nil {
		secret = c.Value
	}
	m, err := members.Of(p.store).SignInChallengeMember(r.Context(), secret)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		p.passkeyFailure(w, err)
		return nil, ""
	}
	if m == nil || m.Suspended {
		passkeyError(w, http.StatusUnauthorized, "Your sign-in took too long. Start again.")
		return nil, ""
	}
	return m, secret
}

// postTwoFactorPasskeyOptions starts the second factor with one of the
// member's passkeys (any of them; the person need not be verified again,
// the password was the first factor).
func (p *Pages) postTwoFactorPasskeyOptions(w http.ResponseWriter, r *http.Request) {
	if !p.allowed(w, r, http.MethodPost) {
		return
	}
	m, _ := p.twoFactorMember(w, r)
	if m == nil {
		return
	}
	wa, u, ok := p.passkeyParties(w, r, m)
	if !ok {
		return
	}
	if len(u.keys) == 0 {
		passkeyError(w, http.StatusBadRequest, "This account has no passkey. Enter a code instead.")
		return
	}
	opts, sd, err := wa.BeginLogin(u, webauthn.WithUserVerification(protocol.VerificationPreferred))
	if err != nil {
		p.passkeyFailure(w, err)
		return
	}
	p.startCeremony(w, r, members.PasskeyCeremony{Purpose: ceremonyTwoFactor, MemberID: m.ID, Stamp: m.SecurityStamp, Data: *sd}, opts)
}

// postTwoFactorPasskey checks the passkey's answer as the second factor
// and signs the member in.
func (p *Pages) postTwoFactorPasskey(w http.ResponseWriter, r *http.Request) {
	if !p.allowed(w, r, http.MethodPost) {
		return
	}
	c, body := p.takeCeremony(w, r, ceremonyTwoFactor)
	if c == nil {
		return
	}
	m, secret := p.twoFactorMember(w, r)
	if m == nil {
		return
	}
	if m.ID != c.MemberID || m.SecurityStamp != c.Stamp {
		passkeyError(w, http.StatusUnauthorized, "Your sign-in took too long. Start again.")
		return
	}
	wa, u, ok := p.passkeyParties(w, r, m)
	if !ok {
		return
	}
	var cred *webauthn.Credential
	err := p.underFailureLimits(r, m.Username, func() error {
		parsed, err := protocol.ParseCredentialRequestResponseBytes(body)
		if err != nil {
			return err
		}
		cred, err = wa.ValidateLogin(u, c.Data, parsed)
		return err
	}, func(err error) bool { return err != nil })
	var limited *SignInLimitedError
	switch {
	case errors.As(err, &limited):
		metrics.SignIn(metrics.SignInRateLimited)
		w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(limited.Wait)))
		passkeyError(w, http.StatusTooManyRequests, "Too many attempts. Try again in a few minutes.")
		return
	case err != nil:
		metrics.SignIn(metrics.SignInFailure)
		p.opts.Logger.Info("passkey second factor refused", zap.String("username", m.Username), zap.String("reason", passkeyReason(err)))
		passkeyError(w, http.StatusUnauthorized, "That passkey is not one of this account's. Try another, or enter a code.")
		return
	}
	if err := members.Of(p.store).DeleteSignInChallenge(r.Context(), secret); err != nil {
		p.passkeyFailure(w, err)
		return
	}
	http.SetCookie(w, p.challengeCookie(r, "", -1))
	p.finishPasskeySignIn(w, r, m, cred, amrPasswordAndKey)
}

// recentSession reports whether r's session gave its password (or
// passkey) within members.RecentSignIn: adding or removing a passkey
// needs it, so a session taken over cannot plant a key of its own.
func (p *Pages) recentSession(r *http.Request) bool {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return false
	}
	_, sess, err := members.Of(p.store).SessionAndMember(r.Context(), c.Value)
	return err == nil && sess.RecentlyAuthenticated(time.Now())
}

const confirmFirst = "For your safety, confirm your password first (Confirm it's you, on this page)."

// postPasskeyOptions starts registering a passkey for m: a discoverable
// credential (it signs in without a username), none of m's authenticators
// twice.
func (p *Pages) postPasskeyOptions(w http.ResponseWriter, r *http.Request, m *members.Member) {
	if !p.recentSession(r) {
		passkeyError(w, http.StatusForbidden, confirmFirst)
		return
	}
	wa, u, ok := p.passkeyParties(w, r, m)
	if !ok {
		return
	}
	if len(u.keys) >= members.MaxPasskeysPerMember {
		passkeyError(w, http.StatusConflict, upperFirst(members.ErrTooManyPasskeys.Error())+".")
		return
	}
	opts, sd, err := wa.BeginRegistration(u,
		webauthn.WithResidentKeyRequirement(protocol.ResidentKeyRequirementRequired),
		webauthn.WithExclusions(webauthn.Credentials(u.WebAuthnCredentials()).CredentialDescriptors()),
		webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{
			ResidentKey: protocol.ResidentKeyRequirementRequired, RequireResidentKey: protocol.ResidentKeyRequired(),
			UserVerification: protocol.VerificationPreferred,
		}))
	if err != nil {
		p.passkeyFailure(w, err)
		return
	}
	p.startCeremony(w, r, members.PasskeyCeremony{Purpose: ceremonyRegister, MemberID: m.ID, Stamp: m.SecurityStamp, Data: *sd}, opts)
}

// postPasskeyAdd checks the new passkey and keeps it: a change of
// credentials, which signs the member out everywhere else.
func (p *Pages) postPasskeyAdd(w http.ResponseWriter, r *http.Request, m *members.Member) {
	c, body := p.takeCeremony(w, r, ceremonyRegister)
	if c == nil {
		return
	}
	if c.MemberID != m.ID || c.Stamp != m.SecurityStamp {
		passkeyError(w, http.StatusBadRequest, "This took too long. Try again.")
		return
	}
	if !p.recentSession(r) {
		passkeyError(w, http.StatusForbidden, confirmFirst)
		return
	}
	var in struct {
		Name       string          `json:"name"`
		Credential json.RawMessage `json:"credential"`
	}
	if err := json.Unmarshal(body, &in); err != nil || len(in.Credential) == 0 {
		passkeyError(w, http.StatusBadRequest, "The new passkey could not be read.")
		return
	}
	wa, u, ok := p.passkeyParties(w, r, m)
	if !ok {
		return
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(in.Credential)
	if err != nil {
		passkeyError(w, http.StatusBadRequest, "The new passkey could not be read.")
		return
	}
	cred, err := wa.CreateCredential(u, c.Data, parsed)
	if err != nil {
		p.opts.Logger.Info("passkey registration refused", zap.String("username", m.Username), zap.String("reason", passkeyReason(err)))
		passkeyError(w, http.StatusBadRequest, "The new passkey was refused. Try again.")
		return
	}
	keep := ""
	if ck, err := r.Cookie(CookieName); err == nil {
		keep = ck.Value
	}
	_, err = members.Of(p.store).AddPasskey(r.Context(), m, in.Name, *cred, keep)
	switch {
	case errors.Is(err, members.ErrTooManyPasskeys), errors.Is(err, members.ErrPasskeyExists):
		passkeyError(w, http.StatusConflict, upperFirst(err.Error())+".")
		return
	case errors.Is(err, members.ErrCredentialsChanged), errors.Is(err, members.ErrSuspended):
		passkeyError(w, http.StatusConflict, "Your account's sign-in settings changed meanwhile. Reload the page and try again.")
		return
	case err != nil:
		p.passkeyFailure(w, err)
		return
	}
	p.opts.Logger.Info("member added a passkey", zap.String("username", m.Username))
	passkeyJSON(w, http.StatusOK, map[string]string{"redirect": AccountPath + "?done=passkey_added#passkeys-heading"})
}

// postPasskeyRename names one of m's passkeys.
func (p *Pages) postPasskeyRename(w http.ResponseWriter, r *http.Request, m *members.Member) {
	err := members.Of(p.store).RenamePasskey(r.Context(), m.ID, r.PostForm.Get("id"), r.PostForm.Get("name"))
	switch {
	case errors.Is(err, members.ErrPasskeyNotFound):
		p.accountError(w, r, m, http.StatusNotFound, "passkeys", "That passkey is not one of yours (any more).")
	case err != nil:
		p.renderStoreFailure(w, r, err, "The passkey could not be renamed. Try again in a moment.")
	default:
		done(w, r, "passkey_renamed")
	}
}

// postPasskeyRemove removes one of m's passkeys: a change of credentials,
// which needs a recent sign-in and signs the member out everywhere else.
func (p *Pages) postPasskeyRemove(w http.ResponseWriter, r *http.Request, m *members.Member) {
	if !p.recentSession(r) {
		p.accountError(w, r, m, http.StatusForbidden, "passkeys", confirmFirst)
		return
	}
	keep := ""
	if ck, err := r.Cookie(CookieName); err == nil {
		keep = ck.Value
	}
	err := members.Of(p.store).RemovePasskey(r.Context(), m.ID, r.PostForm.Get("id"), keep)
	switch {
	case errors.Is(err, members.ErrPasskeyNotFound):
		p.accountError(w, r, m, http.StatusNotFound, "passkeys", "That passkey is not one of yours (any more).")
	case err != nil:
		p.renderStoreFailure(w, r, err, "The passkey could not be removed. Try again in a moment.")
	default:
		p.opts.Logger.Info("member removed a passkey", zap.String("username", m.Username))
		done(w, r, "passkey_removed")
	}
}
