package directory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/agents"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// ReservedNames are the local names under nip05_domain that only the site's
// maintainers may claim: names people read as the site itself or its staff
// (RFC 2142's role mailboxes among them), and "_", which NIP-05 reads as the
// bare domain.
var ReservedNames = []string{
	"_", "abuse", "admin", "administrator", "help", "hearth", "hostmaster", "info", "mail", "maintainer",
	"moderator", "noc", "nobody", "operator", "postmaster", "root", "security", "staff", "support", "system",
	"webmaster", "www",
}

// Errors of ApproveName and ReleaseName.
var (
	// ErrNoClaim: nobody holds the NIP-05 name asked for.
	ErrNoClaim = errors.New("nobody claims this name")
	// ErrInvalidName: the name is not one under this site's nip05_domain.
	ErrInvalidName = errors.New("not a NIP-05 name of this site")
)

// NameClaim is a claim on a NIP-05 name under the site's nip05_domain, as
// the site's admin sees it.
type NameClaim struct {
	// ID is name@domain.
	ID       string `json:"id"`
	Pubkey   string `json:"pubkey"`
	Npub     string `json:"npub"`
	Agent    string `json:"agent"` // the agent's name
	Approved bool   `json:"approved"`
	// Verified is what gates.nip05 says: approved, claimed by a
	// maintainer, or claims are open.
	Verified bool `json:"verified"`
}

// checkReservedName refuses a claim on local (under nip05_domain) that
// pubkey may not make: a reserved name or a member's username, unless
// pubkey is a maintainer's. Names are compared folded (foldName), so
// admin., Admin_ or john.doe (for the member john_doe) read as the name
// they imitate and are refused with it.
func (d *Directory) checkReservedName(ctx context.Context, pubkey, local string) error {
	if d.maintainers[pubkey] {
		return nil
	}
	folded := foldName(local)
	same := func(n string) bool { return foldName(n) == folded }
	if slices.ContainsFunc(ReservedNames, same) || slices.ContainsFunc(d.opts.NIP05Reserved, same) {
		return refuse("invalid: %s@%s is reserved on this site", local, d.opts.NIP05Domain)
	}
	// A username is letters, digits and underscores, any case: the
	// usernames that fold to folded are folded itself with or without an
	// underscore at either end. Four reads, whatever the number of
	// members (a username with two or more leading or trailing
	// underscores is not looked for).
	for _, name := range []string{folded, "_" + folded, folded + "_", "_" + folded + "_"} {
		switch _, err := members.Of(d.store).Member(ctx, name); {
		case err == nil:
			return refuse("invalid: %s@%s is reserved on this site (a member's username)", local, d.opts.NIP05Domain)
		case !errors.Is(err, storage.ErrNotFound):
			return err
		}
	}
	return nil
}

// foldName is the form in which two local names read as the same name:
// lower case, each separator (. - _) an underscore, and none at either
// end (so "_", the bare domain, folds to "").
func foldName(name string) string {
	name = strings.ToLower(strings.Trim(name, "._-"))
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '-' {
			return '_'
		}
		return r
	}, name)
}

// nameID turns what an admin typed (name, or name@domain) into the
// identifier under this directory's nip05_domain.
func (d *Directory) nameID(name string) (string, error) {
	if d.opts.NIP05Domain == "" {
		return "", fmt.Errorf("%w: this hearth_directory has no nip05_domain", ErrInvalidName)
	}
	name = strings.ToLower(strings.TrimSpace(name))
	local, domain, ok := strings.Cut(name, "@")
	if ok && domain != d.opts.NIP05Domain {
		return "", fmt.Errorf("%w: %s is not under nip05_domain %s", ErrInvalidName, name, d.opts.NIP05Domain)
	}
	if !nip05LocalRE.MatchString(local) {
		return "", fmt.Errorf("%w: %q (a-z 0-9 . _ -)", ErrInvalidName, local)
	}
	return local + "@" + d.opts.NIP05Domain, nil
}

// Names lists the claims on names under nip05_domain, pending ones first.
func (d *Directory) Names(ctx context.Context) ([]NameClaim, error) {
	if d.opts.NIP05Domain == "" {
		return []NameClaim{}, nil
	}
	claims, err := d.agents.NIP05Claims(ctx, d.opts.NIP05Domain)
	if err != nil {
		return nil, fmt.Errorf("list NIP-05 claims: %w", err)
	}
	out := make([]NameClaim, 0, len(claims))
	for _, c := range claims {
		a, err := d.agents.Get(ctx, c.Pubkey)
		if err != nil {
			continue // gone since the listing
		}
		out = append(out, NameClaim{ID: c.ID, Pubkey: c.Pubkey, Npub: Npub(c.Pubkey), Agent: a.Name,
			Approved: c.Approved, Verified: d.claimVouched(c)})
	}
	slices.SortStableFunc(out, func(a, b NameClaim) int {
		switch {
		case a.Verified == b.Verified:
			return 0
		case !a.Verified:
			return -1
		}
		return 1
	})
	return out, nil
}

// claimVouched reports whether the site vouches for a claim under its
// nip05_domain (gates.nip05 and /.well-known/nostr.json).
func (d *Directory) claimVouched(c agents.Claim) bool {
	return c.Approved || d.opts.NIP05OpenClaims || d.maintainers[c.Pubkey]
}

// ApproveName approves the claim on name (or name@nip05_domain): the agent
// holding it becomes NIP-05 verified and /.well-known/nostr.json lists it.
// It returns the claim; ErrNoClaim when nobody holds the name.
func (d *Directory) ApproveName(ctx context.Context, name string) (NameClaim, error) {
	id, err := d.nameID(name)
	if err != nil {
		return NameClaim{}, err
	}
	pk, err := d.agents.ApproveNIP05(ctx, id, d.now())
	if errors.Is(err, storage.ErrNotFound) {
		return NameClaim{ID: id}, ErrNoClaim
	} else if err != nil {
		return NameClaim{}, fmt.Errorf("approve %s: %w", id, err)
	}
	d.changedAgents(pk)
	return NameClaim{ID: id, Pubkey: pk, Npub: Npub(pk), Approved: true, Verified: true}, nil
}

// ReleaseName takes the name (or name@nip05_domain) from the agent holding
// it, approved or not; another agent may then claim it. It returns the
// released claim; ErrNoClaim when nobody held the name.
func (d *Directory) ReleaseName(ctx context.Context, name string) (NameClaim, error) {
	id, err := d.nameID(name)
	if err != nil {
		return NameClaim{}, err
	}
	pk, err := d.agents.ReleaseNIP05(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return NameClaim{ID: id}, ErrNoClaim
	} else if err != nil {
		return NameClaim{}, fmt.Errorf("release %s: %w", id, err)
	}
	d.changedAgents(pk)
	return NameClaim{ID: id, Pubkey: pk, Npub: Npub(pk)}, nil
}
