package account

import (
	"context"
	"net/url"
)

// SignInReason tells the sign-in page who asks the member to sign in,
// from the page they will return to ("" when it cannot say): the member
// reached from an app's authorization request should know which app it
// is before typing a password.
type SignInReason func(ctx context.Context, returnTo string) string

// SetSignInReason sets the sign-in page's SignInReason (hearth_oauth sets
// one that names the app of an authorization request).
func (p *Pages) SetSignInReason(fn SignInReason) { p.reason.Store(&fn) }

// SignedOutURL is where sign-out sends the member: the sign-in page, which
// says they are signed out, and returns to returnTo after a new sign-in.
func SignedOutURL(returnTo string) string {
	if rt, ok := localPath(returnTo); ok {
		return SignInPath + "?signed_out=1&return_to=" + url.QueryEscape(rt)
	}
	return SignInPath + "?signed_out=1"
}
