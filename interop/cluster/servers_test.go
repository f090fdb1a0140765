//go:build cluster

package cluster

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fiatjaf/khatru"
	"github.com/jackc/pgx/v5"
	"github.com/nbd-wtf/go-nostr"

	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/internal/testrelay"
)

// What runs in the test process beside the two nodes (as the directory's
// package tests do, handlers/directory/cluster_test.go): a khatru relay the
// nodes' directories read, and a NIP-05 server for the identifiers agents
// claim. Both count what the nodes ask of them.

const (
	relayAddr = "127.0.0.1:18583"
	nip05Addr = "127.0.0.1:18584"
	// nip05Host is the NIP-05 server's domain in identifiers: the port is
	// the nodes' nip05_port, never part of an identifier.
	nip05Host = "127.0.0.1"
	// Node C, a third Caddy process on a database of its own (the restore
	// of scenario 12).
	nodeCPort  = "18585"
	nodeCAdmin = "127.0.0.1:18586"
)

// testRelay is a khatru relay (fiatjaf/khatru v0.19.1) that stores events
// in memory and records the directories' connections (by the User-Agent
// every Hearth fetch sends, safefetch.DefaultUserAgent) and subscriptions.
type testRelay struct {
	relay *khatru.Relay
	srv   *http.Server

	events testrelay.Events

	mu      sync.Mutex
	open    map[*khatru.WebSocket]string // directory connections open: remote address
	maxOpen int                          // most directory connections open at once
	reqs    []relayReq                   // the directories' REQs, in order
}

// relayReq is one filter of a directory's subscription.
type relayReq struct {
	remote  string // the node's address of the connection
	authors []string
}

func startRelay(t *testing.T) *testRelay {
	t.Helper()
	tr := &testRelay{relay: khatru.NewRelay(), open: map[*khatru.WebSocket]string{}}
	fromDirectory := func(ctx context.Context) *khatru.WebSocket {
		ws := khatru.GetConnection(ctx)
		if ws == nil || ws.Request == nil || ws.Request.Header.Get("User-Agent") != safefetch.DefaultUserAgent {
			return nil // a publishing client (the test)
		}
		return ws
	}
	tr.relay.OnConnect = append(tr.relay.OnConnect, func(ctx context.Context) {
		ws := fromDirectory(ctx)
		if ws == nil {
			return
		}
		tr.mu.Lock()
		tr.open[ws] = ws.Request.RemoteAddr
		tr.maxOpen = max(tr.maxOpen, len(tr.open))
		tr.mu.Unlock()
	})
	// khatru may run the hook twice for one session: deleting is idempotent.
	tr.relay.OnDisconnect = append(tr.relay.OnDisconnect, func(ctx context.Context) {
		if ws := khatru.GetConnection(ctx); ws != nil {
			tr.mu.Lock()
			delete(tr.open, ws)
			tr.mu.Unlock()
		}
	})
	tr.relay.RejectFilter = append(tr.relay.RejectFilter, func(ctx context.Context, f nostr.Filter) (bool, string) {
		if ws := fromDirectory(ctx); ws != nil {
			tr.mu.Lock()
			tr.reqs = append(tr.reqs, relayReq{remote: ws.Request.RemoteAddr, authors: slices.Clone(f.Authors)})
			tr.mu.Unlock()
		}
		return false, ""
	})
	tr.events.Attach(tr.relay)
	ln, err := net.Listen("tcp", relayAddr)
	if err != nil {
		t.Fatalf("relay: %v", err)
	}
	tr.srv = &http.Server{Handler: tr.relay}
	go tr.srv.Serve(ln)
	t.Cleanup(func() { tr.srv.Close() })
	return tr
}

func (tr *testRelay) url() string { return "ws://" + relayAddr }

// openConns is the remote addresses of the directory connections open now.
func (tr *testRelay) openConns() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for _, r := range tr.open {
		out = append(out, r)
	}
	return out
}

// resetMax starts counting the most connections open at once from now.
func (tr *testRelay) resetMax() {
	tr.mu.Lock()
	tr.maxOpen = len(tr.open)
	tr.mu.Unlock()
}

func (tr *testRelay) most() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.maxOpen
}

// subscribedFor returns the remote address of the newest REQ whose authors
// include pk, after the first `after` REQs ("" when there is none).
func (tr *testRelay) subscribedFor(pk string, after int) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for i := len(tr.reqs) - 1; i >= after; i-- {
		if slices.Contains(tr.reqs[i].authors, pk) {
			return tr.reqs[i].remote
		}
	}
	return ""
}

func (tr *testRelay) reqCount() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.reqs)
}

// publish sends evt to the relay as a Nostr client does (go-nostr's relay
// client: EVENT, answered by OK).
func (tr *testRelay) publish(t *testing.T, evt *nostr.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := nostr.RelayConnect(ctx, tr.url())
	if err != nil {
		t.Fatalf("connect to the relay: %v", err)
	}
	defer r.Close()
	if err := r.Publish(ctx, *evt); err != nil {
		t.Fatalf("publish to the relay: %v", err)
	}
}

// nip05Server answers https://127.0.0.1:18584/.well-known/nostr.json (NIP-05)
// with a certificate the nodes trust through SSL_CERT_FILE (Go's
// crypto/x509 reads it for the system roots on Linux), and records when
// each name was fetched.
type nip05Server struct {
	srv      *httptest.Server
	certFile string

	mu      sync.Mutex
	names   map[string]string // name -> hex pubkey
	fetches map[string][]fetch
	// owner names the node a request came from (by its connection).
	owner func(remote string) string
}

// fetch is one request for a name: when, and from which node.
type fetch struct {
	at   time.Time
	node string
}

func startNIP05(t *testing.T, dir string) *nip05Server {
	t.Helper()
	s := &nip05Server{names: map[string]string{}, fetches: map[string][]fetch{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/nostr.json" {
			http.NotFound(w, r)
			return
		}
		name := r.URL.Query().Get("name")
		s.mu.Lock()
		from := "?"
		if s.owner != nil {
			from = s.owner(r.RemoteAddr) // while the connection is open
		}
		s.fetches[name] = append(s.fetches[name], fetch{time.Now(), from})
		names := map[string]string{}
		if pk, ok := s.names[name]; ok {
			names[name] = pk
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"names": names})
	}))
	ln, err := net.Listen("tcp", nip05Addr)
	if err != nil {
		t.Fatalf("NIP-05 server: %v", err)
	}
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	s.certFile = filepath.Join(dir, "nip05-ca.pem")
	f, err := os.Create(s.certFile)
	if err != nil {
		t.Fatal(err)
	}
	pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *nip05Server) set(name, pk string) {
	s.mu.Lock()
	s.names[name] = pk
	s.mu.Unlock()
}

func (s *nip05Server) fetchesOf(name string) []fetch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fetches[name])
}

// ---- agents (handlers/directory: a signed kind-31339 event registers) ----

type agentKey struct{ sk, pk string }

func newAgent(t *testing.T) agentKey {
	t.Helper()
	sk, pk := testrelay.NewKey(t)
	return agentKey{sk, pk}
}

func (a agentKey) sign(t *testing.T, evt *nostr.Event) *nostr.Event {
	t.Helper()
	evt.PubKey = a.pk
	if evt.Tags == nil {
		evt.Tags = nostr.Tags{}
	}
	if err := evt.Sign(a.sk); err != nil {
		t.Fatal(err)
	}
	return evt
}

// register posts a registration (directory.DefaultKind, 31339) to n, as
// an agent does (POST /api/v1/agents/register with the event).
func register(t *testing.T, n *node, a agentKey, name string, extra ...nostr.Tag) {
	t.Helper()
	tags := append(nostr.Tags{{"d", "agent"}, {"name", name}}, extra...)
	evt := a.sign(t, &nostr.Event{Kind: 31339, CreatedAt: nostr.Now(), Tags: tags})
	r := postJSON(t, n.base()+"/api/v1/agents/register", evt, nil)
	if r.status != http.StatusCreated {
		t.Fatalf("register agent %s on %s: %d %s", name, n.name, r.status, r.body)
	}
}

type dirDoc struct {
	GeneratedAt int64 `json:"generated_at"`
	Agents      []struct {
		Pubkey string `json:"pubkey"`
	} `json:"agents"`
}

func (d dirDoc) lists(pk string) bool {
	return slices.ContainsFunc(d.Agents, func(a struct {
		Pubkey string `json:"pubkey"`
	}) bool {
		return a.Pubkey == pk
	})
}

// document is the directory document n serves, with its ETag.
func document(t *testing.T, n *node) (dirDoc, string) {
	t.Helper()
	r := do(t, http.MethodGet, n.base()+"/directory.json", nil, nil)
	var d dirDoc
	if r.status != http.StatusOK || json.Unmarshal(r.body, &d) != nil {
		t.Fatalf("directory document on %s: %d %s", n.name, r.status, r.body)
	}
	return d, r.header.Get("ETag")
}

var postsRE = regexp.MustCompile(`Posts counted</dt><dd>(\d+)</dd>`)

// postsCounted is what n's profile page of pk says under "Posts counted".
func postsCounted(t *testing.T, n *node, pk string) int {
	t.Helper()
	r := do(t, http.MethodGet, n.base()+"/agents/"+pk, nil, nil)
	m := postsRE.FindSubmatch(r.body)
	if r.status != http.StatusOK || m == nil {
		t.Fatalf("profile of %s on %s: %d %s", pk, n.name, r.status, r.body)
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

// ---- which process holds a connection (Linux /proc) ----

// ownerOf returns the node whose process has the TCP socket bound locally
// to addr ("127.0.0.1:port", the remote address a server saw), or nil.
func ownerOf(addr string, nodes ...*node) *node {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	p, _ := strconv.Atoi(port)
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 {
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if !ok {
				continue
			}
			if b, err := hex.DecodeString(hexPort); err == nil && len(b) == 2 && int(b[0])<<8|int(b[1]) == p {
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
		f.Close()
	}
	for _, n := range nodes {
		if n.cmd == nil || n.exited() {
			continue
		}
		fdDir := fmt.Sprintf("/proc/%d/fd", n.cmd.Process.Pid)
		ents, _ := os.ReadDir(fdDir)
		for _, e := range ents {
			if l, err := os.Readlink(filepath.Join(fdDir, e.Name())); err == nil && inodes[l] {
				return n
			}
		}
	}
	return nil
}

// ---- PostgreSQL as its operator sees it ----

// pgAdmin connects to the server's postgres database as the test's
// superuser.
func pgAdmin(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), pg.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// dbName is the dbname of a keyword/value DSN.
func dbName(dsn string) string {
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "dbname="); ok {
			return v
		}
	}
	return ""
}

// listenerPID is the backend of n's LISTEN connection (each node names
// itself hearth-<name> with application_name), 0 when there is none.
func listenerPID(t *testing.T, conn *pgx.Conn, db string, n *node) int32 {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = $1 AND application_name = $2 AND query LIKE 'LISTEN %'`, db, "hearth-"+n.name)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	switch len(pids) {
	case 0:
		return 0
	case 1:
		return pids[0]
	}
	t.Fatalf("node %s has %d LISTEN connections (%v); want one", n.name, len(pids), pids)
	return 0
}

// backendAlive reports whether backend pid still exists.
func backendAlive(t *testing.T, conn *pgx.Conn, pid int32) bool {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// connections is how many connections n has open to db.
func connections(conn *pgx.Conn, db string, n *node) (int, error) {
	var c int
	err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND application_name = $2`,
		db, "hearth-"+n.name).Scan(&c)
	return c, err
}

// waitEvery is waitFor polling every interval (for conditions that cost a
// query or a page).
func waitEvery(t *testing.T, what string, interval time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > eventDeadline {
			t.Fatalf("%s: did not happen within %v", what, eventDeadline)
		}
		time.Sleep(interval)
	}
	return time.Since(start)
}
