package grants

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Clients the operator registers (caddy hearth client add, the admin API)
// for the site's other apps: OpenID Connect relying parties. They are Apps
// with Client set, so the authorization endpoint and the token endpoint
// find them as they find Mastodon apps; everything they may do beyond the
// Mastodon dialect (openid, refresh tokens, HTTP Basic, public clients)
// hangs on Client.
//
// Keys:
//
//	oauth/client/<client_id>   index of the operator clients (no value)

// OIDCScopes are the scopes an operator client may register and ask for.
var OIDCScopes = []string{"openid", "profile", "email", "groups", "offline_access"}

// IsOIDCScope reports whether s is one of OIDCScopes.
func IsOIDCScope(s string) bool { return slices.Contains(OIDCScopes, s) }

// ClientSettings is what sets an operator client apart from a Mastodon app.
type ClientSettings struct {
	// Public clients (single-page and native apps) have no secret and
	// must use PKCE.
	Public bool `json:"public,omitempty"`
	// PostLogoutRedirectURIs are where RP-initiated logout may send the
	// browser back to, matched exactly.
	PostLogoutRedirectURIs []string `json:"post_logout_redirect_uris,omitempty"`
	// Pairwise clients get a sub of their own for each member (OpenID
	// Connect Core section 8.1), so two of them cannot match members up.
	Pairwise bool `json:"pairwise,omitempty"`
	// IDTokenAlg is how its ID tokens are signed: RS256 (empty) or ES256
	// (OpenID Connect Registration's id_token_signed_response_alg).
	IDTokenAlg string `json:"id_token_signed_response_alg,omitempty"`
}

func clientIndexKey(clientID string) []byte { return storage.Key("oauth", "client", clientID) }

// CreateClient registers an operator client and returns it with its
// secret ("" for a public client), which is not stored and cannot be shown
// again. The caller has validated the fields.
func (s Store) CreateClient(ctx context.Context, name string, redirectURIs, scopes []string, settings ClientSettings) (*App, string, error) {
	app := &App{
		ClientID:     storage.NewSecret("", 32),
		Name:         name,
		RedirectURIs: redirectURIs,
		Scopes:       scopes,
		CreatedAt:    time.Now().UTC(),
		Client:       &settings,
	}
	secret := ""
	if !settings.Public {
		secret = storage.NewSecret(ClientSecretPrefix, 32)
		app.SecretDigest = storage.Digest(secret)
	}
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		if err := putNewApp(tx, app); err != nil {
			return err
		}
		return tx.Put(clientIndexKey(app.ClientID), nil, 0)
	})
	if err != nil {
		return nil, "", err
	}
	return app, secret, nil
}

// Clients lists the operator clients, oldest first.
func (s Store) Clients(ctx context.Context) ([]*App, error) {
	var out []*App
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		ids, err := tx.Suffixes(clientIndexKey(""))
		if err != nil {
			return err
		}
		for _, id := range ids {
			app := new(App)
			if err := tx.GetJSON(appKey(id), app); err != nil {
				if errors.Is(err, storage.ErrNotFound) {
					continue
				}
				return err
			}
			out = append(out, app)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b *App) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, err
}

// DeleteClient removes an operator client. Its refresh tokens stop working
// at once (the client can no longer authenticate); its access tokens end
// with their lifetime. storage.ErrNotFound when there is no such client.
func (s Store) DeleteClient(ctx context.Context, clientID string) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		ok, err := tx.Has(clientIndexKey(clientID))
		if err != nil {
			return err
		}
		if !ok || clientID == "" {
			return storage.ErrNotFound
		}
		if err := tx.Delete(clientIndexKey(clientID)); err != nil {
			return err
		}
		return tx.Delete(appKey(clientID))
	})
}

// AuthenticateOperatorClient authenticates an operator client: a
// confidential client by its secret (compared in constant time), a public
// client by the absence of one (the caller then requires PKCE). Anything
// else, including a Mastodon app, is storage.ErrNotFound.
func (s Store) AuthenticateOperatorClient(ctx context.Context, clientID, secret string) (*App, error) {
	app, err := s.App(ctx, clientID)
	if err == nil && app.Client != nil && app.Client.Public {
		if secret != "" {
			return nil, storage.ErrNotFound
		}
		return app, nil
	}
	if err == nil && app.Client == nil {
		return nil, storage.ErrNotFound
	}
	return s.AuthenticateClient(ctx, clientID, secret)
}
