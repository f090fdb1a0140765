// Package agents holds the records of hearth_directory (handlers/directory):
// the registered agents, their activity and bans, NIP-05 claims, relay
// cursors, and the published directory document, over the engine-agnostic
// core in storage (storage.Tx; keys under "agent/").
//
// A Store is a value holding only the *storage.Store: it keeps no state of
// its own (no cache; RecordPosts's memo of decoded records is checked
// against the stored bytes each time), so Of may be called anywhere, as
// often as wanted, without allocating, and two values of one
// storage.Store are the same records.
package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Store is the agent directory's records in one storage.Store.
type Store struct{ st *storage.Store }

// Of returns the agent directory's records in st.
func Of(st *storage.Store) Store { return Store{st} }

// Agent directory records, under the "agent/" prefix:
//
//	agent/a/<pubkey>      Agent: the current registration and NIP-05 state
//	agent/act/<pubkey>    Activity: bounded activity summary (binary:
//	                      marshalActivity; older records JSON)
//	agent/ban/<pubkey>    Ban: the agent is banned (may exist without a registration)
//	agent/seen/<eventid>  empty: the post was counted (kept for good: relays
//	                      are read again from each author's registration,
//	                      and every post read again must find its id here)
//	agent/nip05/<id>      pubkey holding the claim on the identifier id
//	                      (name@domain, a domain that was the site's
//	                      nip05_domain); whether the operator approved it is
//	                      Agent.NIP05Approved
//	agent/nip05/<name>    older records: the claim, keyed by the name alone; it
//	                      stands for the identifier its owner's Agent.NIP05 names
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
	NIP05Verified bool `json:"nip05_verified,omitempty"`
	// NIP05Approved: the site's operator approved the agent's claim on
	// NIP05 under the site's own domain (ApproveNIP05). Until then a local
	// claim holds the name but vouches for nothing, unless the site
	// claims are open.
	NIP05Approved  bool  `json:"nip05_approved,omitempty"`
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

// Activity is what the directory keeps about an agent's posts: enough
// to count active days and compute anomaly flags, with bounded size.
type Activity struct {
	// Days is the sorted set of UTC days (Unix days) with at least one post.
	Days []int32 `json:"d,omitempty"`
	// Times holds the created_at of recent posts, sorted, bounded by the
	// directory (only the last day or so matters for burst detection).
	Times []int64 `json:"t,omitempty"`
	// Skels holds the newest posts' skeleton hashes, sorted by time.
	Skels []Skeleton `json:"s,omitempty"`
	// BurstAt is the created_at of the last post that completed a burst.
	BurstAt int64 `json:"b,omitempty"`
	// LastPostAt is the newest counted post's created_at.
	LastPostAt int64 `json:"l,omitempty"`
	// Posts counts the posts counted since registration.
	Posts int64 `json:"n,omitempty"`
}

// Skeleton is one post's time and text-skeleton hash.
type Skeleton struct {
	At   int64  `json:"t"`
	Hash uint64 `json:"h"`
}

// Ban records a ban.
type Ban struct {
	At     int64  `json:"at"`
	Reason string `json:"reason,omitempty"`
}

// Post is a post to record for an agent.
type Post struct {
	ID        string
	Pubkey    string
	CreatedAt int64
	Skeleton  uint64
}

func agentKey(pk string) []byte     { return storage.Key("agent", "a", pk) }
func agentActKey(pk string) []byte  { return storage.Key("agent", "act", pk) }
func agentBanKey(pk string) []byte  { return storage.Key("agent", "ban", pk) }
func agentSeenKey(id string) []byte { return storage.Key("agent", "seen", id) }
func agentNameKey(id string) []byte { return storage.Key("agent", "nip05", id) }
func agentDocKey(sum string) []byte { return storage.Key("agent", "doc", sum) }

// DirectoryStampTTL is how long the generated_at of a directory document is
// remembered after the last StampDocument for it. Directories
// stamp their document again well within it (so a restart keeps
// generated_at); a stamp left by a configuration no longer served expires.
const DirectoryStampTTL = 30 * 24 * time.Hour

// StampDocument returns the generated_at (Unix seconds) of the
// directory document whose agents array hashes to sum: the stored one when
// a directory already published that content (before a restart or a
// reload, or another site on this store), else at, which is stored. prev
// is the caller's previous sum ("" for none): its stamp is forgotten, so
// content that comes back after a change gets a new generated_at.
func (s Store) StampDocument(ctx context.Context, sum, prev string, at int64) (int64, error) {
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		b, err := tx.Get(agentDocKey(sum))
		switch {
		case err == nil:
			if t, perr := strconv.ParseInt(string(b), 10, 64); perr == nil {
				at = t
			}
		case !errors.Is(err, storage.ErrNotFound):
			return err
		}
		if prev != "" && prev != sum {
			if err := tx.Delete(agentDocKey(prev)); err != nil {
				return err
			}
		}
		return tx.Put(agentDocKey(sum), []byte(strconv.FormatInt(at, 10)), DirectoryStampTTL)
	})
	return at, err
}

// Get returns the registration of pubkey, or storage.ErrNotFound.
func (s Store) Get(ctx context.Context, pubkey string) (*Agent, error) {
	var a Agent
	err := s.st.View(ctx, func(tx *storage.Tx) error { return tx.GetJSON(agentKey(pubkey), &a) })
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// Banned reports whether pubkey is banned.
func (s Store) Banned(ctx context.Context, pubkey string) (bool, error) {
	var banned bool
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		var err error
		banned, err = tx.Has(agentBanKey(pubkey))
		return err
	})
	return banned, err
}

// Register stores a registration. check is called in the transaction
// with the current registration (nil for a new agent) and may refuse it by
// returning an error, or adjust a (e.g. keep FirstRegisteredAt). A banned
// pubkey gets ErrAgentBanned; a NIP-05 identifier (name@domain) claimed by
// another agent gets ErrNameTaken. created is true for a first registration.
func (s Store) Register(ctx context.Context, a *Agent, check func(old *Agent) error) (created bool, err error) {
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		created = false
		if banned, err := tx.Has(agentBanKey(a.Pubkey)); err != nil {
			return err
		} else if banned {
			return ErrAgentBanned
		}
		var old *Agent
		var cur Agent
		switch err := tx.GetJSON(agentKey(a.Pubkey), &cur); {
		case err == nil:
			old = &cur
		case errors.Is(err, storage.ErrNotFound):
			created = true
		default:
			return err
		}
		if err := check(old); err != nil {
			return err
		}
		claim := a.nip05Claim()
		if claim != "" {
			owner, err := nip05Claimant(tx, claim)
			if err == nil && owner != a.Pubkey {
				return ErrNameTaken
			} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
				return err
			}
			if err := tx.Put(agentNameKey(claim), []byte(a.Pubkey), 0); err != nil {
				return err
			}
		}
		if old != nil && old.NIP05Local != "" {
			// Release the claim the agent gives up, and move an older
			// record keyed by the name alone to its full identifier.
			if oc := old.nip05Claim(); oc != "" && oc != claim {
				if err := deleteIfOwner(tx, agentNameKey(oc), a.Pubkey); err != nil {
					return err
				}
			}
			if err := deleteIfOwner(tx, agentNameKey(old.NIP05Local), a.Pubkey); err != nil {
				return err
			}
		}
		return tx.PutJSON(agentKey(a.Pubkey), a, 0)
	})
	return created, err
}

// UpdateNIP05 records the outcome of a NIP-05 check, unless the agent
// has since registered with another identifier (then it returns storage.ErrConflict).
func (s Store) UpdateNIP05(ctx context.Context, pubkey, identifier string, fn func(a *Agent)) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		var a Agent
		if err := tx.GetJSON(agentKey(pubkey), &a); err != nil {
			return err
		}
		if a.NIP05 != identifier {
			return storage.ErrConflict
		}
		fn(&a)
		return tx.PutJSON(agentKey(pubkey), &a, 0)
	})
}

// Ban bans pubkey (registered or not) and releases the NIP-05 name it
// held under the site's domain, so a banned squatter keeps nobody from it.
// Banning twice keeps the first ban.
func (s Store) Ban(ctx context.Context, pubkey, reason string, now time.Time) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		if ok, err := tx.Has(agentBanKey(pubkey)); err != nil || ok {
			return err
		}
		if err := releaseClaims(tx, pubkey, ""); err != nil {
			return err
		}
		return tx.PutJSON(agentBanKey(pubkey), Ban{At: now.Unix(), Reason: reason}, 0)
	})
}

// Unban lifts a ban; it returns storage.ErrNotFound when pubkey is not banned.
func (s Store) Unban(ctx context.Context, pubkey string) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		if ok, err := tx.Has(agentBanKey(pubkey)); err != nil {
			return err
		} else if !ok {
			return storage.ErrNotFound
		}
		return tx.Delete(agentBanKey(pubkey))
	})
}

// Bans returns every ban by pubkey.
func (s Store) Bans(ctx context.Context) (map[string]Ban, error) {
	bans := map[string]Ban{}
	err := s.st.View(ctx, func(tx *storage.Tx) error { return scanBans(tx, bans) })
	return bans, err
}

func scanBans(tx *storage.Tx, bans map[string]Ban) error {
	prefix := storage.Key("agent", "ban", "")
	return tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
		var b Ban
		if err := json.Unmarshal(v, &b); err != nil {
			return false, err
		}
		bans[string(k[len(prefix):])] = b
		return true, nil
	})
}

// Each calls fn for every registered agent in pubkey order, with its
// activity (never nil) and whether it is banned, from one consistent
// snapshot. The values are only valid during the call.
func (s Store) Each(ctx context.Context, fn func(a *Agent, act *Activity, banned bool) error) error {
	return s.st.View(ctx, func(tx *storage.Tx) error {
		bans := map[string]Ban{}
		if err := scanBans(tx, bans); err != nil {
			return err
		}
		// Walk agents and activities side by side: both are keyed by pubkey.
		acts := map[string][]byte{}
		actPrefix := storage.Key("agent", "act", "")
		if err := tx.Scan(actPrefix, nil, false, false, func(k, v []byte) (bool, error) {
			acts[string(k[len(actPrefix):])] = bytes.Clone(v) // v is only lent to fn
			return true, nil
		}); err != nil {
			return err
		}
		prefix := storage.Key("agent", "a", "")
		var a Agent
		var act Activity
		return tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
			a = Agent{}
			if err := json.Unmarshal(v, &a); err != nil {
				return false, err
			}
			act = Activity{}
			if b, ok := acts[a.Pubkey]; ok {
				if err := unmarshalActivity(b, &act); err != nil {
					return false, err
				}
			}
			_, banned := bans[a.Pubkey]
			return true, fn(&a, &act, banned)
		})
	})
}

// All returns every registered agent's records (banned ones marked), in
// pubkey order, from one consistent snapshot. Decoding is most of the
// cost with 100 k agents, so the records are copied out of the snapshot
// and decoded on every core.
func (s Store) All(ctx context.Context) ([]Record, error) {
	var raws, acts [][]byte
	var banned []bool
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		raws, acts, banned = raws[:0], acts[:0], banned[:0]
		bans := map[string]Ban{}
		if err := scanBans(tx, bans); err != nil {
			return err
		}
		byPK := map[string][]byte{}
		actPrefix := storage.Key("agent", "act", "")
		if err := tx.Scan(actPrefix, nil, false, false, func(k, v []byte) (bool, error) {
			byPK[string(k[len(actPrefix):])] = bytes.Clone(v) // v is only lent to fn
			return true, nil
		}); err != nil {
			return err
		}
		prefix := storage.Key("agent", "a", "")
		return tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
			pk := k[len(prefix):]
			raws = append(raws, bytes.Clone(v))
			acts = append(acts, byPK[string(pk)])
			_, b := bans[string(pk)]
			banned = append(banned, b)
			return true, nil
		})
	})
	if err != nil {
		return nil, err
	}
	out := make([]Record, len(raws))
	workers := max(1, runtime.GOMAXPROCS(0))
	per := (len(raws) + workers - 1) / workers
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w*per < len(raws); w++ {
		wg.Go(func() {
			for i := w * per; i < min((w+1)*per, len(raws)); i++ {
				r := Record{Agent: &Agent{}, Activity: &Activity{}, Banned: banned[i]}
				if err := json.Unmarshal(raws[i], r.Agent); err != nil {
					errs[w] = err
					return
				}
				if acts[i] != nil {
					if err := unmarshalActivity(acts[i], r.Activity); err != nil {
						errs[w] = err
						return
					}
				}
				raws[i], acts[i] = nil, nil
				out[i] = r
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Activity returns pubkey's activity (empty when it never posted).
func (s Store) Activity(ctx context.Context, pubkey string) (*Activity, error) {
	var act Activity
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		raw, err := tx.Get(agentActKey(pubkey))
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return unmarshalActivity(raw, &act)
	})
	return &act, err
}

// RecordPosts records a batch of posts in one transaction. For each
// post whose id was not seen before and whose author is a registered,
// unbanned agent, apply updates the author's activity (the Agent it is
// given holds only Pubkey and FirstRegisteredAt); it may refuse the
// post with an error (then nothing is recorded for it). The result has one
// entry per post: nil when recorded, ErrDuplicate, storage.ErrNotFound (author not
// registered), ErrAgentBanned, or apply's error.
func (s Store) RecordPosts(ctx context.Context, posts []Post, apply func(a *Agent, act *Activity, p Post) error) ([]error, error) {
	return s.recordPosts(ctx, s.st.Update, posts, apply)
}

// RecordPostsAsync is RecordPosts with an asynchronous commit
// (storage.Store.UpdateAsync): visible when it returns, durable once a
// synchronous commit that started after it returned has returned too; the
// caller acknowledges the posts only then.
func (s Store) RecordPostsAsync(ctx context.Context, posts []Post, apply func(a *Agent, act *Activity, p Post) error) ([]error, error) {
	return s.recordPosts(ctx, s.st.UpdateAsync, posts, apply)
}

func (s Store) recordPosts(ctx context.Context, update func(context.Context, func(*storage.Tx) error) error, posts []Post, apply func(a *Agent, act *Activity, p Post) error) ([]error, error) {
	res := make([]error, len(posts))
	err := update(ctx, func(tx *storage.Tx) error {
		agents := map[string]*Agent{}
		acts := map[string]*Activity{}
		banned := map[string]bool{}
		seenHere := map[string]bool{}
		for i, p := range posts {
			res[i] = nil
			if seenHere[p.ID] {
				res[i] = ErrDuplicate
				continue
			}
			if ok, err := tx.Has(agentSeenKey(p.ID)); err != nil {
				return err
			} else if ok {
				res[i] = ErrDuplicate
				continue
			}
			a, ok := agents[p.Pubkey]
			if !ok {
				// Only what apply is given: decoding the whole
				// registration (its raw event) for each author of
				// each batch would cost more than the rest.
				switch raw, err := tx.Get(agentKey(p.Pubkey)); {
				case err == nil:
					first, err := memo.firstRegisteredAt(p.Pubkey, raw)
					if err != nil {
						return err
					}
					a = &Agent{Pubkey: p.Pubkey, FirstRegisteredAt: first}
				case errors.Is(err, storage.ErrNotFound):
				default:
					return err
				}
				agents[p.Pubkey] = a
				b, err := tx.Has(agentBanKey(p.Pubkey))
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
				res[i] = storage.ErrNotFound
				continue
			}
			act := acts[p.Pubkey]
			if act == nil {
				switch raw, err := tx.Get(agentActKey(p.Pubkey)); {
				case err == nil:
					if act, err = memo.activity(p.Pubkey, raw); err != nil {
						return err
					}
				case errors.Is(err, storage.ErrNotFound):
					act = &Activity{}
				default:
					return err
				}
				acts[p.Pubkey] = act
			}
			if err := apply(a, act, p); err != nil {
				res[i] = err
				continue
			}
			seenHere[p.ID] = true
			if err := tx.Put(agentSeenKey(p.ID), nil, 0); err != nil {
				return err
			}
		}
		pks := make([]string, 0, len(acts))
		for pk := range acts {
			pks = append(pks, pk)
		}
		sort.Strings(pks)
		for _, pk := range pks {
			raw := marshalActivity(acts[pk])
			if err := tx.Put(agentActKey(pk), raw, 0); err != nil {
				return err
			}
			memo.wrote(pk, raw, acts[pk])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Record is one agent's records: Agent is nil when pubkey is not registered.
type Record struct {
	Agent    *Agent
	Activity *Activity
	Banned   bool
}

// Records returns the records of pubkeys, in order, from one snapshot.
func (s Store) Records(ctx context.Context, pubkeys []string) ([]Record, error) {
	out := make([]Record, len(pubkeys))
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		for i, pk := range pubkeys {
			var a Agent
			switch err := tx.GetJSON(agentKey(pk), &a); {
			case errors.Is(err, storage.ErrNotFound):
				out[i] = Record{}
				continue
			case err != nil:
				return err
			}
			act := &Activity{}
			switch raw, err := tx.Get(agentActKey(pk)); {
			case err == nil:
				if err := unmarshalActivity(raw, act); err != nil {
					return err
				}
			case !errors.Is(err, storage.ErrNotFound):
				return err
			}
			banned, err := tx.Has(agentBanKey(pk))
			if err != nil {
				return err
			}
			out[i] = Record{Agent: &a, Activity: act, Banned: banned}
		}
		return nil
	})
	return out, err
}

// Seen reports, for each of ids, whether that post was counted already.
func (s Store) Seen(ctx context.Context, ids []string) ([]bool, error) {
	out := make([]bool, len(ids))
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		for i, id := range ids {
			ok, err := tx.Has(agentSeenKey(id))
			if err != nil {
				return err
			}
			out[i] = ok
		}
		return nil
	})
	return out, err
}

// Author is a registered, unbanned agent as the relay subscriptions ask
// for its notes.
type Author struct {
	Pubkey string
	// FirstRegisteredAt: notes dated before it never count.
	FirstRegisteredAt int64
}

// Authors returns the registered, unbanned agents, sorted by pubkey.
func (s Store) Authors(ctx context.Context) ([]Author, error) {
	var out []Author
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		bans := map[string]Ban{}
		if err := scanBans(tx, bans); err != nil {
			return err
		}
		prefix := storage.Key("agent", "a", "")
		return tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
			pk := string(k[len(prefix):])
			if _, b := bans[pk]; b {
				return true, nil
			}
			var a struct {
				FirstRegisteredAt int64 `json:"first_registered_at"`
			}
			if err := json.Unmarshal(v, &a); err != nil {
				return false, err
			}
			out = append(out, Author{Pubkey: pk, FirstRegisteredAt: a.FirstRegisteredAt})
			return true, nil
		})
	})
	return out, err
}
