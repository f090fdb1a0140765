package apitokens

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Signed image addresses: content that leaves the site (a member's feed,
// Omnivore's content for the note-taking plugins) names the stored images
// of an item by addresses each signed for one image of one item
// (ImageSignature), never by a credential of the member, which would read
// the whole library wherever the content went. The key is the digest of
// the credential the content was made for, known only to the store and to
// whoever holds the credential, so the signature cannot be made without
// either; renewing, revoking or deleting the credential ends the
// addresses.

// ImageKey is what signs an image's address: the digest of the member's
// feed secret (TokenID empty) or of one of their API keys.
type ImageKey struct {
	// TokenID is the API key's id (Token.ID), written in the address so
	// that the key can be found; empty for the feed secret.
	TokenID string
	Digest  string
}

// ImageKey returns the key that signs the image addresses of content
// made for the token.
func (t *Token) ImageKey() ImageKey { return ImageKey{TokenID: t.ID, Digest: t.Digest} }

// FeedImageKey returns the key that signs the image addresses of the
// feed whose secret has digest.
func FeedImageKey(digest string) ImageKey { return ImageKey{Digest: digest} }

// ImageSignature signs the address of the n-th stored image of the
// member's item with k.
func ImageSignature(k ImageKey, memberID, itemID, n string) string {
	return k.Signer().Sign(memberID, itemID, n)
}

// ImageSigner signs image addresses with one key (ImageSignature), one
// HMAC for them all: content signs every stored image of its items.
type ImageSigner struct {
	mac    hash.Hash
	domain string
	msg    []byte
	sum    []byte
}

// Signer returns a signer of image addresses with k.
func (k ImageKey) Signer() *ImageSigner {
	domain := "feed image\x00"
	if k.TokenID != "" {
		domain = "api key image\x00" + k.TokenID + "\x00"
	}
	return &ImageSigner{mac: hmac.New(sha256.New, []byte(k.Digest)), domain: domain}
}

// Sign signs the address of the n-th stored image of the member's item.
func (s *ImageSigner) Sign(memberID, itemID, n string) string {
	s.msg = append(append(append(append(append(append(s.msg[:0], s.domain...), memberID...), 0), itemID...), 0), n...)
	s.mac.Reset()
	s.mac.Write(s.msg)
	s.sum = s.mac.Sum(s.sum[:0])
	return base64.RawURLEncoding.EncodeToString(s.sum[:18])
}

// ImageMember returns the member memberID when sig is the signature
// (ImageSignature) of their item itemID's image n under their current
// feed secret (tokenID empty) or their API key tokenID, while it works:
// storage.ErrNotFound otherwise (no such member, secret or key, an expired
// key, a wrong signature), members.ErrSuspended for a suspended member.
func (s Store) ImageMember(ctx context.Context, memberID, tokenID, itemID, n, sig string) (*members.Member, error) {
	if tokenID == "" {
		fs, err := s.FeedSecretInfo(ctx, memberID)
		if err != nil {
			return nil, err
		}
		if !hmac.Equal([]byte(sig), []byte(ImageSignature(FeedImageKey(fs.Digest), memberID, itemID, n))) {
			return nil, storage.ErrNotFound
		}
		return s.memberAt(ctx, feedRefKey(fs.Digest)) // gone with the secret if it changed since
	}
	var tok Token
	var m *members.Member
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		if err := tx.GetJSON(apiTokenKey(memberID, tokenID), &tok); err != nil {
			return err
		}
		var err error
		m, err = members.ByID(tx, memberID)
		return err
	})
	if err != nil {
		return nil, err
	}
	if tok.Expired(storage.Now()) || !hmac.Equal([]byte(sig), []byte(ImageSignature(tok.ImageKey(), memberID, itemID, n))) {
		return nil, storage.ErrNotFound
	}
	if m.Suspended {
		return nil, members.ErrSuspended
	}
	return m, nil
}
