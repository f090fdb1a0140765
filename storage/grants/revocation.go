package grants

// Revocation at any number of tokens. A member may hold any number of
// tokens (apps and tokens cost a client nothing to make), more than one
// transaction may delete, so a revocation deletes none: it moves a
// generation on, in one write, and every token, refresh token and
// authorization code carries the generations it was issued in.
//
//   - The member's access generation (members.Member.AccessGen) ends all of
//     the member's grants: RevokeMemberAccess and the password changes that
//     revoke access with it.
//   - The pair's generation (pairState, one record per member and app)
//     ends one app's: RevokeAppForMember.
//
// A token is live while both are the ones it carries; the access token
// path reads the member and the pair from the record caches, which every
// node drops when they are written. The member's index of its grants
// keeps each ref under the generations it was issued in, so what is live
// is one range per app, and the refs of ended generations are passed over
// with a seek. Those records, and the token records they name, are then
// deleted by the sweep (sweeper), in bounded batches, from a queue the
// revocation writes in its transaction: it resumes after a restart, on any
// node.
//
// Keys:
//
//	u/<member>/oauth/grant/<member gen>/<client_id>/<app gen>/<digest>  memberTokenRef
//	oauth/pair/<member>/<client_id>                                   pairState
//	oauth/sweep/<member>                                              a revocation whose records are
//	                                                                  still to delete (a random value)
//
// Generations are written in 16 hexadecimal digits, so that keys sort as
// the numbers do.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// grantGen is the generations a token, refresh token, code or refresh
// family was issued in: the member's access generation and the pair's.
// Records written before generations existed have both zero, as members
// and pairs never revoked: they stay live until the first revocation.
type grantGen struct {
	MemberGen uint64 `json:"member_gen,omitempty"`
	AppGen    uint64 `json:"app_gen,omitempty"`
}

// pairState is a member's grant to one app: its generation, moved on by
// each RevokeAppForMember.
type pairState struct {
	Gen uint64 `json:"gen"`
}

// pairCache keeps the pairs' states (by "<member>/<client_id>") for the
// access token path; an absent record is cached as the zero state.
var pairCache = storage.NewCacheKind[pairState](storage.Key("oauth", "pair", ""))

func pairKey(memberID, clientID string) []byte {
	return storage.Key("oauth", "pair", memberID, clientID)
}
func pairID(memberID, clientID string) string { return memberID + "/" + clientID }

func genHex(g uint64) string {
	s := strconv.FormatUint(g, 16)
	return strings.Repeat("0", 16-len(s)) + s
}

// grantsPrefix is the member's index of its grants.
func grantsPrefix(memberID string) []byte { return storage.Key("u", memberID, "oauth", "grant", "") }

// zonePrefix is the member's index for access generation gen.
func zonePrefix(memberID string, gen uint64) []byte {
	return storage.Key("u", memberID, "oauth", "grant", genHex(gen), "")
}

// refKey is the index's ref of the token (or refresh token) digest.
func refKey(memberID, clientID string, g grantGen, digest string) []byte {
	return storage.Key("u", memberID, "oauth", "grant", genHex(g.MemberGen), clientID, genHex(g.AppGen), digest)
}

// legacyRefKey is where refs were kept before generations
// (migrateLegacyRefs moves them).
func legacyRefKey(memberID, clientID, digest string) []byte {
	return append(legacyRefsPrefix(memberID), clientID+"/"+digest...)
}

// pastApp is the first key after every ref of clientID in zone.
func pastApp(zone []byte, clientID string) []byte {
	k := append(append([]byte{}, zone...), clientID...)
	return append(k, '/', 0xff)
}

func sweepKey(memberID string) []byte { return storage.Key("oauth", "sweep", memberID) }

// readPair returns the state of memberID's grant to clientID in tx (zero
// when it was never revoked).
func readPair(tx *storage.Tx, memberID, clientID string) (pairState, error) {
	var p pairState
	err := tx.GetJSON(pairKey(memberID, clientID), &p)
	if errors.Is(err, storage.ErrNotFound) {
		return pairState{}, nil
	}
	return p, err
}

// cachedPair is readPair through pairCache; read says it was read, to be
// added with a generation taken before tx began.
func cachedPair(st *storage.Store, tx *storage.Tx, memberID, clientID string) (p *pairState, read bool, err error) {
	if p = pairCache.Of(st).Get(pairID(memberID, clientID)); p != nil {
		return p, false, nil
	}
	rec, err := readPair(tx, memberID, clientID)
	if err != nil {
		return nil, false, err
	}
	return &rec, true, nil
}

// grantOf is the generations a grant of m to clientID is issued in now,
// read in tx: a revocation that commits meanwhile conflicts with it.
func grantOf(tx *storage.Tx, m *members.Member, clientID string) (grantGen, error) {
	p, err := readPair(tx, m.ID, clientID)
	return grantGen{MemberGen: m.AccessGen, AppGen: p.Gen}, err
}

// liveIn reports whether a record issued in g is live for m and the pair p.
func (g grantGen) liveIn(m *members.Member, p pairState) bool {
	return g.MemberGen == m.AccessGen && g.AppGen == p.Gen
}

// putRef indexes a token (or refresh token) of the member's grant.
func putRef(tx *storage.Tx, memberID, clientID string, g grantGen, digest string, ref memberTokenRef, ttl time.Duration) error {
	return tx.PutJSON(refKey(memberID, clientID, g, digest), ref, ttl)
}

// deleteRef removes a token's ref from the index; a token of generations
// zero may still have its ref where refs were kept before generations.
func deleteRef(tx *storage.Tx, memberID, clientID string, g grantGen, digest string) error {
	if err := tx.Delete(refKey(memberID, clientID, g, digest)); err != nil {
		return err
	}
	if g == (grantGen{}) {
		return tx.DeleteIfPresent(legacyRefKey(memberID, clientID, digest))
	}
	return nil
}

// What a liveRefs callback asks next.
const (
	nextRef = iota
	nextApp // pass over the rest of this app's refs
	stopRefs
)

// liveRefs calls fn with each live ref of m (of clientID only, when not
// empty), app by app: the refs of m's access generation under the pair's
// generation. The refs of ended generations are passed over with a seek
// per app, so however many a revocation left, they cost nothing here.
func liveRefs(tx *storage.Tx, m *members.Member, clientID string, fn func(clientID, digest string, ref memberTokenRef) (int, error)) error {
	zone := zonePrefix(m.ID, m.AccessGen)
	prefix := zone
	if clientID != "" {
		prefix = append(append(append([]byte{}, zone...), clientID...), '/')
	}
	c := tx.Cursor(kv.Range{Prefix: prefix})
	defer c.Close()
	gens := map[string]string{}
	for c.Valid() {
		key := string(c.Key())
		client, tail, ok := strings.Cut(key[len(zone):], "/")
		agen, digest, ok2 := strings.Cut(tail, "/")
		if !ok || !ok2 {
			c.Next()
			continue
		}
		live, seen := gens[client]
		if !seen {
			p, err := readPair(tx, m.ID, client)
			if err != nil {
				return err
			}
			live = genHex(p.Gen)
			gens[client] = live
		}
		if agen != live {
			if from := string(zone) + client + "/" + live + "/"; key < from {
				c.Seek([]byte(from))
			} else {
				c.Seek(pastApp(zone, client))
			}
			continue
		}
		v, err := c.Value()
		if err != nil {
			return err
		}
		var ref memberTokenRef
		if err := json.Unmarshal(v, &ref); err != nil {
			return err
		}
		next, err := fn(client, digest, ref)
		if err != nil || next == stopRefs {
			return err
		}
		if next == nextApp {
			c.Seek(pastApp(zone, client))
			continue
		}
		c.Next()
	}
	return kv.CursorErr(c)
}

func init() {
	// A member's access ends with their grants (RevokeMemberAccess): the
	// member's access generation moves on (members.revokeAccess), which
	// ends every token, refresh token and code at once; here the apps are
	// counted (a seek each) and the sweep queued.
	members.OnRevokeAccess(func(tx *storage.Tx, m *members.Member) (tokens, apps int, err error) {
		err = liveRefs(tx, m, "", func(string, string, memberTokenRef) (int, error) {
			apps++
			return nextApp, nil
		})
		if err != nil {
			return 0, 0, err
		}
		return 0, apps, queueSweep(tx, m.ID)
	})
	storage.OnMigrate(func(ctx context.Context, st *storage.Store) error {
		if err := migrateLegacyRefs(ctx, st); err != nil {
			return fmt.Errorf("move OAuth grants to their generations: %w", err)
		}
		return nil
	})
}

// RevokeAppForMember revokes every token and refresh token memberID has
// given clientID, and the authorization codes not yet exchanged: the
// pair's generation moves on, in one write whatever their number, and the
// sweep deletes their records afterwards. An app the member never
// authorized (no pair: no code granted, no live token) has nothing to
// revoke, and nothing is written: anyone can make apps, and a pair a
// revocation wrote for each would be the member's to delete.
func (s Store) RevokeAppForMember(ctx context.Context, memberID, clientID string) error {
	if clientID == "" || strings.Contains(clientID, "/") {
		return nil
	}
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		var p pairState
		if err := tx.GetJSON(pairKey(memberID, clientID), &p); errors.Is(err, storage.ErrNotFound) {
			if live, err := hasLiveRefs(tx, memberID, clientID); err != nil || !live {
				return err
			}
		} else if err != nil {
			return err
		}
		p.Gen++
		if err := tx.PutJSON(pairKey(memberID, clientID), p, 0); err != nil {
			return err
		}
		return queueSweep(tx, memberID)
	})
}

// hasLiveRefs reports whether memberID holds a live token or refresh token
// of clientID (a grant from before the pair records were written at
// consent: notePair).
func hasLiveRefs(tx *storage.Tx, memberID, clientID string) (bool, error) {
	m, err := members.ByID(tx, memberID)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	live := false
	err = liveRefs(tx, m, clientID, func(string, string, memberTokenRef) (int, error) {
		live = true
		return stopRefs, nil
	})
	return live, err
}

// notePair writes the pair of memberID and clientID, of generation zero,
// when there is none yet: a code granted (CreateCode) makes the pair that
// RevokeAppForMember moves on, so that a code not yet exchanged is revoked
// with the app, while a revocation of an app never authorized writes
// nothing. The first pair of an app is its first use, which keeps it
// from the removal of unused apps (noteAppUsed).
func notePair(tx *storage.Tx, memberID, clientID string) error {
	if ok, err := tx.Has(pairKey(memberID, clientID)); err != nil || ok {
		return err
	}
	if err := noteAppUsed(tx, clientID); err != nil {
		return err
	}
	return tx.PutJSON(pairKey(memberID, clientID), pairState{}, 0)
}

// queueSweep asks the sweep to look at memberID's grants, in the
// revocation's transaction so that it cannot be lost: a new random value,
// so that a sweep that began before this revocation does not take its
// entry away, and a notification that wakes the sweep on the node that
// runs it.
func queueSweep(tx *storage.Tx, memberID string) error {
	if err := tx.Put(sweepKey(memberID), []byte(storage.NewSecret("", 8)), 0); err != nil {
		return err
	}
	return tx.Notify(sweepChannel, memberID)
}

// sweepChannel wakes the sweep (queueSweep).
const sweepChannel = "hearth_oauth_sweep"

// Bounds of one transaction of the sweep: the refs it deletes (each with
// the token or refresh token it names: three keys) and the keys it reads.
const (
	sweepBatch = 256
	sweepReads = 2048
)

// sweepPoll is how often the sweep looks at its queue without being
// woken: for a revocation another node made, or one cut short.
const sweepPoll = 5 * time.Minute

// sweepKind is the store's sweep of revoked grants.
var sweepKind = storage.NewWorkerKind(newSweeper)

// sweeper deletes, in bounded batches, the records that revocations left
// behind them (the queue under oauth/sweep/). One node of a store sweeps
// at a time (the lease sweepLease), and another takes over when it stops;
// every batch deletes only what is dead, so a batch cut short is done
// again by the next.
type sweeper struct {
	st   *storage.Store
	wake chan struct{}
	// mu is held by each batch; Hold takes it.
	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	started bool
}

func newSweeper(st *storage.Store) *sweeper {
	return &sweeper{st: st, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (w *sweeper) Start() {
	ctx, cancel := context.WithCancel(w.st.Background())
	w.cancel, w.started = cancel, true
	go w.run(ctx)
}

func (w *sweeper) Look()    { w.poke() }
func (w *sweeper) Hold()    { w.mu.Lock() }
func (w *sweeper) Release() { w.mu.Unlock() }

func (w *sweeper) Stop() {
	if !w.started {
		return
	}
	w.cancel()
	<-w.done
}

// poke wakes the sweep (a revocation committed).
func (w *sweeper) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// sweepLease is the lease of the node that sweeps.
const sweepLease = "oauth:sweep"

func (w *sweeper) run(ctx context.Context) {
	defer close(w.done)
	w.st.LeadWoken(ctx, sweepLease, sweepChannel, "revocations of OAuth grants", func(string) { w.poke() }, w.lead)
}

// lead sweeps while this node holds the lease: at once, when a revocation
// wakes it, and every sweepPoll.
func (w *sweeper) lead(ctx context.Context) {
	t := time.NewTicker(sweepPoll)
	defer t.Stop()
	for {
		if err := w.sweep(ctx); err != nil && ctx.Err() == nil {
			w.st.Logger().Warn("the records of revoked OAuth grants and unused apps are deleted later", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-t.C:
		}
	}
}

// update runs fn in a transaction of the sweep's own: none runs while
// the sweep is held (Hold), and none once it is stopped.
func (w *sweeper) update(ctx context.Context, fn func(tx *storage.Tx) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	return w.st.Update(ctx, fn)
}

// sweep works the queue through once, then removes the unused apps
// (vacuum.go).
func (w *sweeper) sweep(ctx context.Context) error {
	type queued struct{ member, value string }
	var queue []queued
	prefix := sweepKey("")
	w.mu.Lock()
	err := w.st.View(ctx, func(tx *storage.Tx) error {
		queue = queue[:0]
		return tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
			queue = append(queue, queued{string(k[len(prefix):]), string(v)})
			return true, nil
		})
	})
	w.mu.Unlock()
	if err != nil {
		return err
	}
	for _, q := range queue {
		if err := w.sweepMember(ctx, q.member, q.value); err != nil {
			return err
		}
	}
	return w.vacuum(ctx)
}

// sweepMember deletes the dead refs, tokens, refresh tokens and refresh
// families of memberID in batches, then its queue entry if it still holds
// value (a revocation since has queued it again).
func (w *sweeper) sweepMember(ctx context.Context, memberID, value string) error {
	for _, part := range []func(tx *storage.Tx, m *members.Member, from []byte) ([]byte, error){sweepRefs, sweepFamilies} {
		var from []byte
		for {
			var next []byte
			err := w.update(ctx, func(tx *storage.Tx) error {
				next = nil
				m, err := members.ByID(tx, memberID)
				if errors.Is(err, storage.ErrNotFound) {
					return nil // deleted: its records went with it (DeleteMember)
				}
				if err != nil {
					return err
				}
				next, err = part(tx, m, from)
				return err
			})
			if err != nil {
				return err
			}
			if next == nil {
				break
			}
			from = next
		}
	}
	return w.update(ctx, func(tx *storage.Tx) error {
		v, err := tx.Get(sweepKey(memberID))
		if errors.Is(err, storage.ErrNotFound) || err == nil && string(v) != value {
			return nil
		}
		if err != nil {
			return err
		}
		return tx.Delete(sweepKey(memberID))
	})
}

// sweepRefs deletes, from the key from on, up to sweepBatch dead refs of
// m and the token or refresh token each names, reading at most sweepReads
// keys; it returns the key to go on from, or nil at the end.
func sweepRefs(tx *storage.Tx, m *members.Member, from []byte) ([]byte, error) {
	prefix := grantsPrefix(m.ID)
	c := tx.Cursor(kv.Range{Prefix: prefix, Start: from, KeysOnly: true})
	defer c.Close()
	pairs := map[string]uint64{}
	var dead [][]byte
	for reads := 0; c.Valid(); reads++ {
		if len(dead) == sweepBatch || reads == sweepReads {
			next := append([]byte{}, c.Key()...)
			return next, deleteRefs(tx, prefix, dead)
		}
		key := c.Key()
		parts := strings.Split(string(key[len(prefix):]), "/")
		if len(parts) != 4 {
			c.Next()
			continue
		}
		mgen, err1 := strconv.ParseUint(parts[0], 16, 64)
		agen, err2 := strconv.ParseUint(parts[2], 16, 64)
		if err1 != nil || err2 != nil {
			c.Next()
			continue
		}
		if mgen == m.AccessGen {
			pg, ok := pairs[parts[1]]
			if !ok {
				p, err := readPair(tx, m.ID, parts[1])
				if err != nil {
					return nil, err
				}
				pg = p.Gen
				pairs[parts[1]] = pg
			}
			if agen >= pg {
				c.Seek(pastApp(zonePrefix(m.ID, mgen), parts[1]))
				continue
			}
		} else if mgen > m.AccessGen {
			c.Next()
			continue
		}
		dead = append(dead, append([]byte{}, key...))
		c.Next()
	}
	if err := kv.CursorErr(c); err != nil {
		return nil, err
	}
	return nil, deleteRefs(tx, prefix, dead)
}

// deleteGrantsOf deletes the refs of a deleted member and the tokens and
// refresh tokens they name, then its pairs, a batch a transaction
// (members.OnDeleteData): for a member that is gone every generation has
// ended.
func deleteGrantsOf(ctx context.Context, st *storage.Store, memberID string) error {
	gone := &members.Member{ID: memberID, AccessGen: math.MaxUint64}
	var from []byte
	for {
		var next []byte
		err := st.Update(ctx, func(tx *storage.Tx) error {
			var err error
			next, err = sweepRefs(tx, gone, from)
			return err
		})
		if err != nil {
			return err
		}
		if next == nil {
			break
		}
		from = next
	}
	// One pair per app the member granted a code: more than the member's
	// deletion can hold.
	return st.DeletePrefixInBatches(ctx, pairKey(memberID, ""))
}

// deleteRefs deletes the refs (keys under prefix) and what they name.
func deleteRefs(tx *storage.Tx, prefix []byte, refs [][]byte) error {
	for _, k := range refs {
		digest := string(k[strings.LastIndexByte(string(k), '/')+1:])
		for _, d := range [][]byte{k, tokenKey(digest), refreshKey(digest)} {
			if err := tx.Delete(d); err != nil {
				return err
			}
		}
	}
	return nil
}

// sweepFamilies is sweepRefs for m's refresh families: a dead one goes
// with its current refresh token.
func sweepFamilies(tx *storage.Tx, m *members.Member, from []byte) ([]byte, error) {
	prefix := storage.Key("u", m.ID, "oauth", "fam", "")
	c := tx.Cursor(kv.Range{Prefix: prefix, Start: from})
	defer c.Close()
	pairs := map[string]uint64{}
	n := 0
	for reads := 0; c.Valid(); reads++ {
		if n == sweepBatch || reads == sweepReads {
			return append([]byte{}, c.Key()...), nil
		}
		key := append([]byte{}, c.Key()...)
		client, _, ok := strings.Cut(string(key[len(prefix):]), "/")
		v, err := c.Value()
		if err != nil {
			return nil, err
		}
		var fam family
		if !ok || json.Unmarshal(v, &fam) != nil {
			c.Next()
			continue
		}
		pg, seen := pairs[client]
		if !seen {
			p, err := readPair(tx, m.ID, client)
			if err != nil {
				return nil, err
			}
			pg = p.Gen
			pairs[client] = pg
		}
		c.Next()
		if fam.liveIn(m, pairState{Gen: pg}) {
			continue
		}
		if err := tx.Delete(key); err != nil {
			return nil, err
		}
		if err := tx.Delete(refreshKey(fam.Current)); err != nil {
			return nil, err
		}
		n++
	}
	return nil, kv.CursorErr(c)
}

// legacyRefsPrefix is where memberID's refs were kept before generations.
func legacyRefsPrefix(memberID string) []byte { return storage.Key("u", memberID, "oauth", "tok", "") }

// migrateLegacyRefs moves the refs kept before generations
// (u/<member>/oauth/tok/<client_id>/<digest>) to generation zero of the
// index, in batches, with their tokens' lifetimes, and queues the members
// it moved for the sweep (a revocation may have come first on a node of
// before). It runs at every opening and after a restore: a seek per member
// finds whom it concerns, and writes nothing when nobody.
func migrateLegacyRefs(ctx context.Context, st *storage.Store) error {
	var ids []string
	idPrefix := storage.Key("member", "id", "")
	err := st.View(ctx, func(tx *storage.Tx) error {
		ids = ids[:0]
		return tx.Scan(idPrefix, nil, false, true, func(k, _ []byte) (bool, error) {
			id := string(k[len(idPrefix):])
			c := tx.Cursor(kv.Range{Prefix: legacyRefsPrefix(id), KeysOnly: true})
			if c.Valid() {
				ids = append(ids, id)
			}
			c.Close()
			return true, kv.CursorErr(c)
		})
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		for more := true; more; {
			err := st.Update(ctx, func(tx *storage.Tx) error {
				var err error
				more, err = moveLegacyRefs(tx, id)
				return err
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// moveLegacyRefs moves up to sweepBatch of memberID's legacy refs and
// reports whether more may remain.
func moveLegacyRefs(tx *storage.Tx, memberID string) (bool, error) {
	prefix := legacyRefsPrefix(memberID)
	type legacy struct {
		key []byte
		ref memberTokenRef
	}
	var refs []legacy
	err := tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
		var ref memberTokenRef
		if err := json.Unmarshal(v, &ref); err != nil {
			return false, err
		}
		refs = append(refs, legacy{append([]byte{}, k...), ref})
		return len(refs) < sweepBatch, nil
	})
	if err != nil || len(refs) == 0 {
		return false, err
	}
	for _, l := range refs {
		client, digest, ok := strings.Cut(string(l.key[len(prefix):]), "/")
		if err := tx.Delete(l.key); err != nil || !ok {
			return false, err
		}
		// The ref lives as long as what it names: an access token, or
		// the current refresh token of a family.
		var expires time.Time
		var t AccessToken
		if err := tx.GetJSON(tokenKey(digest), &t); err == nil {
			expires = t.ExpiresAt
		} else if !errors.Is(err, storage.ErrNotFound) {
			return false, err
		} else {
			var r RefreshToken
			if err := tx.GetJSON(refreshKey(digest), &r); errors.Is(err, storage.ErrNotFound) {
				continue // gone: the ref goes too
			} else if err != nil {
				return false, err
			}
			expires = r.ExpiresAt
		}
		var ttl time.Duration
		if !expires.IsZero() {
			if ttl = time.Until(expires); ttl <= 0 {
				continue
			}
		}
		if err := putRef(tx, memberID, client, grantGen{}, digest, l.ref, ttl); err != nil {
			return false, err
		}
	}
	return len(refs) == sweepBatch, queueSweep(tx, memberID)
}
