package apitokens

import (
	"context"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Content links: the download URLs of Omnivore's POST /api/content, each a
// read-only capability for one item's content in one format, valid for a
// while without the API key (the plugins fetch them without it). Layout:
//
//	gql/cl/<digest>   ContentLink (expires with the link)

// ContentLinkPrefix starts every content link secret.
const ContentLinkPrefix = "cl_"

// ContentLink is what a content link's secret stands for.
type ContentLink struct {
	MemberID string `json:"member_id"`
	ItemID   string `json:"item_id"`
	Format   string `json:"format"`
	// TokenID is the API key that asked for the link: the link ends with
	// the key, and its content's images are signed with it (ImageKey).
	TokenID string `json:"token_id,omitempty"`
	// AccessGen is the member's access generation when the link was made
	// (members.Member.AccessGen): revoking the member's access ends the
	// links made before, as it ends the tokens that made them.
	AccessGen uint64 `json:"access_gen,omitempty"`
}

func contentLinkKey(digest string) []byte { return storage.Key("gql", "cl", digest) }

// CreateContentLinks makes a secret for each link, valid for ttl, and
// returns them in order; only their digests are kept.
func (s Store) CreateContentLinks(ctx context.Context, links []ContentLink, ttl time.Duration) ([]string, error) {
	secrets := make([]string, len(links))
	for i := range links {
		secrets[i] = storage.NewSecret(ContentLinkPrefix, 32)
	}
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		gens := map[string]uint64{}
		for i, l := range links {
			gen, ok := gens[l.MemberID]
			if !ok {
				m, err := members.ByID(tx, l.MemberID)
				if err != nil {
					return err
				}
				gen, gens[l.MemberID] = m.AccessGen, m.AccessGen
			}
			l.AccessGen = gen
			if err := tx.PutJSON(contentLinkKey(storage.Digest(secrets[i])), l, ttl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return secrets, nil
}

// ContentLinkOf returns the link a secret stands for, its member and the
// key of its API key that signs its content's images (nil for a link made
// without one): storage.ErrNotFound for an unknown or expired secret, for
// one made before the member's access was revoked and for one whose API
// key was deleted or expired since, members.ErrSuspended for a suspended
// member.
func (s Store) ContentLinkOf(ctx context.Context, secret string) (*ContentLink, *members.Member, *ImageKey, error) {
	if !strings.HasPrefix(secret, ContentLinkPrefix) || len(secret) > 128 || len(secret) < 20 {
		return nil, nil, nil, storage.ErrNotFound
	}
	var l ContentLink
	var m *members.Member
	var tok *Token
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		if err := tx.GetJSON(contentLinkKey(storage.Digest(secret)), &l); err != nil {
			return err
		}
		if l.TokenID != "" {
			tok = new(Token)
			if err := tx.GetJSON(apiTokenKey(l.MemberID, l.TokenID), tok); err != nil {
				return err
			}
		}
		var err error
		m, err = members.ByID(tx, l.MemberID)
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	if m.Suspended {
		return nil, nil, nil, members.ErrSuspended
	}
	if l.AccessGen != m.AccessGen {
		return nil, nil, nil, storage.ErrNotFound // made before the member's access was revoked
	}
	if tok == nil {
		return &l, m, nil, nil
	}
	if tok.Expired(storage.Now()) {
		return nil, nil, nil, storage.ErrNotFound
	}
	k := tok.ImageKey()
	return &l, m, &k, nil
}
