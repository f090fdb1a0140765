package directory

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/agents"
)

// ErrNotBanned: Unban was asked for an agent that is not banned.
var ErrNotBanned = errors.New("agent is not banned")

// MaxBanReasonLen bounds the reason kept with a ban (bytes).
const MaxBanReasonLen = 500

// AgentStatus is an agent as the site's admin sees it: the entry the
// document would carry (computed even while banned) and the moderation and
// activity state the document leaves out. A pubkey banned before it ever
// registered has only Pubkey, Npub and the ban fields.
type AgentStatus struct {
	Entry
	Registered   bool   `json:"registered"`
	Banned       bool   `json:"banned"`
	BannedAt     *int64 `json:"banned_at"`
	BanReason    string `json:"ban_reason,omitempty"`
	NIP05Claimed string `json:"nip05_claimed,omitempty"`
	Posts        int64  `json:"posts"`
	LastPostAt   *int64 `json:"last_post_at"`
}

// Agents lists every registered agent, banned ones included, in the
// document's order, followed by banned pubkeys that never registered.
func (d *Directory) Agents(ctx context.Context) ([]AgentStatus, error) {
	bans, err := d.agents.Bans(ctx)
	if err != nil {
		return nil, fmt.Errorf("list bans: %w", err)
	}
	now := d.now()
	var list []AgentStatus
	err = d.agents.Each(ctx, func(a *agents.Agent, act *agents.Activity, banned bool) error {
		s := AgentStatus{Entry: d.entry(a, act, now), Registered: true, NIP05Claimed: a.NIP05, Posts: act.Posts}
		if act.LastPostAt > 0 {
			t := act.LastPostAt
			s.LastPostAt = &t
		}
		if b, ok := bans[a.Pubkey]; ok {
			s.Banned, s.BanReason = true, b.Reason
			s.BannedAt = &b.At
			delete(bans, a.Pubkey)
		}
		list = append(list, s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	entries := make([]Entry, len(list))
	byPK := make(map[string]AgentStatus, len(list))
	for i, s := range list {
		entries[i] = s.Entry
		byPK[s.Pubkey] = s
	}
	sortEntries(entries)
	for i, e := range entries {
		list[i] = byPK[e.Pubkey]
	}
	rest := make([]string, 0, len(bans))
	for pk := range bans {
		rest = append(rest, pk)
	}
	sort.Strings(rest)
	for _, pk := range rest {
		b := bans[pk]
		list = append(list, AgentStatus{
			Entry:  Entry{Pubkey: pk, Npub: Npub(pk), Capabilities: []string{}, Flags: []string{}},
			Banned: true, BannedAt: &b.At, BanReason: b.Reason,
		})
	}
	if list == nil {
		list = []AgentStatus{}
	}
	return list, nil
}

// Ban bans the agent named by an npub or hex key, registered or not, and
// returns its hex key. The agent leaves the document at once and its
// registrations and posts are refused with "blocked:". Banning a banned
// agent keeps the first ban.
//
// Bans live in the store: other Directory values on the same store see them
// at their next scheduled rebuild (or call their Changed).
func (d *Directory) Ban(ctx context.Context, pubkeyOrNpub, reason string) (string, error) {
	pk, err := ParsePubkey(pubkeyOrNpub)
	if err != nil {
		return "", err
	}
	if len(reason) > MaxBanReasonLen {
		return "", fmt.Errorf("ban reason is longer than %d bytes", MaxBanReasonLen)
	}
	if err := d.agents.Ban(ctx, pk, reason, d.now()); err != nil {
		return "", fmt.Errorf("ban agent: %w", err)
	}
	return pk, d.afterModeration(ctx, pk)
}

// Unban lifts the ban of the agent named by an npub or hex key and returns
// its hex key; ErrNotBanned when it was not banned. A registered agent
// comes back with its registration and activity as they were.
func (d *Directory) Unban(ctx context.Context, pubkeyOrNpub string) (string, error) {
	pk, err := ParsePubkey(pubkeyOrNpub)
	if err != nil {
		return "", err
	}
	switch err := d.agents.Unban(ctx, pk); {
	case errors.Is(err, storage.ErrNotFound):
		return pk, ErrNotBanned
	case err != nil:
		return "", fmt.Errorf("unban agent: %w", err)
	}
	return pk, d.afterModeration(ctx, pk)
}

// afterModeration publishes a ban or unban at once in this directory's
// document, and tells every directory on the store, on every node, to
// rebuild and restart its relay subscriptions with the new set of authors.
func (d *Directory) afterModeration(ctx context.Context, pk string) error {
	d.authorsChangedOf(pk)
	if err := d.Rebuild(ctx); err != nil {
		return fmt.Errorf("rebuild directory document: %w", err)
	}
	return nil
}
