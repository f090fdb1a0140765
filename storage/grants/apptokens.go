package grants

// An application's own tokens (client_credentials) act for no member, so
// no member's index names them and no revocation of a member's access
// ends them: without a bound, anyone who registers an app could make the
// store keep any number of them, each forever. Mastodon answers a second
// request with the token it issued before (Doorkeeper's reuse_access_token,
// set in Mastodon's config/initializers/doorkeeper.rb); reuse needs the
// token itself, and Hearth keeps only its digest. So each app keeps its
// MaxAppTokens newest app tokens, and issuing one more revokes the oldest,
// as Doorkeeper's revoke_previous_client_credentials_token does for one
// (lib/doorkeeper/oauth/client_credentials/creator.rb).
//
// Keys:
//
//	oauth/apptoken/<client_id>/<token id, 16 hexadecimal digits>  token digest
//
// Token ids grow with time, so the app's oldest token comes first.

import (
	"strconv"

	"github.com/hearthkit/caddy-hearth/storage"
)

// MaxAppTokens is how many live app tokens an app keeps: enough for a
// client that asks again while its earlier tokens are still in use.
const MaxAppTokens = 10

// appTokensPrefix is the index of clientID's app tokens.
func appTokensPrefix(clientID string) []byte { return storage.Key("oauth", "apptoken", clientID, "") }

// appTokenKey is the index's entry of the app token id of clientID.
func appTokenKey(clientID, id string) ([]byte, error) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return nil, err
	}
	return storage.Key("oauth", "apptoken", clientID, genHex(n)), nil
}

// indexAppToken puts the app token t (digest d) in its app's index and
// revokes the app's oldest tokens past MaxAppTokens: at most two a call,
// so that a race of two issues that both revoked the same token leaves
// the index back at the bound on the next issue. It reads at most
// MaxAppTokens+2 entries, and the app when the token is its only one.
func indexAppToken(tx *storage.Tx, t *AccessToken, d string) error {
	k, err := appTokenKey(t.ClientID, t.ID)
	if err != nil {
		return err
	}
	if err := tx.Put(k, []byte(d), 0); err != nil {
		return err
	}
	type entry struct {
		key    []byte
		digest string
	}
	var seen []entry
	err = tx.Scan(appTokensPrefix(t.ClientID), nil, false, false, func(key, val []byte) (bool, error) {
		seen = append(seen, entry{append([]byte{}, key...), string(val)})
		return len(seen) < MaxAppTokens+2, nil
	})
	if err != nil {
		return err
	}
	if len(seen) == 1 {
		// The app's only token: perhaps its first use, which keeps it
		// from the removal of unused apps.
		if err := noteAppUsed(tx, t.ClientID); err != nil {
			return err
		}
	}
	for i := 0; i < len(seen)-MaxAppTokens; i++ {
		if err := deleteToken(tx, seen[i].digest); err != nil {
			return err
		}
		// The entry goes even if its token had gone without it.
		if err := tx.DeleteIfPresent(seen[i].key); err != nil {
			return err
		}
	}
	return nil
}

// unindexAppToken takes the app token t out of its app's index.
func unindexAppToken(tx *storage.Tx, t *AccessToken) error {
	k, err := appTokenKey(t.ClientID, t.ID)
	if err != nil {
		// Not an id this store issued: nothing of it is indexed.
		return nil
	}
	return tx.DeleteIfPresent(k)
}
