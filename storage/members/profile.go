package members

import (
	"context"
	"net/mail"
	"regexp"
	"slices"
	"strings"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Limits on the fields the OpenID provider hands out.
const (
	MaxEmailLen     = 254
	MaxGroups       = 50
	MaxGroupNameLen = 64
)

var groupRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ValidateEmail checks an e-mail address: a bare addr-spec (no display
// name), at most MaxEmailLen bytes. The empty string clears the address.
func ValidateEmail(email string) error {
	if email == "" {
		return nil
	}
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || a.Name != "" || len(email) > MaxEmailLen || storage.HasControl(email) {
		return storage.Invalid("e-mail address must be a plain address such as name@example.org, at most %d characters", MaxEmailLen)
	}
	return nil
}

// ValidateGroups checks group names (letters, digits, '_', '.', '-', not
// starting with punctuation, at most 64 characters; at most MaxGroups) and
// returns them sorted without duplicates.
func ValidateGroups(groups []string) ([]string, error) {
	var out []string
	for _, g := range groups {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		if !groupRE.MatchString(g) {
			return nil, storage.Invalid("group %q must be 1 to %d letters, digits, '_', '.' or '-', starting with a letter or digit", clip(g, MaxGroupNameLen), MaxGroupNameLen)
		}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	if len(out) > MaxGroups {
		return nil, storage.Invalid("a member can be in at most %d groups", MaxGroups)
	}
	slices.Sort(out)
	return out, nil
}

// SetEmail sets a member's e-mail address and whether it is verified (the
// operator vouches for it). An empty address removes it.
func (s Store) SetEmail(ctx context.Context, username, email string, verified bool) (*Member, error) {
	if err := ValidateEmail(email); err != nil {
		return nil, err
	}
	return s.updateByUsername(ctx, username, func(m *Member) {
		m.Email, m.EmailVerified = email, verified && email != ""
	})
}

// SetGroups replaces a member's groups (see ValidateGroups).
func (s Store) SetGroups(ctx context.Context, username string, groups []string) (*Member, error) {
	groups, err := ValidateGroups(groups)
	if err != nil {
		return nil, err
	}
	return s.updateByUsername(ctx, username, func(m *Member) { m.Groups = groups })
}

func (s Store) updateByUsername(ctx context.Context, username string, change func(*Member)) (*Member, error) {
	var out *Member
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		m, err := ByUsername(tx, username)
		if err != nil {
			return err
		}
		change(m)
		out = m
		return tx.PutJSON(memberIDKey(m.ID), m, 0)
	})
	return out, err
}
