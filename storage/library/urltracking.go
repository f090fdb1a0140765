package library

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Tracking parameters say where a link was shared, not which page it is:
// the same article saved from a newsletter (utm_source=…) and from the
// site is one item. They are dropped from saved URLs (NormalizeURL) and
// from the URL key (urlKey), and stores written before have their keys
// moved (migrateURLKeys). Other parameters are kept as they are, in their
// order: they may well choose the page.
var trackingParams = map[string]bool{
	"fbclid": true, "gclid": true, "dclid": true, "gbraid": true, "wbraid": true, "msclkid": true,
	"yclid": true, "twclid": true, "igshid": true, "mc_cid": true, "mc_eid": true, "_hsenc": true,
	"_hsmi": true, "mkt_tok": true, "oly_anon_id": true, "oly_enc_id": true, "vero_id": true,
}

func isTrackingParam(name string) bool {
	name = strings.ToLower(name)
	return strings.HasPrefix(name, "utm_") || trackingParams[name]
}

// withoutTracking is rawQuery without its tracking parameters.
func withoutTracking(rawQuery string) string {
	if rawQuery == "" {
		return ""
	}
	parts := strings.Split(rawQuery, "&")
	kept := parts[:0]
	for _, p := range parts {
		name, _, _ := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if !isTrackingParam(name) {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "&")
}

// urlKeyForm is the form of a saved URL its key is made from: u without
// tracking parameters (u as it is if it does not parse).
func urlKeyForm(u string) string {
	if !strings.Contains(u, "?") {
		return u // no query: nothing to drop, and no parse (an import's every item)
	}
	p, err := url.Parse(u)
	if err != nil || p.RawQuery == "" {
		return u
	}
	q := withoutTracking(p.RawQuery)
	if q == p.RawQuery {
		return u
	}
	p.RawQuery, p.ForceQuery = q, false
	return p.String()
}

// legacyURLKey is the key stores wrote before tracking parameters were
// dropped: the digest of the URL as saved.
func legacyURLKey(memberID, u string) []byte {
	sum := sha256.Sum256([]byte(u))
	// One allocation: the key's parts, then the digest in hex.
	k := storage.AppendKey(make([]byte, 0, len(memberID)+11+hex.EncodedLen(len(sum))), "u", memberID, "gql", "url", "")
	return hex.AppendEncode(k, sum[:])
}

func init() {
	storage.OnMigrate(func(ctx context.Context, st *storage.Store) error {
		moved, err := migrateURLKeys(ctx, st)
		if err != nil {
			return fmt.Errorf("migrate saved items' URL keys: %w", err)
		}
		if moved > 0 {
			st.Logger().Info("saved items' URL keys no longer count tracking parameters (utm_…, fbclid…)", zap.Int("moved", moved))
		}
		return nil
	})
}

// migrateURLKeys moves the key of every saved item whose URL has tracking
// parameters to the key without them. Where another item already holds
// that key (the same article saved twice before), that item keeps it:
// saving the article again refreshes it. It writes no mark of its own (a
// restore leaves a store with exactly the backup's records): each open
// reads the items again, parsing only those whose record has a "?" (a
// URL with a query), and finds nothing left to move.
func migrateURLKeys(ctx context.Context, st *storage.Store) (moved int, err error) {
	ms, err := members.Of(st).Members(ctx)
	if err != nil {
		return 0, err
	}
	for _, m := range ms {
		type tracked struct{ id, url string }
		var found []tracked
		err := st.View(ctx, func(tx *storage.Tx) error {
			return tx.Scan(storage.Key("u", m.ID, "gql", "item", ""), nil, false, false, func(_, v []byte) (bool, error) {
				if bytes.IndexByte(v, '?') < 0 {
					return true, nil // no query in its URL
				}
				var it SavedItem
				if err := parseItemRecord(v, &it); err != nil {
					return false, err
				}
				if it.OriginalURL != "" && urlKeyForm(it.OriginalURL) != it.OriginalURL {
					found = append(found, tracked{it.ID, it.OriginalURL})
				}
				return true, nil
			})
		})
		if err != nil {
			return moved, err
		}
		// A few hundred keys a transaction, well under any engine's limit.
		for start := 0; start < len(found); start += 256 {
			part := found[start:min(len(found), start+256)]
			// Counted per attempt: a transaction that conflicts runs again.
			var n int
			err := st.Update(ctx, func(tx *storage.Tx) error {
				n = 0
				for _, t := range part {
					wrote, err := moveURLKey(tx, m.ID, t.id, t.url)
					if err != nil {
						return err
					}
					if wrote {
						n++
					}
				}
				return nil
			})
			if err != nil {
				return moved, err
			}
			moved += n
		}
	}
	return moved, nil
}
