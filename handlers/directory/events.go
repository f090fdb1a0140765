package directory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/nbd-wtf/go-nostr"

	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/agents"
)

// MaxEventsBodyBytes bounds one POST to the events endpoint.
const MaxEventsBodyBytes = 4 << 20

// OKResult is the NIP-01 OK answer for one event. It encodes as NIP-01's
// own message, ["OK", <event id>, <true|false>, <message>], so Nostr
// tooling can read it as it reads a relay's answer.
type OKResult struct {
	ID      string
	OK      bool
	Message string
}

// MarshalJSON encodes r as ["OK", id, ok, message].
func (r OKResult) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{"OK", r.ID, r.OK, r.Message})
}

// UnmarshalJSON decodes ["OK", id, ok, message].
func (r *OKResult) UnmarshalJSON(b []byte) error {
	var a []json.RawMessage
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	var label string
	if len(a) != 4 || json.Unmarshal(a[0], &label) != nil || label != "OK" {
		return errors.New(`an OK result is ["OK", id, ok, message]`)
	}
	if err := json.Unmarshal(a[1], &r.ID); err != nil {
		return err
	}
	if err := json.Unmarshal(a[2], &r.OK); err != nil {
		return err
	}
	return json.Unmarshal(a[3], &r.Message)
}

// OK messages of the events endpoint (NIP-01 prefixes).
const (
	msgDuplicate    = "duplicate: already have this event"
	msgNotKind1     = "invalid: only kind-1 notes count as posts; registrations go to " + RegisterPath
	msgUnregistered = "restricted: this pubkey is not a registered agent; register at " + RegisterPath + " first"
	msgBanned       = "blocked: this agent is banned from the directory"
	msgPostLimited  = "rate-limited: too many posts for this pubkey; slow down"
)

// serveEvents takes a JSON array of signed kind-1 events and answers one
// OK result per event, in order. Refusals are per event; only a body that
// cannot be read as an array, or the per-address rate limit, fail the
// whole request.
func (d *Directory) serveEvents(w http.ResponseWriter, r *http.Request) {
	body, ok := d.acceptPost(w, r, d.evLimitIP, metrics.LimitAgentEvents, "requests from this address", MaxEventsBodyBytes)
	if !ok {
		return
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(bytes.TrimSpace(body), &raws); err != nil || raws == nil {
		writeError(w, http.StatusBadRequest, "invalid: the body must be a JSON array of signed Nostr events")
		return
	}
	if len(raws) > d.opts.MaxBatch {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid: at most %d events per request", d.opts.MaxBatch))
		return
	}
	results := make([]OKResult, len(raws))
	evts := make([]*nostr.Event, len(raws))
	for i, raw := range raws {
		evt, err := DecodeEvent(raw)
		if err != nil {
			results[i] = OKResult{ID: rawEventID(raw), Message: "invalid: " + err.Error()}
			continue
		}
		evts[i] = evt
	}
	if err := d.ingestPosts(r.Context(), evts, results, true); err != nil {
		d.logStoreFailure("record agent posts", err)
		writeStoreFailure(w, err, "error: could not record the events; try again")
		return
	}
	writeJSON(w, http.StatusOK, results)
}

// rawEventID returns the id field of an event that failed to decode, when
// it has a plausible one, so the client can match the answer.
func rawEventID(raw json.RawMessage) string {
	var probe struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &probe) == nil && isLowerHex(probe.ID, 64) {
		return probe.ID
	}
	return ""
}

// ingestChunk is how many events of a request are checked before they go
// to the group commit: a large request is checked and written in turns, so
// that its first posts are written while the next are checked (the
// checks on every core, the commit on one and the disk). Only the last
// turn waits for a sync, which covers the turns committed before it: the
// request waits for one sync after its last commit, not for the syncs of
// its first turns too.
const ingestChunk = 64

// ingestPosts checks and records evts (nil entries were refused before and
// are skipped), writing each event's OK result into res. Posts from clients
// (limit true) count against the per-pubkey limit; posts read from relays
// do not. It returns once every post it accepted is durable. The error is
// a storage failure: then the posts of the request may be recorded in part
// (sending them again answers "duplicate" for those).
func (d *Directory) ingestPosts(ctx context.Context, evts []*nostr.Event, res []OKResult, limit bool) error {
	now := d.now()
	type part struct {
		req   *postRequest
		posts []agents.Post
		at    []int // the index in evts of each post
	}
	var parts []part
	verified := make([]error, min(len(evts), ingestChunk))
	skels := make([]uint64, len(verified))
	for base := 0; base < len(evts); base += ingestChunk {
		chunk := evts[base:min(base+ingestChunk, len(evts))]
		// The checks and the skeletons on every core.
		onCores(len(chunk), func(i int) {
			verified[i], skels[i] = nil, 0
			if e := chunk[i]; e != nil && e.Kind == nostr.KindTextNote {
				if verified[i] = VerifyEvent(e); verified[i] == nil {
					skels[i] = skeletonHash(e.Content)
				}
			}
		})
		var p part
		for i, evt := range chunk {
			if evt == nil {
				continue
			}
			r := &res[base+i]
			*r = OKResult{ID: evt.ID}
			if evt.Kind != nostr.KindTextNote {
				r.Message = msgNotKind1
				continue
			}
			if err := verified[i]; err != nil {
				r.Message = err.Error()
				continue
			}
			if int64(evt.CreatedAt) > now.Add(maxFuture).Unix() {
				r.Message = errPostInFuture.Error()
				continue
			}
			// The store's calls here take no context either; the per-pubkey
			// limit fails open, like every limit on posts.
			if limit && !d.evLimitPK.Allow(ctx, evt.PubKey).Allowed {
				r.Message = msgPostLimited
				continue
			}
			p.posts = append(p.posts, agents.Post{
				ID:        evt.ID,
				Pubkey:    evt.PubKey,
				CreatedAt: int64(evt.CreatedAt),
				Skeleton:  skels[i],
			})
			p.at = append(p.at, base+i)
		}
		last := base+ingestChunk >= len(evts)
		if len(p.posts) > 0 {
			p.req = d.submitPosts(ctx, p.posts, now, !last)
			parts = append(parts, p)
		} else if last && len(parts) > 0 {
			// Nothing of the last turn to write: a barrier makes the
			// turns before it durable.
			parts = append(parts, part{req: d.submitPosts(ctx, nil, now, false)})
		}
	}
	var failed error
	for _, p := range parts {
		out, err := p.req.wait()
		if err != nil {
			failed = err
			continue
		}
		for j, e := range out {
			r := &res[p.at[j]]
			switch {
			case e == nil:
				r.OK = true // the group commit told the document already
			case errors.Is(e, agents.ErrDuplicate):
				r.OK, r.Message = true, msgDuplicate
			case errors.Is(e, storage.ErrNotFound):
				r.Message = msgUnregistered
			case errors.Is(e, agents.ErrAgentBanned):
				r.Message = msgBanned
			case storage.IsInvalid(e):
				r.Message = e.Error()
			default:
				r.Message = "error: could not record the post"
			}
		}
	}
	return failed
}

// Ingest records kind-1 posts received by other means (tools, tests) as the
// relay source does: no per-pubkey rate limit. It returns one OK result per
// event, in order.
func (d *Directory) Ingest(ctx context.Context, evts []*nostr.Event) ([]OKResult, error) {
	res := make([]OKResult, len(evts))
	for i, e := range evts {
		if e == nil {
			res[i].Message = "invalid: missing event"
		}
	}
	if err := d.ingestPosts(ctx, evts, res, false); err != nil {
		return nil, err
	}
	return res, nil
}
