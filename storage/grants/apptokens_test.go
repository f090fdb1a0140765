package grants

import (
	"errors"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
)

// appTokenRecords counts the token records of the store and the entries
// of clientID's index of app tokens.
func appTokenRecords(t *testing.T, s *storage.Store, clientID string) (tokens, index int) {
	t.Helper()
	err := s.View(t.Context(), func(tx *storage.Tx) error {
		tokens, index = 0, 0
		if err := tx.Scan(tokenKey(""), nil, false, true, func([]byte, []byte) (bool, error) { tokens++; return true, nil }); err != nil {
			return err
		}
		return tx.Scan(appTokensPrefix(clientID), nil, false, true, func([]byte, []byte) (bool, error) { index++; return true, nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return tokens, index
}

// TestAppTokensPerAppAreCapped: an app that asks for more than
// MaxAppTokens app tokens keeps the newest MaxAppTokens; the oldest are
// refused and their records gone, and another app's tokens stay.
func TestAppTokensPerAppAreCapped(t *testing.T) {
	s, _, app, _ := oauthFixture(t)
	other, _, err := Of(s).CreateApp(t.Context(), "Other", "", []string{"https://other.example/cb"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	_, theirs, err := Of(s).CreateAppToken(t.Context(), other.ClientID, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	var issued []string
	for range MaxAppTokens + 3 {
		_, tok, err := Of(s).CreateAppToken(t.Context(), app.ClientID, []string{"read"})
		if err != nil {
			t.Fatal(err)
		}
		issued = append(issued, tok)
	}
	for i, tok := range issued {
		_, _, err := Of(s).Token(t.Context(), tok)
		if old := i < 3; old != errors.Is(err, storage.ErrNotFound) || !old && err != nil {
			t.Errorf("token %d of %d: %v", i+1, len(issued), err)
		}
	}
	if _, _, err := Of(s).Token(t.Context(), theirs); err != nil {
		t.Fatalf("the other app's token: %v", err)
	}
	if tokens, index := appTokenRecords(t, s, app.ClientID); tokens != MaxAppTokens+1 || index != MaxAppTokens {
		t.Fatalf("%d token records and %d index entries, want %d and %d", tokens, index, MaxAppTokens+1, MaxAppTokens)
	}

	// A revoked token leaves the index with it: the next one revokes none.
	newest := issued[len(issued)-1]
	if err := Of(s).RevokeToken(t.Context(), app.ClientID, newest); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(s).CreateAppToken(t.Context(), app.ClientID, []string{"read"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(s).Token(t.Context(), issued[3]); err != nil {
		t.Fatalf("the oldest live token after a revocation and an issue: %v", err)
	}
	if _, index := appTokenRecords(t, s, app.ClientID); index != MaxAppTokens {
		t.Fatalf("%d index entries, want %d", index, MaxAppTokens)
	}
}

// TestAppTokensFromBeforeTheIndexAreCapped: an app holding more than
// MaxAppTokens app tokens issued before the index of app tokens existed
// keeps, after the sweep's pass, its MaxAppTokens newest, and a member's
// tokens stay. The pass reads the tokens a bounded batch a transaction,
// in the order of their digests: the earlier app tokens here have digests
// after nearly all of the member's, past the first batch.
func TestAppTokensFromBeforeTheIndexAreCapped(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	memberTokens := manyTokens(t, s, app, m, sweepReads+100)
	var earlier []string
	err := s.Update(t.Context(), func(tx *storage.Tx) error {
		for range MaxAppTokens + 5 {
			secret := storage.NewSecret(TokenPrefix, 32)
			for !strings.HasPrefix(storage.Digest(secret), "fff") {
				secret = storage.NewSecret(TokenPrefix, 32)
			}
			// As CreateAppToken issued them before it indexed them.
			if _, _, err := createTokenFor(tx, secret, app.ClientID, "", grantGen{}, []string{"read"}, 0); err != nil {
				return err
			}
			earlier = append(earlier, secret)
		}
		// A store from before has looked at none of its tokens.
		return tx.Delete(appTokenScanKey())
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sweepKind.Of(s).vacuum(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, tok := range earlier {
		_, _, err := Of(s).Token(t.Context(), tok)
		if old := i < 5; old != errors.Is(err, storage.ErrNotFound) || !old && err != nil {
			t.Errorf("earlier app token %d of %d: %v", i+1, len(earlier), err)
		}
	}
	for _, tok := range sample(memberTokens) {
		if _, _, err := Of(s).Token(t.Context(), tok); err != nil {
			t.Fatalf("a member's token: %v", err)
		}
	}
	if _, index := appTokenRecords(t, s, app.ClientID); index != MaxAppTokens {
		t.Fatalf("%d index entries, want %d", index, MaxAppTokens)
	}
}
