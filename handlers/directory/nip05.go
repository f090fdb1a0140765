package directory

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/agents"
)

// verdict is the outcome of one NIP-05 check.
type verdict int

const (
	// verdictMatch: the domain maps the name to the agent's pubkey.
	verdictMatch verdict = iota
	// verdictMismatch: the domain answered and does not map the name to
	// the pubkey (another key, no such name, 404/410). Clears at once.
	verdictMismatch
	// verdictFailure: no usable answer (network error, timeout, 5xx,
	// redirect, oversized or malformed body). Keeps the previous verdict
	// for the grace period.
	verdictFailure
)

// checkNIP05 fetches https://<domain>/.well-known/nostr.json?name=<local>
// (on Options.NIP05Port) without following redirects and compares names[local] with pubkey (NIP-05:
// lowercase hex).
func (d *Directory) checkNIP05(ctx context.Context, pubkey, identifier string) verdict {
	local, domain, _ := strings.Cut(identifier, "@")
	if d.opts.NIP05Domain != "" && domain == d.opts.NIP05Domain {
		c, err := d.agents.NIP05Claim(ctx, identifier)
		if err == nil && c.Pubkey == pubkey && d.claimVouched(c) {
			return verdictMatch
		}
		return verdictMismatch
	}
	if !validDomain(domain) {
		// Stored before identifiers were checked for a port: never
		// fetched, so nobody picks the port the server connects to.
		return verdictMismatch
	}
	host := domain
	if d.opts.NIP05Port != DefaultNIP05Port {
		host = net.JoinHostPort(domain, strconv.Itoa(d.opts.NIP05Port))
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.NIP05Timeout)
	defer cancel()
	u := "https://" + host + "/.well-known/nostr.json?name=" + url.QueryEscape(local)
	resp, err := d.fetcher.GetWithHeader(ctx, u, http.Header{"Accept": {"application/json"}})
	if err != nil {
		d.opts.Logger.Debug("NIP-05 check failed", zap.String("identifier", identifier), zap.Error(err))
		return verdictFailure
	}
	switch {
	case resp.Status == http.StatusNotFound || resp.Status == http.StatusGone:
		return verdictMismatch
	case resp.Status != http.StatusOK:
		return verdictFailure
	}
	var doc struct {
		Names map[string]string `json:"names"`
	}
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		return verdictFailure
	}
	if doc.Names[local] == pubkey {
		return verdictMatch
	}
	return verdictMismatch
}

// applyVerdict updates a's NIP-05 state: a match verifies, a mismatch
// clears at once, a failure keeps a verified identifier only while its last
// match is within the grace period.
func (d *Directory) applyVerdict(a *agents.Agent, v verdict, now time.Time) {
	a.NIP05CheckedAt = now.Unix()
	switch v {
	case verdictMatch:
		a.NIP05Verified, a.NIP05OKAt = true, now.Unix()
	case verdictMismatch:
		a.NIP05Verified = false
	case verdictFailure:
		if a.NIP05Verified && now.Sub(time.Unix(a.NIP05OKAt, 0)) > d.opts.NIP05Grace {
			a.NIP05Verified = false
		}
	}
}

// CheckNIP05Now re-checks every identifier that is due (last check at least
// NIP05Recheck ago) and returns how many were checked. The background
// schedule calls it; it is exported for tools and tests.
func (d *Directory) CheckNIP05Now(ctx context.Context) (int, error) {
	now := d.now()
	type due struct{ pk, id string }
	var todo []due
	err := d.agents.Each(ctx, func(a *agents.Agent, _ *agents.Activity, banned bool) error {
		if !banned && a.NIP05 != "" && now.Sub(time.Unix(a.NIP05CheckedAt, 0)) >= d.opts.NIP05Recheck {
			todo = append(todo, due{a.Pubkey, a.NIP05})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	sem := make(chan struct{}, 4)
	done := make(chan struct{}, len(todo))
	for _, t := range todo {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; done <- struct{}{} }()
			v := d.checkNIP05(ctx, t.pk, t.id)
			at := d.now()
			err := d.agents.UpdateNIP05(ctx, t.pk, t.id, func(a *agents.Agent) { d.applyVerdict(a, v, at) })
			if err != nil && !errors.Is(err, storage.ErrConflict) && !errors.Is(err, storage.ErrNotFound) {
				d.opts.Logger.Warn("record NIP-05 check", zap.Error(err))
			}
		}()
	}
	for range todo {
		<-done
	}
	if len(todo) > 0 {
		pks := make([]string, len(todo))
		for i, t := range todo {
			pks[i] = t.pk
		}
		d.changedAgents(pks...)
	}
	return len(todo), nil
}

// nip05Loop re-checks due identifiers on the schedule while ctx (the
// directory's lease) lasts.
func (d *Directory) nip05Loop(ctx context.Context) {
	t := time.NewTicker(d.opts.NIP05CheckEvery)
	defer t.Stop()
	// Check once at start: identifiers that fell due while no node led
	// are not left standing until the first tick.
	for {
		if _, err := d.CheckNIP05Now(ctx); err != nil && ctx.Err() == nil {
			d.logStoreFailure("NIP-05 rechecks", err)
		}
		d.nip05Passes.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// serveWellKnown answers NIP-05 lookups for the agents whose claim on
// name@<nip05_domain> (this domain, not a former one or another site's) the
// site vouches for (approved, a maintainer's, or claims are open):
// {"names": {"<name>": "<hex>"}} for ?name=<name>, an empty names object
// for unknown names (NIP-05 clients treat both alike).
func (d *Directory) serveWellKnown(w http.ResponseWriter, r *http.Request) {
	if !allowPublic(w, r, "GET, HEAD, OPTIONS") {
		return
	}
	names := map[string]string{}
	name := strings.ToLower(r.URL.Query().Get("name"))
	if nip05LocalRE.MatchString(name) {
		if c, err := d.agents.NIP05Claim(r.Context(), name+"@"+d.opts.NIP05Domain); err == nil && d.claimVouched(c) {
			names[name] = c.Pubkey
		}
	}
	b, _ := json.Marshal(map[string]any{"names": names})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(b)
	}
}
