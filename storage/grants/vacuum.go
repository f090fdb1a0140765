package grants

// Removal of unused apps. Anyone may register an app (POST /api/v1/apps),
// so without an end the store would keep every registration for ever.
// Mastodon deletes the applications that have no owner, no access token
// and no grant, created more than a day ago (ApplicationsVacuum,
// app/lib/vacuum/applications_vacuum.rb in mastodon/mastodon, commit
// 0ca70415d85273e68efc0535d6c407b6891982fe); here an app registered
// through /api/v1/apps waits in a queue, ordered by registration time,
// until its first use (an authorization code granted to it, or an app
// token issued to it) takes it out. The sweep (revocation.go) removes, in
// bounded batches, the apps still queued a day after their registration:
// the queue's head is the cursor, so a pass reads nothing past the first
// app younger than a day, and a pass cut short is resumed by the next.
// Operator clients (clients.go) are never queued, and never removed here.
//
// Apps registered before the queue existed are not in it and stay. The
// same sweep indexes, once, the app tokens issued before the index of app
// tokens existed (apptokens.go), so that those apps too keep only their
// MaxAppTokens newest.
//
// Keys:
//
//	oauth/unused/<registration time, 16 hexadecimal digits of ns>/<client_id>  (no value)
//	oauth/apptokenscan   how far the indexing of earlier app tokens went: the
//	                     last token digest looked at, or appTokenScanDone

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// UnusedAppAge is how long an app registered through /api/v1/apps may go
// unused before the sweep removes it, as Mastodon's ApplicationsVacuum does.
const UnusedAppAge = 24 * time.Hour

// appVacuumBatch bounds the apps one transaction of the sweep removes.
const appVacuumBatch = 256

func unusedAppsPrefix() []byte { return storage.Key("oauth", "unused", "") }

// unusedAppKey is app's entry in the queue of apps not used yet.
func unusedAppKey(app *App) []byte {
	return storage.Key("oauth", "unused", genHex(uint64(app.CreatedAt.UnixNano())), app.ClientID)
}

// noteAppUsed takes clientID out of the queue of unused apps, in the
// transaction of its first use: the sweep's removal reads the entry and
// this deletes it, so the two conflict rather than remove an app in use.
func noteAppUsed(tx *storage.Tx, clientID string) error {
	var app App
	err := tx.GetJSON(appKey(clientID), &app)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil || app.Client != nil {
		return err
	}
	return tx.DeleteIfPresent(unusedAppKey(&app))
}

// vacuum is the sweep's pass over the apps: it removes the unused ones
// older than UnusedAppAge, then indexes earlier app tokens.
func (w *sweeper) vacuum(ctx context.Context) error {
	if err := w.vacuumApps(ctx); err != nil {
		return err
	}
	return w.indexEarlierAppTokens(ctx)
}

// vacuumApps removes, a batch a transaction, the apps registered before
// UnusedAppAge ago and never used.
func (w *sweeper) vacuumApps(ctx context.Context) error {
	before := genHex(uint64(now().Add(-UnusedAppAge).UnixNano()))
	for {
		more := false
		err := w.update(ctx, func(tx *storage.Tx) error {
			var err error
			more, err = vacuumAppBatch(tx, before)
			return err
		})
		if err != nil || !more {
			return err
		}
	}
}

// vacuumAppBatch removes up to appVacuumBatch of the queued apps
// registered before the time before (16 hexadecimal digits of ns) and
// reports whether more may be due.
func vacuumAppBatch(tx *storage.Tx, before string) (bool, error) {
	prefix := unusedAppsPrefix()
	var due [][]byte
	err := tx.Scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
		if rest := k[len(prefix):]; len(rest) < len(before) || string(rest[:len(before)]) >= before {
			return false, nil
		}
		due = append(due, append([]byte{}, k...))
		return len(due) < appVacuumBatch, nil
	})
	if err != nil {
		return false, err
	}
	for _, k := range due {
		if err := tx.Delete(k); err != nil {
			return false, err
		}
		if len(k) <= len(prefix)+len(before)+1 {
			continue
		}
		if err := removeUnusedApp(tx, string(k[len(prefix)+len(before)+1:])); err != nil {
			return false, err
		}
	}
	return len(due) == appVacuumBatch, nil
}

// removeUnusedApp deletes the app clientID, unless it is an operator
// client or holds an app token: its queue entry says it was never used,
// and neither should be there then; the sweep errs towards keeping.
func removeUnusedApp(tx *storage.Tx, clientID string) error {
	var app App
	err := tx.GetJSON(appKey(clientID), &app)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil || app.Client != nil {
		return err
	}
	c := tx.Cursor(kv.Range{Prefix: appTokensPrefix(clientID), KeysOnly: true})
	tokens := c.Valid()
	c.Close()
	if err := kv.CursorErr(c); err != nil || tokens {
		return err
	}
	return tx.Delete(appKey(clientID))
}

// appTokenScanKey keeps how far indexEarlierAppTokens went.
func appTokenScanKey() []byte { return storage.Key("oauth", "apptokenscan") }

// appTokenScanDone is appTokenScanKey's value once every token was looked at.
const appTokenScanDone = "done"

// indexEarlierAppTokens puts the app tokens issued before the index of
// app tokens existed in it, reading sweepReads tokens a transaction, so
// that their apps keep only their MaxAppTokens newest tokens
// (indexAppToken revokes the oldest). It goes through the tokens once,
// from where the last pass stopped; once done, a pass reads one key.
func (w *sweeper) indexEarlierAppTokens(ctx context.Context) error {
	for {
		done := false
		err := w.update(ctx, func(tx *storage.Tx) error {
			var err error
			done, err = indexEarlierAppTokenBatch(tx)
			return err
		})
		if err != nil || done {
			return err
		}
	}
}

// indexEarlierAppTokenBatch indexes the app tokens among up to sweepReads
// tokens after the last one looked at, and reports whether it reached the
// end.
func indexEarlierAppTokenBatch(tx *storage.Tx) (bool, error) {
	from, err := tx.Get(appTokenScanKey())
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return false, err
	}
	if string(from) == appTokenScanDone {
		return true, nil
	}
	prefix := tokenKey("")
	var start []byte
	if len(from) > 0 {
		start = append(tokenKey(string(from)), 0) // just past the last one looked at
	}
	type appToken struct {
		digest string
		tok    AccessToken
	}
	var found []appToken
	reads, last := 0, ""
	err = tx.Scan(prefix, start, false, false, func(k, v []byte) (bool, error) {
		reads++
		last = string(k[len(prefix):])
		var t AccessToken
		if json.Unmarshal(v, &t) == nil && t.MemberID == "" && t.ClientID != "" {
			found = append(found, appToken{last, t})
		}
		return reads < sweepReads, nil
	})
	if err != nil {
		return false, err
	}
	for _, f := range found {
		if err := indexEarlierAppToken(tx, &f.tok, f.digest); err != nil {
			return false, err
		}
	}
	if reads == 0 && len(from) == 0 {
		// No token at all (a new store): nothing to mark, so that a store
		// nobody used holds no record the sweep wrote.
		return true, nil
	}
	if reads < sweepReads {
		return true, tx.Put(appTokenScanKey(), []byte(appTokenScanDone), 0)
	}
	return false, tx.Put(appTokenScanKey(), []byte(last), 0)
}

// indexEarlierAppToken indexes the app token t (digest d) unless it is
// indexed already, or was revoked by the indexing of another one.
func indexEarlierAppToken(tx *storage.Tx, t *AccessToken, d string) error {
	k, err := appTokenKey(t.ClientID, t.ID)
	if err != nil {
		return nil // not an id this store issued: left as it is
	}
	if ok, err := tx.Has(k); err != nil || ok {
		return err
	}
	if ok, err := tx.Has(tokenKey(d)); err != nil || !ok {
		return err
	}
	return indexAppToken(tx, t, d)
}
