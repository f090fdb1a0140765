package graphql

import (
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/handlers/inbound"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Inboxt's account operations (the web app's; third_party/operations/web
// in interop/inboxt). Inboxt lets API tokens run only the resolvers marked
// @ApiTokenAllowed; every other one answers FORBIDDEN "API tokens are not
// allowed for this operation" (apps/api/src/common/guards/api-token.guard.ts
// @ 45f4314). Hearth refuses its OAuth access tokens the same way: these
// operations belong to a member's signed-in session.

const msgTokensNotAllowed = "API tokens are not allowed for this operation"

// errNoEmail answers the operations that need the site to send e-mail.
var errNoEmail = &userError{codeBadRequest, "this site does not send e-mail: members have no e-mail address to verify or recover; " +
	"a member who lost their password asks the site's operator to reset it (hearth member passwd)"}

// accountDomain is the domain of members' addresses (Options.AccountDomain,
// or the request's host without its port).
func (s *Server) accountDomain(r *http.Request) string {
	if s.opts.AccountDomain != "" {
		return s.opts.AccountDomain
	}
	if h, _, err := net.SplitHostPort(r.Host); err == nil {
		return h
	}
	return r.Host
}

// appEmailDomain is the domain part Zod's z.email() accepts (Inboxt's web
// app validates its sign-in form with it before sending anything, zod
// 4's email regex as bundled in the app @ 45f4314): dotted labels ending
// in a label of two letters or more.
var appEmailDomain = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9-]*\.)+[A-Za-z]{2,}$`)

// addressDomain is the domain of the address Hearth reports for a member
// (User.emailAddress): the account domain, or, when that is a dotless
// name (localhost) or an IP address that Inboxt's web app would refuse,
// the account domain under ".invalid", the name RFC 6761 keeps from ever
// resolving, since the address receives no mail either way.
func (s *Server) addressDomain(r *http.Request) string {
	d := s.accountDomain(r)
	if appEmailDomain.MatchString(d) {
		return d
	}
	return strings.Trim(d, "[]") + ".invalid"
}

// memberAddress is the address Hearth reports for a member.
func (s *Server) memberAddress(r *http.Request, username string) string {
	return username + "@" + s.addressDomain(r)
}

// usernameOf is the username an address names: the bare username,
// username@<account domain> or the address Hearth reports
// (memberAddress), any case in the domain. Another address is returned
// as it is, which names no member.
func (s *Server) usernameOf(r *http.Request, address string) string {
	address = strings.TrimSpace(address)
	at := strings.LastIndexByte(address, '@')
	if at < 0 {
		return address
	}
	domain := address[at+1:]
	if strings.EqualFold(domain, s.accountDomain(r)) || strings.EqualFold(domain, s.addressDomain(r)) {
		return address[:at]
	}
	return address
}

// sessionOnly refuses API tokens and OAuth access tokens. It returns the
// caller otherwise.
func sessionOnly(ctx context.Context) (*caller, error) {
	c := callerOf(ctx)
	if c == nil {
		return nil, errNoCaller
	}
	if !c.Session {
		return nil, &userError{codeForbidden, msgTokensNotAllowed}
	}
	return c, nil
}

// signInRequest is the request of signIn or createAccount, which make a
// session: refused to a token (refuseTokens) or where the API has no
// member pages.
func (s *Server) signInRequest(ctx context.Context) (*requestState, error) {
	if err := refuseTokens(ctx); err != nil {
		return nil, err
	}
	if s.opts.Pages == nil {
		return nil, errNoSessions
	}
	return stateOf(ctx), nil
}

// refuseTokens is sessionOnly for operations that also run signed out.
func refuseTokens(ctx context.Context) error {
	if c := callerOf(ctx); c != nil && (c.APIToken != nil || c.OAuth != nil) {
		return &userError{codeForbidden, msgTokensNotAllowed}
	}
	return nil
}

// createSessionToken makes an API token for m as the caller's session read
// it (apitokens.CreateFromSession): when the member's credentials changed
// while the request ran, the change ended the session, and the answer is
// UNAUTHORIZED.
func (s *Server) createSessionToken(ctx context.Context, m *members.Member, name string, lifetime time.Duration) (*apitokens.Token, string, error) {
	t, secret, err := apitokens.Of(s.store).CreateFromSession(ctx, m, name, lifetime)
	if errors.Is(err, members.ErrCredentialsChanged) || errors.Is(err, members.ErrSuspended) {
		return nil, "", &userError{codeUnauthorized, "this session ended: the account's password or sign-in settings changed; sign in again"}
	}
	return t, secret, err
}

// errCookieDropped answers signIn and createAccount from a browser on a
// plain-HTTP page under a name other than localhost, which would drop the
// Secure session cookie: Inboxt's web app would otherwise show success
// and then the sign-in form again. BAD_REQUEST, as Inboxt's sign-in
// answers a sign-in it refuses, with the sign-in page's words.
var errCookieDropped = &userError{codeBadRequest, account.CookieDroppedMessage}

// SignIn is the member sign-in of the site's sign-in page
// (account.Pages.SignIn: same rate limits, same session cookie).
// emailAddress is the username or username@<account domain>. Wrong
// credentials answer as Inboxt's (auth.service.ts @ 45f4314: BAD_REQUEST
// "Invalid email address or password").
func (r *mutationResolver) SignIn(ctx context.Context, in generated.SignInInput) (*generated.Void, error) {
	st, err := r.s.signInRequest(ctx)
	if err != nil {
		return nil, err
	}
	username := r.s.usernameOf(st.r, in.EmailAddress)
	_, err = r.s.opts.Pages.SignIn(st.w, st.r, username, in.Password)
	var limited *account.SignInLimitedError
	switch {
	case errors.Is(err, account.ErrCookieWouldBeDropped):
		return nil, errCookieDropped
	case errors.As(err, &limited):
		secs := ratelimit.RetryAfterSeconds(limited.Wait)
		st.w.Header().Set("Retry-After", strconv.Itoa(secs))
		return nil, &userError{codeTooManyRequests, "too many failed sign-ins; retry after " + strconv.Itoa(secs) + " s"}
	case errors.Is(err, members.ErrBadCredentials):
		return nil, &userError{codeBadRequest, "Invalid email address or password"}
	case errors.Is(err, members.ErrSuspended):
		return nil, &userError{codeForbidden, "this account is suspended, so it can't sign in; contact the site's administrator"}
	case errors.Is(err, members.ErrCredentialsChanged):
		return nil, &userError{codeUnauthorized, "the account's password or sign-in settings changed while signing in: sign in again"}
	case errors.Is(err, account.ErrSecondFactorRequired):
		// Inboxt's SignInInput has no field for a code (emailAddress and
		// password only, inboxt-schema.graphql @ 45f4314), so a member with
		// two-factor sign-in signs in on the site's page; no session starts.
		return nil, &userError{codeForbidden, "this account uses two-factor sign-in: sign in on the site's sign-in page (" + account.SignInPath + ")"}
	case err != nil:
		return nil, err
	}
	return success, nil
}

// SignOut ends the member's session and clears its cookie, as the sign-out
// page does.
func (r *mutationResolver) SignOut(ctx context.Context) (*generated.Void, error) {
	if _, err := sessionOnly(ctx); err != nil {
		return nil, err
	}
	st := stateOf(ctx)
	r.s.opts.Pages.SignOut(st.w, st.r)
	return success, nil
}

// CreateAccount is the site's sign-up (account.Pages.SignUp): only when
// registration is open, under its per-address limit; the new member is
// signed in. Hearth members have no e-mail address: emailAddress must be
// the username or username@<account domain>.
func (r *mutationResolver) CreateAccount(ctx context.Context, in generated.CreateAccountInput) (*generated.Void, error) {
	st, err := r.s.signInRequest(ctx)
	if err != nil {
		return nil, err
	}
	if !r.s.isOwnAddress(st.r, in.Username, in.EmailAddress) {
		return nil, shownField("emailAddress", "members have no e-mail address here: emailAddress must be %s (or the username)", r.s.memberAddress(st.r, in.Username))
	}
	_, err = r.s.opts.Pages.SignUp(st.w, st.r, in.Username, in.Username, in.Password)
	var limited *account.SignInLimitedError
	switch {
	case errors.Is(err, account.ErrCookieWouldBeDropped):
		return nil, errCookieDropped
	case errors.Is(err, account.ErrRegistrationClosed):
		// Inboxt's words (auth.service.ts @ 45f4314).
		return nil, &userError{codeForbidden, "Signup is disabled on this instance"}
	case errors.As(err, &limited):
		secs := ratelimit.RetryAfterSeconds(limited.Wait)
		st.w.Header().Set("Retry-After", strconv.Itoa(secs))
		return nil, &userError{codeTooManyRequests, "too many accounts were created from your network; retry after " + strconv.Itoa(secs) + " s"}
	case errors.Is(err, storage.ErrConflict):
		return nil, &userError{codeConflict, "the username " + in.Username + " is taken"}
	case err != nil:
		return nil, err
	}
	return success, nil
}

// isOwnAddress reports whether address names username: the bare username
// or username@<account domain>, letters in any case.
func (s *Server) isOwnAddress(r *http.Request, username, address string) bool {
	return strings.EqualFold(s.usernameOf(r, address), username)
}

// errTwoFactorAccountPage refuses updateAccount and deleteAccount to a
// member with two-factor sign-in: the account page asks for the current
// password and a code before changing the password or deleting the
// account, and Inboxt's inputs (UpdateAccountInput, DeleteAccountInput in
// inboxt-schema.graphql @ 45f4314) have no field for either, so a stolen
// session alone must not do it here.
var errTwoFactorAccountPage = &userError{codeForbidden, "this account uses two-factor sign-in: change the password or delete the account on the site's account page (" + account.AccountPath + ")"}

// accountChanger is the caller of updateAccount or deleteAccount: a
// session (sessionOnly) of a member without two-factor sign-in
// (errTwoFactorAccountPage), with the request's state.
func accountChanger(ctx context.Context) (*caller, *requestState, error) {
	c, err := sessionOnly(ctx)
	if err != nil {
		return nil, nil, err
	}
	if c.Member.TwoFactor {
		return nil, nil, errTwoFactorAccountPage
	}
	return c, stateOf(ctx), nil
}

// codeRecentSignInRequired is the extensions.code of an operation that
// needs a recent sign-in (requireRecentSignIn).
const codeRecentSignInRequired = "RECENT_SIGN_IN_REQUIRED"

// requireRecentSignIn refuses, with RECENT_SIGN_IN_REQUIRED, a caller whose
// session did not give its password within members.RecentSignIn: changing
// the password and deleting the account take the password again, as
// GitHub's "sudo mode" does (the account page asks for it in the form;
// Inboxt's inputs have no field for it, so the member confirms on the
// page named in the message and tries again). Only session callers get
// here: API and OAuth tokens are refused these operations outright
// (sessionOnly), since a token is a standing credential a member hands to
// a program, not a person who can prove they are at the keyboard.
func (s *Server) requireRecentSignIn(ctx context.Context) error {
	st := stateOf(ctx)
	recent, err := s.opts.Pages.RecentSignIn(st.r)
	if err != nil {
		return err
	}
	if !recent {
		return &userError{codeRecentSignInRequired, "this needs a recent sign-in: confirm your password at " + inboxtapi.SiteURL(st.r) + account.ConfirmPath +
			" (it counts for " + strconv.Itoa(int(members.RecentSignIn/time.Minute)) + " minutes), then try again"}
	}
	return nil
}

// UpdateAccount changes the member's password (which, as `hearth member
// passwd` does, ends every session, this one included) when the session
// signed in recently (requireRecentSignIn). Usernames cannot change, and
// the address is always username@<account domain>: other values are
// refused. A member with two-factor sign-in is refused
// (errTwoFactorAccountPage).
func (r *mutationResolver) UpdateAccount(ctx context.Context, in generated.UpdateAccountInput) (*generated.User, error) {
	c, st, err := accountChanger(ctx)
	if err != nil {
		return nil, err
	}
	m := c.Member
	if in.Username != nil && *in.Username != m.Username {
		return nil, shownField("username", "usernames cannot be changed on this site")
	}
	if in.EmailAddress != nil && !r.s.isOwnAddress(st.r, m.Username, *in.EmailAddress) {
		return nil, shownField("emailAddress", "members have no e-mail address here: it is always %s", r.s.memberAddress(st.r, m.Username))
	}
	if in.Password != nil {
		if err := r.s.requireRecentSignIn(ctx); err != nil {
			return nil, err
		}
		if err := members.Of(r.s.store).SetPassword(ctx, m.Username, *in.Password); err != nil {
			var ie *storage.InvalidError
			if errors.As(err, &ie) {
				return nil, shownField("password", "%s", ie.Msg)
			}
			return nil, err
		}
	}
	return (&queryResolver{r.resolver}).Me(ctx)
}

// DeleteAccount deletes the member and everything it saved, as `hearth
// member delete` does, and clears the session cookie, when the session
// signed in recently (requireRecentSignIn). emailAddress confirms it: the
// username or username@<account domain>. A member with two-factor sign-in
// is refused (errTwoFactorAccountPage).
func (r *mutationResolver) DeleteAccount(ctx context.Context, in generated.DeleteAccountInput) (*generated.Void, error) {
	c, st, err := accountChanger(ctx)
	if err != nil {
		return nil, err
	}
	if !r.s.isOwnAddress(st.r, c.Member.Username, in.EmailAddress) {
		return nil, shownField("emailAddress", "to confirm, emailAddress must be %s", r.s.memberAddress(st.r, c.Member.Username))
	}
	if err := r.s.requireRecentSignIn(ctx); err != nil {
		return nil, err
	}
	if err := members.Of(r.s.store).DeleteMember(ctx, c.Member.Username); err != nil {
		return nil, err
	}
	r.s.log.Info("member deleted their account", zap.String("username", c.Member.Username))
	r.s.opts.Pages.SignOut(st.w, st.r)
	return success, nil
}

// CreateInboundEmailAddress makes the member's newsletter inbound URL anew,
// as the API Tokens settings page does (the old one stops working). Its
// fullAddress is the URL with its secret: the one time it is shown.
func (r *mutationResolver) CreateInboundEmailAddress(ctx context.Context) (*generated.InboundEmailAddress, error) {
	c, err := sessionOnly(ctx)
	if err != nil {
		return nil, err
	}
	site := inboxtapi.SiteURL(stateOf(ctx).r)
	secret, err := apitokens.Of(r.s.store).RotateInboundSecret(ctx, c.Member.ID, site)
	if err != nil {
		return nil, err
	}
	in, err := apitokens.Of(r.s.store).InboundInfo(ctx, c.Member.ID)
	if err != nil {
		return nil, err
	}
	st := stateOf(ctx)
	http.SetCookie(st.w, &http.Cookie{
		Name: inboundRevealCookie, Value: secret, Path: "/api/graphql", MaxAge: inboundRevealSeconds,
		HttpOnly: true, Secure: st.r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	return &generated.InboundEmailAddress{ID: in.ID, CreatedAt: in.CreatedAt, FullAddress: site + inbound.Path + secret}, nil
}

// The inbound secret is kept only as a digest, so the list cannot show it
// later; but Inboxt's web app shows the list, not createInboundEmailAddress's
// answer (it re-reads the list at once). So the browser that made the
// address holds its secret, for a while, in a cookie sent only to the API;
// the list shows the whole URL to the request that brings it. The server
// still keeps no secret.
const (
	inboundRevealCookie  = "hearth_inbound_new"
	inboundRevealSeconds = 600
)

// revealedInbound is the secret of in that r's cookie holds, or "".
func revealedInbound(r *http.Request, in *apitokens.Inbound) string {
	c, err := r.Cookie(inboundRevealCookie)
	if err != nil || !strings.HasPrefix(c.Value, apitokens.InboundPrefix) {
		return ""
	}
	if subtle.ConstantTimeCompare([]byte(storage.Digest(c.Value)), []byte(in.Digest)) != 1 {
		return ""
	}
	return c.Value
}

// DeleteInboundEmailAddress removes the member's newsletter inbound URL:
// it stops working at once.
func (r *mutationResolver) DeleteInboundEmailAddress(ctx context.Context, in generated.DeleteInboundEmailAddressInput) (*generated.Void, error) {
	c, err := sessionOnly(ctx)
	if err != nil {
		return nil, err
	}
	if err := apitokens.Of(r.s.store).DeleteInbound(ctx, c.Member.ID, in.ID); err != nil {
		return nil, err
	}
	return success, nil
}

// UpdateNewsletterSubscriptionStatus: Hearth does not track newsletter
// subscriptions (InboundEmailAddress.subscriptions and
// Newsletter.subscription are always null), so no id is known.
func (r *mutationResolver) UpdateNewsletterSubscriptionStatus(ctx context.Context, in generated.UpdateNewsletterSubscriptionStatusInput) (*generated.Void, error) {
	if _, err := sessionOnly(ctx); err != nil {
		return nil, err
	}
	return nil, &userError{codeNotFound, "this site does not track newsletter subscriptions: unsubscribe with the newsletter's own link"}
}

func (r *mutationResolver) VerifyEmail(ctx context.Context, in generated.VerifyEmailInput) (*generated.Void, error) {
	if err := refuseTokens(ctx); err != nil {
		return nil, err
	}
	return nil, errNoEmail
}

func (r *mutationResolver) ResendVerificationEmail(ctx context.Context) (*generated.Void, error) {
	if err := refuseTokens(ctx); err != nil {
		return nil, err
	}
	return nil, errNoEmail
}

func (r *mutationResolver) RequestPasswordRecovery(ctx context.Context, in generated.RequestPasswordRecoveryInput) (*generated.Void, error) {
	if err := refuseTokens(ctx); err != nil {
		return nil, err
	}
	return nil, errNoEmail
}

func (r *mutationResolver) ResetPassword(ctx context.Context, in generated.ResetPasswordInput) (*generated.Void, error) {
	if err := refuseTokens(ctx); err != nil {
		return nil, err
	}
	return nil, errNoEmail
}

// errNoSessions answers signIn and createAccount on a server built
// without member pages (Options.Pages), which has no sessions.
var errNoSessions = &userError{codeBadRequest, "this server has no member sessions"}
