package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Agent directory records, under the "agent/" prefix:
//
//	agent/a/<pubkey>      Agent: the current registration and NIP-05 state
//	agent/act/<pubkey>    AgentActivity: bounded activity summary
//	agent/ban/<pubkey>    AgentBan: the agent is banned (may exist without a registration)
//	agent/seen/<eventid>  empty, with a TTL: the post was already counted
//	agent/nip05/<id>      pubkey that claimed the identifier id (name@domain,
//	                      a domain that was the site's nip05_domain) first
//	agent/nip05/<name>    older records: the claim, keyed by the name alone; it
//	                      stands for the identifier its owner's Agent.NIP05 names
//	agent/relay/<url>     Unix seconds of the newest post seen from that relay
//	agent/doc/<sum>       generated_at of the directory document whose agents
//	                      array has this SHA-256 (hex), with a TTL
//
// Pubkeys and event ids are lowercase hex, so keys sort by pubkey.

// Errors of the agent repository.
var (
	// ErrAgentBanned: the pubkey is banned by the site's admin.
	ErrAgentBanned = errors.New("agent is banned")
	// ErrDuplicate: the event was already processed.
	ErrDuplicate = errors.New("duplicate event")
	// ErrNameTaken: the NIP-05 identifier (name@domain) belongs to another agent.
	ErrNameTaken = errors.New("name already claimed by another agent")
)

// SeenPostTTL is how long a post id is remembered, to count each post once.
// Posts older than this only touch the set of active days, which is
// idempotent, so forgetting their ids cannot count anything twice.
const SeenPostTTL = 8 * 24 * time.Hour

// Agent is an agent's registration as the directory keeps it. Times are Unix
// seconds.
type Agent struct {
	Pubkey       string   `json:"pubkey"`
	Name         string   `json:"name"`
	Purpose      string   `json:"purpose"`
	Capabilities []string `json:"capabilities"`
	Operator     string   `json:"operator,omitempty"`
	// NIP05 is the identifier claimed in the registration ("" for none),
	// lowercased name@domain. NIP05Local is its local part when the agent
	// holds the claim on NIP05 under the site's own nip05_domain (the
	// domain is part of the claim: bob@a.example and bob@b.example are
	// two claims).
	NIP05      string `json:"nip05,omitempty"`
	NIP05Local string `json:"nip05_local,omitempty"`
	// NIP05Verified is the current verdict; NIP05CheckedAt the last check
	// attempt and NIP05OKAt the last check that matched.
	NIP05Verified  bool  `json:"nip05_verified,omitempty"`
	NIP05CheckedAt int64 `json:"nip05_checked_at,omitempty"`
	NIP05OKAt      int64 `json:"nip05_ok_at,omitempty"`

	PowBits           int    `json:"pow_bits"`
	FirstRegisteredAt int64  `json:"first_registered_at"`
	RegisteredAt      int64  `json:"registered_at"` // created_at of RegistrationEvent
	RegistrationEvent string `json:"registration_event"`
	UpdatedAt         int64  `json:"updated_at"`
	// Event is the registration event as received, for audit.
	Event json.RawMessage `json:"event,omitempty"`
}

// AgentActivity is what the directory keeps about an agent's posts: enough
// to count active days and compute anomaly flags, with bounded size.
type AgentActivity struct {
	// Days is the sorted set of UTC days (Unix days) with at least one post.
	Days []int32 `json:"d,omitempty"`
	// Times holds the created_at of recent posts, sorted, bounded by the
	// directory (only the last day or so matters for burst detection).
	Times []int64 `json:"t,omitempty"`
	// Skels holds the newest posts' skeleton hashes, sorted by time.
	Skels []AgentSkeleton `json:"s,omitempty"`
	// BurstAt is the created_at of the last post that completed a burst.
	BurstAt int64 `json:"b,omitempty"`
	// LastPostAt is the newest counted post's created_at.
	LastPostAt int64 `json:"l,omitempty"`
	// Posts counts the posts counted since registration.
	Posts int64 `json:"n,omitempty"`
}

// AgentSkeleton is one post's time and text-skeleton hash.
type AgentSkeleton struct {
	At   int64  `json:"t"`
	Hash uint64 `json:"h"`
}

// AgentBan records a ban.
type AgentBan struct {
	At     int64  `json:"at"`
	Reason string `json:"reason,omitempty"`
}

// AgentPost is a post to record for an agent.
type AgentPost struct {
	ID        string
	Pubkey    string
	CreatedAt int64
	Skeleton  uint64
}

func agentKey(pk string) []byte     { return key("agent", "a", pk) }
func agentActKey(pk string) []byte  { return key("agent", "act", pk) }
func agentBanKey(pk string) []byte  { return key("agent", "ban", pk) }
func agentSeenKey(id string) []byte { return key("agent", "seen", id) }
func agentNameKey(id string) []byte { return key("agent", "nip05", id) }
func agentRelayKey(u string) []byte { return key("agent", "relay", u) }
func agentDocKey(sum string) []byte { return key("agent", "doc", sum) }

// DirectoryStampTTL is how long the generated_at of a directory document is
// remembered after the last StampDirectoryDocument for it. Directories
// stamp their document again well within it (so a restart keeps
// generated_at); a stamp left by a configuration no longer served expires.
const DirectoryStampTTL = 30 * 24 * time.Hour

// StampDirectoryDocument returns the generated_at (Unix seconds) of the
// directory document whose agents array hashes to sum: the stored one when
// a directory already published that content (before a restart or a
// reload, or another site on this store), else at, which is stored. prev
// is the caller's previous sum ("" for none): its stamp is forgotten, so
// content that comes back after a change gets a new generated_at.
func (s *Store) StampDirectoryDocument(sum, prev string, at int64) (int64, error) {
	err := s.Update(func(tx *Tx) error {
		b, err := tx.get(agentDocKey(sum))
		switch {
		case err == nil:
			if t, perr := strconv.ParseInt(string(b), 10, 64); perr == nil {
				at = t
			}
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if prev != "" && prev != sum {
			if err := tx.delete(agentDocKey(prev)); err != nil {
				return err
			}
		}
		return tx.put(agentDocKey(sum), []byte(strconv.FormatInt(at, 10)), DirectoryStampTTL)
	})
	return at, err
}

// Agent returns the registration of pubkey, or ErrNotFound.
func (s *Store) Agent(pubkey string) (*Agent, error) {
	var a Agent
	err := s.View(func(tx *Tx) error { return tx.getJSON(agentKey(pubkey), &a) })
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// AgentBanned reports whether pubkey is banned.
func (s *Store) AgentBanned(pubkey string) (bool, error) {
	var banned bool
	err := s.View(func(tx *Tx) error {
		var err error
		banned, err = tx.has(agentBanKey(pubkey))
		return err
	})
	return banned, err
}

// RegisterAgent stores a registration. check is called in the transaction
// with the current registration (nil for a new agent) and may refuse it by
// returning an error, or adjust a (e.g. keep FirstRegisteredAt). A banned
// pubkey gets ErrAgentBanned; a NIP-05 identifier (name@domain) claimed by
// another agent gets ErrNameTaken. created is true for a first registration.
func (s *Store) RegisterAgent(a *Agent, check func(old *Agent) error) (created bool, err error) {
	err = s.Update(func(tx *Tx) error {
		created = false
		if banned, err := tx.has(agentBanKey(a.Pubkey)); err != nil {
			return err
		} else if banned {
			return ErrAgentBanned
		}
		var old *Agent
		var cur Agent
		switch err := tx.getJSON(agentKey(a.Pubkey), &cur); {
		case err == nil:
			old = &cur
		case errors.Is(err, ErrNotFound):
			created = true
		default:
			return err
		}
		if err := check(old); err != nil {
			return err
		}
		claim := a.nip05Claim()
		if claim != "" {
			owner, err := tx.nip05Claimant(claim)
			if err == nil && owner != a.Pubkey {
				return ErrNameTaken
			} else if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			if err := tx.put(agentNameKey(claim), []byte(a.Pubkey), 0); err != nil {
				return err
			}
		}
		if old != nil && old.NIP05Local != "" {
			// Release the claim the agent gives up, and move an older
			// record keyed by the name alone to its full identifier.
			if oc := old.nip05Claim(); oc != "" && oc != claim {
				if err := tx.deleteIfOwner(agentNameKey(oc), a.Pubkey); err != nil {
					return err
				}
			}
			if err := tx.deleteIfOwner(agentNameKey(old.NIP05Local), a.Pubkey); err != nil {
				return err
			}
		}
		return tx.putJSON(agentKey(a.Pubkey), a, 0)
	})
	return created, err
}

// UpdateAgentNIP05 records the outcome of a NIP-05 check, unless the agent
// has since registered with another identifier (then it returns ErrConflict).
func (s *Store) UpdateAgentNIP05(pubkey, identifier string, fn func(a *Agent)) error {
	return s.Update(func(tx *Tx) error {
		var a Agent
		if err := tx.getJSON(agentKey(pubkey), &a); err != nil {
			return err
		}
		if a.NIP05 != identifier {
			return ErrConflict
		}
		fn(&a)
		return tx.putJSON(agentKey(pubkey), &a, 0)
	})
}

// nip05Claim is the identifier a claims ("" when it holds no claim).
func (a *Agent) nip05Claim() string {
	if a.NIP05Local == "" || !strings.Contains(a.NIP05, "@") {
		return ""
	}
	return a.NIP05
}

// nip05Claimant returns the pubkey holding the claim on id (name@domain), or
// ErrNotFound. An older record keyed by the name alone counts only when its
// owner's registration still names id, so a claim made under another
// nip05_domain never answers for this one.
func (tx *Tx) nip05Claimant(id string) (string, error) {
	b, err := tx.get(agentNameKey(id))
	if err == nil {
		return string(b), nil
	} else if !errors.Is(err, ErrNotFound) {
		return "", err
	}
	name, _, ok := strings.Cut(id, "@")
	if !ok {
		return "", ErrNotFound
	}
	b, err = tx.get(agentNameKey(name))
	if err != nil {
		return "", err
	}
	var owner Agent
	if err := tx.getJSON(agentKey(string(b)), &owner); err != nil {
		return "", err
	}
	if owner.nip05Claim() != id {
		return "", ErrNotFound
	}
	return string(b), nil
}

// deleteIfOwner deletes the claim k when pubkey holds it.
func (tx *Tx) deleteIfOwner(k []byte, pubkey string) error {
	b, err := tx.get(k)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return err
	case string(b) != pubkey:
		return nil
	}
	return tx.delete(k)
}

// NIP05Claimant returns the pubkey that claimed the identifier id
// (name@domain, lowercased) under the site's own NIP-05 domain; banned or
// unregistered agents give ErrNotFound.
func (s *Store) NIP05Claimant(id string) (string, error) {
	var pk string
	err := s.View(func(tx *Tx) error {
		var err error
		if pk, err = tx.nip05Claimant(id); err != nil {
			return err
		}
		if banned, err := tx.has(agentBanKey(pk)); err != nil || banned {
			if err == nil {
				err = ErrNotFound
			}
			return err
		}
		ok, err := tx.has(agentKey(pk))
		if err == nil && !ok {
			err = ErrNotFound
		}
		return err
	})
	return pk, err
}

// BanAgent bans pubkey (registered or not). Banning twice keeps the first ban.
func (s *Store) BanAgent(pubkey, reason string, now time.Time) error {
	return s.Update(func(tx *Tx) error {
		if ok, err := tx.has(agentBanKey(pubkey)); err != nil || ok {
			return err
		}
		return tx.putJSON(agentBanKey(pubkey), AgentBan{At: now.Unix(), Reason: reason}, 0)
	})
}

// UnbanAgent lifts a ban; it returns ErrNotFound when pubkey is not banned.
func (s *Store) UnbanAgent(pubkey string) error {
	return s.Update(func(tx *Tx) error {
		if ok, err := tx.has(agentBanKey(pubkey)); err != nil {
			return err
		} else if !ok {
			return ErrNotFound
		}
		return tx.delete(agentBanKey(pubkey))
	})
}

// AgentBans returns every ban by pubkey.
func (s *Store) AgentBans() (map[string]AgentBan, error) {
	bans := map[string]AgentBan{}
	err := s.View(func(tx *Tx) error { return tx.scanBans(bans) })
	return bans, err
}

func (tx *Tx) scanBans(bans map[string]AgentBan) error {
	prefix := key("agent", "ban", "")
	return tx.scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
		var b AgentBan
		if err := json.Unmarshal(v, &b); err != nil {
			return false, err
		}
		bans[string(k[len(prefix):])] = b
		return true, nil
	})
}

// EachAgent calls fn for every registered agent in pubkey order, with its
// activity (never nil) and whether it is banned, from one consistent
// snapshot. The values are only valid during the call.
func (s *Store) EachAgent(fn func(a *Agent, act *AgentActivity, banned bool) error) error {
	return s.View(func(tx *Tx) error {
		bans := map[string]AgentBan{}
		if err := tx.scanBans(bans); err != nil {
			return err
		}
		// Walk agents and activities side by side: both are keyed by pubkey.
		acts := map[string][]byte{}
		actPrefix := key("agent", "act", "")
		if err := tx.scan(actPrefix, nil, false, false, func(k, v []byte) (bool, error) {
			acts[string(k[len(actPrefix):])] = bytes.Clone(v) // v is only lent to fn
			return true, nil
		}); err != nil {
			return err
		}
		prefix := key("agent", "a", "")
		var a Agent
		var act AgentActivity
		return tx.scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
			a = Agent{}
			if err := json.Unmarshal(v, &a); err != nil {
				return false, err
			}
			act = AgentActivity{}
			if b, ok := acts[a.Pubkey]; ok {
				if err := json.Unmarshal(b, &act); err != nil {
					return false, err
				}
			}
			_, banned := bans[a.Pubkey]
			return true, fn(&a, &act, banned)
		})
	})
}

// AgentActivityOf returns pubkey's activity (empty when it never posted).
func (s *Store) AgentActivityOf(pubkey string) (*AgentActivity, error) {
	var act AgentActivity
	err := s.View(func(tx *Tx) error {
		err := tx.getJSON(agentActKey(pubkey), &act)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	})
	return &act, err
}

// RecordAgentPosts records a batch of posts in one transaction. For each
// post whose id was not seen before and whose author is a registered,
// unbanned agent, apply updates the author's activity; it may refuse the
// post with an error (then nothing is recorded for it). The result has one
// entry per post: nil when recorded, ErrDuplicate, ErrNotFound (author not
// registered), ErrAgentBanned, or apply's error.
func (s *Store) RecordAgentPosts(posts []AgentPost, apply func(a *Agent, act *AgentActivity, p AgentPost) error) ([]error, error) {
	res := make([]error, len(posts))
	err := s.Update(func(tx *Tx) error {
		agents := map[string]*Agent{}
		acts := map[string]*AgentActivity{}
		banned := map[string]bool{}
		seenHere := map[string]bool{}
		for i, p := range posts {
			res[i] = nil
			if seenHere[p.ID] {
				res[i] = ErrDuplicate
				continue
			}
			if ok, err := tx.has(agentSeenKey(p.ID)); err != nil {
				return err
			} else if ok {
				res[i] = ErrDuplicate
				continue
			}
			a, ok := agents[p.Pubkey]
			if !ok {
				var cur Agent
				switch err := tx.getJSON(agentKey(p.Pubkey), &cur); {
				case err == nil:
					a = &cur
				case errors.Is(err, ErrNotFound):
				default:
					return err
				}
				agents[p.Pubkey] = a
				b, err := tx.has(agentBanKey(p.Pubkey))
				if err != nil {
					return err
				}
				banned[p.Pubkey] = b
			}
			if banned[p.Pubkey] {
				res[i] = ErrAgentBanned
				continue
			}
			if a == nil {
				res[i] = ErrNotFound
				continue
			}
			act := acts[p.Pubkey]
			if act == nil {
				act = &AgentActivity{}
				if err := tx.getJSON(agentActKey(p.Pubkey), act); err != nil && !errors.Is(err, ErrNotFound) {
					return err
				}
				acts[p.Pubkey] = act
			}
			if err := apply(a, act, p); err != nil {
				res[i] = err
				continue
			}
			seenHere[p.ID] = true
			if err := tx.put(agentSeenKey(p.ID), nil, SeenPostTTL); err != nil {
				return err
			}
		}
		pks := make([]string, 0, len(acts))
		for pk := range acts {
			pks = append(pks, pk)
		}
		sort.Strings(pks)
		for _, pk := range pks {
			if err := tx.putJSON(agentActKey(pk), acts[pk], 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// AgentPubkeys returns the pubkeys of registered, unbanned agents, sorted.
func (s *Store) AgentPubkeys() ([]string, error) {
	var pks []string
	err := s.View(func(tx *Tx) error {
		bans := map[string]AgentBan{}
		if err := tx.scanBans(bans); err != nil {
			return err
		}
		prefix := key("agent", "a", "")
		return tx.scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
			pk := string(k[len(prefix):])
			if _, b := bans[pk]; !b {
				pks = append(pks, pk)
			}
			return true, nil
		})
	})
	return pks, err
}

// AgentRelayCursor returns the newest created_at seen from relay url (0 if none).
func (s *Store) AgentRelayCursor(url string) (int64, error) {
	var t int64
	err := s.View(func(tx *Tx) error {
		b, err := tx.get(agentRelayKey(url))
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		t, err = strconv.ParseInt(string(b), 10, 64)
		return err
	})
	return t, err
}

// SetAgentRelayCursor raises the cursor of relay url to t (never lowers it).
func (s *Store) SetAgentRelayCursor(url string, t int64) error {
	return s.Update(func(tx *Tx) error {
		b, err := tx.get(agentRelayKey(url))
		if err == nil {
			if cur, perr := strconv.ParseInt(string(b), 10, 64); perr == nil && cur >= t {
				return nil
			}
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		return tx.put(agentRelayKey(url), []byte(strconv.FormatInt(t, 10)), 0)
	})
}
