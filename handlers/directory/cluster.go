package directory

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/agents"
)

// Several nodes, one directory (docs/several-nodes.md). Every
// node serving a directory configuration on one store (several Caddy
// processes on one PostgreSQL database; with Badger, the handlers of one
// process, e.g. the old and the new config during a reload) takes part in
// the lease "directory:<id>" (storage.Store.Lead). The holder builds the
// document, stores it (agents.Store.PublishDocument) and so notifies
// the others, which load it: every node serves the same bytes, ETag and
// generated_at. Only the holder follows the relays and re-checks NIP-05
// identifiers; when it loses the lease (or stops) that work stops and the
// next holder reads the relays again from each registration and resumes
// from the stored check times.
// Changed and AuthorsChanged are published on changesChannel, so a change
// made through any node reaches the holder.

// changesChannel carries Changed ("changed <origin>") and AuthorsChanged
// ("authors <origin>") of every directory on the store; StoreChanged sends
// "authors" with no origin.
const changesChannel = "hearth_directory_changes"

// configID names a configuration's document and background work: the
// options that shape the document or the work only the leader does. Nodes
// of one site (one Caddyfile) get one id; two sites on one store with
// different documents get two, each with its own leader.
func configID(o Options, maintainers map[string]bool) string {
	relays := make([]string, 0, len(o.Relays))
	for _, r := range o.Relays {
		relays = append(relays, nostr.NormalizeURL(r))
	}
	slices.Sort(relays)
	mt := make([]string, 0, len(maintainers))
	for pk := range maintainers {
		mt = append(mt, pk)
	}
	slices.Sort(mt)
	b, _ := json.Marshal([]any{
		o.PowMinBits, mt, relays, o.NIP05Domain, o.NIP05Recheck, o.NIP05Grace, o.NIP05CheckEvery,
		o.NIP05Timeout, o.AllowPrivate, o.BurstMaxPosts, o.BurstWindow, o.TemplateMinPosts,
		o.TemplateRatio, o.TemplateSample, o.RegenerateEvery, o.BaseURL, o.NIP05OpenClaims, o.NIP05Port,
	})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// subscribe listens for published documents and changes from every node.
func (d *Directory) subscribe() ([]func(), error) {
	stopDocs, err := d.store.Subscribe(agents.DirectoryChannel, func(p string) {
		if p == storage.NotificationsMissed || strings.HasPrefix(p, d.id+" ") {
			kick(d.docKick)
		}
	})
	if err != nil {
		return nil, err
	}
	stopChanges, err := d.store.Subscribe(changesChannel, func(p string) {
		kind, origin, _ := strings.Cut(p, " ")
		if origin == d.origin {
			return // acted on when it was signalled (Changed)
		}
		// Which agents changed is not said: the rebuild reads them all.
		d.records.touchAll()
		switch kind {
		case "changed":
			d.changedHere()
		case "authors", storage.NotificationsMissed:
			d.changedHere()
			d.authorsChangedHere()
		}
	})
	if err != nil {
		stopDocs()
		return nil, err
	}
	return []func(){stopDocs, stopChanges}, nil
}

// StoreChanged tells every directory on store, on every node, that agent
// records changed outside them (a restore): the leaders rebuild and restart
// their relay subscriptions, and the other nodes load what they publish.
func StoreChanged(ctx context.Context, store *storage.Store) error {
	return store.Publish(ctx, changesChannel, "authors")
}

// localDocs holds, on an engine only one process opens (Badger), the
// document each directory's leader published, by store and directory id:
// the handlers of that process (an old and a new config during a reload,
// two sites of one configuration) share it in memory, not through the store,
// which would cost a compression and megabytes of writes per change for no
// other reader (bench/README.md, BenchmarkPublishDocument100k).
var localDocs sync.Map // localKey -> *localDoc

type localKey struct {
	store *storage.Store
	id    string
}

type localDoc struct {
	version string
	doc     *document
}

// inProcess reports whether the store's engine is this process's alone.
func (d *Directory) inProcess() bool { return d.store.Engine() == "badger" }

func (d *Directory) localKey() localKey { return localKey{d.store, d.id} }

// publishedVersion is the version of the document published last.
func (d *Directory) publishedVersion(ctx context.Context) (string, error) {
	if d.inProcess() {
		if cur, ok := localDocs.Load(d.localKey()); ok {
			return cur.(*localDoc).version, nil
		}
		return "", nil
	}
	return d.agents.PublishedVersion(ctx, d.id)
}

func newVersion() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// firstBuild builds the document at Start, from the store as it is, and
// notes the version published so far: the follower takes any later one.
// (A document built here and one the leader built at another instant
// differ only if the agents changed in between; then the leader publishes
// again, at the latest after RegenerateEvery.)
func (d *Directory) firstBuild(ctx context.Context) error {
	d.buildMu.Lock()
	defer d.buildMu.Unlock()
	v, err := d.publishedVersion(ctx)
	if err != nil {
		return err
	}
	d.published = v
	return d.rebuildLocked(ctx)
}

// publishChanges publishes Changed and AuthorsChanged to every node (this
// Directory acted on them already if it leads).
func (d *Directory) publishChanges(ctx context.Context) {
	defer d.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.pubKick:
		}
		kind := "changed"
		if d.pendingAuthors.Swap(false) {
			kind = "authors"
		}
		if err := d.store.Publish(ctx, changesChannel, kind+" "+d.origin); err != nil {
			d.opts.Logger.Debug("publish a directory change", zap.Error(err))
		}
	}
}

// follow loads the document the leader published, when notified and every
// RegenerateEvery (in case a notification was missed), while this node
// does not lead.
func (d *Directory) follow(ctx context.Context) {
	defer d.wg.Done()
	t := time.NewTicker(d.opts.RegenerateEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.docKick:
		case <-t.C:
		}
		if d.leading.Load() {
			continue
		}
		if err := d.loadPublished(ctx); err != nil && ctx.Err() == nil {
			d.logStoreFailure("load the published agent directory", err)
		}
	}
}

// loadPublished serves the published document if it is not the one served.
func (d *Directory) loadPublished(ctx context.Context) error {
	v, err := d.publishedVersion(ctx)
	if err != nil || v == "" {
		return err
	}
	d.buildMu.Lock()
	same := v == d.published
	d.buildMu.Unlock()
	if same {
		return nil
	}
	if d.inProcess() {
		cur, ok := localDocs.Load(d.localKey())
		if !ok {
			return nil
		}
		d.buildMu.Lock()
		defer d.buildMu.Unlock()
		if !d.leading.Load() {
			d.doc.Store(cur.(*localDoc).doc)
			d.published = cur.(*localDoc).version
		}
		return nil
	}
	pub, err := d.agents.PublishedDocument(ctx, d.id)
	if err != nil {
		return err
	}
	doc := wholeDocument(pub.Body)
	doc.etag, doc.generatedAt, doc.count = pub.ETag, time.Unix(pub.GeneratedAt, 0), pub.Count
	if sum, err := hex.DecodeString(pub.AgentsSum); err == nil && len(sum) == len(doc.agentsSum) {
		copy(doc.agentsSum[:], sum)
	}
	d.buildMu.Lock()
	defer d.buildMu.Unlock()
	if d.leading.Load() {
		return nil // took the lease meanwhile: it builds its own
	}
	d.doc.Store(doc)
	d.published = pub.Version
	return nil
}

// lead is the work of the lease's holder, until ctx ends (lease lost, or
// Close): a rebuild at once (changes made while no node led, a document
// left behind by a former leader), then the schedule, NIP-05 rechecks and
// the relays.
func (d *Directory) lead(ctx context.Context) {
	d.buildMu.Lock()
	d.leading.Store(true)
	d.buildMu.Unlock()
	defer d.leading.Store(false)
	d.leads.Add(1)
	d.opts.Logger.Debug("this node leads the agent directory", zap.String("directory", d.id))
	// The rebuild below covers what was signalled before, reading every
	// agent: another node led meanwhile.
	d.records.touchAll()
	select {
	case <-d.dirty:
	default:
	}
	select {
	case <-d.authorsCh:
	default:
	}
	if err := d.Rebuild(ctx); err != nil {
		d.logStoreFailure("rebuild agent directory", err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		d.regenerateLoop(ctx)
	}()
	go func() {
		defer wg.Done()
		d.nip05Loop(ctx)
	}()
	if len(d.opts.Relays) > 0 {
		d.startRelays(ctx, &wg)
	}
	wg.Wait()
	d.opts.Logger.Debug("this node no longer leads the agent directory", zap.String("directory", d.id))
}

// publishLocked stores doc for the other nodes when this node leads and the
// store does not hold it yet: a new document, a version published by
// someone else meanwhile (a former leader, a restore), or the record's TTL
// to renew. Called with buildMu held.
func (d *Directory) publishLocked(ctx context.Context, doc *document, changed bool, now time.Time) error {
	if !d.leading.Load() {
		return nil
	}
	if d.inProcess() {
		if cur, ok := localDocs.Load(d.localKey()); !changed && ok && cur.(*localDoc).version == d.published {
			return nil
		}
		v := newVersion()
		localDocs.Store(d.localKey(), &localDoc{version: v, doc: doc})
		d.published, d.publishedAt, d.publishedHere = v, now, v
		// Wake the other handlers of this process (only a notification).
		if err := d.store.Publish(ctx, agents.DirectoryChannel, d.id+" "+v); err != nil {
			d.opts.Logger.Debug("notify the published agent directory", zap.Error(err))
		}
		return nil
	}
	if !changed && now.Sub(d.publishedAt) < stampEvery {
		v, err := d.agents.PublishedVersion(ctx, d.id)
		if err != nil {
			return err
		}
		if v == d.published && v != "" {
			return nil
		}
	}
	v, err := d.agents.PublishDocument(ctx, d.id, &agents.PublishedDirectory{
		ETag:        doc.etag,
		GeneratedAt: doc.generatedAt.Unix(),
		AgentsSum:   hex.EncodeToString(doc.agentsSum[:]),
		Count:       doc.count,
		Body:        doc.bytes(),
	})
	if err != nil {
		return err
	}
	d.published, d.publishedAt = v, now
	return nil
}

// forgetLocal drops this Directory's in-memory publication, if it is still
// the last one, when it closes (another handler of the process that serves
// it keeps its own reference; the next leader publishes anew).
func (d *Directory) forgetLocal() {
	if !d.inProcess() {
		return
	}
	d.buildMu.Lock()
	defer d.buildMu.Unlock()
	if cur, ok := localDocs.Load(d.localKey()); ok && cur.(*localDoc).version == d.publishedHere {
		localDocs.CompareAndDelete(d.localKey(), cur)
	}
}
