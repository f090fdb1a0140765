package directory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
)

// maxRelayMessage bounds one message read from a relay (an EVENT carries
// one note; 4 MiB is far above any note a relay accepts).
const maxRelayMessage = 4 << 20

// relayConn is Hearth's NIP-01 client for reading from one relay: REQ,
// EVENT, EOSE, CLOSED, NOTICE and CLOSE over one websocket, with go-nostr's
// event and envelope types. It replaces go-nostr's Relay, whose Close races
// with its own reader (v0.52.3, seen with -race), and it dials through
// safefetch, so that the address of every relay connection is checked when
// it is connected to, like any other outbound fetch.
//
// One goroutine reads; the caller receives messages on in and learns that
// the connection ended when done is closed (err then says why). Writes
// come from the caller's goroutine only.
type relayConn struct {
	ws      *websocket.Conn
	in      chan relayMsg
	done    chan struct{}
	err     error // why the reader stopped; read after done is closed
	closing chan struct{}
	cancel  context.CancelFunc
}

// relayMsg is one message from the relay that the directory acts on.
type relayMsg struct {
	kind   string // "EVENT", "EOSE" or "CLOSED"
	sub    string
	event  *nostr.Event
	reason string // CLOSED
}

// dialRelay opens a websocket to url through fetcher's dialer (and TLS
// configuration) and starts reading. onNotice receives NOTICE messages.
func dialRelay(ctx context.Context, url string, fetcher *safefetch.Fetcher, onNotice func(string)) (*relayConn, error) {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         fetcher.DialContext,
		TLSClientConfig:     fetcher.Options().TLSConfig,
		TLSHandshakeTimeout: 30 * time.Second,
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(dctx, url, &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: tr},
		HTTPHeader: http.Header{"User-Agent": {safefetch.DefaultUserAgent}},
	})
	if err != nil {
		var be *safefetch.BlockedAddressError
		if errors.As(err, &be) {
			return nil, be
		}
		return nil, err
	}
	ws.SetReadLimit(maxRelayMessage)
	rctx, rcancel := context.WithCancel(ctx)
	rc := &relayConn{ws: ws, in: make(chan relayMsg, 64), done: make(chan struct{}), closing: make(chan struct{}), cancel: rcancel}
	go rc.read(rctx, onNotice)
	return rc, nil
}

func (rc *relayConn) read(ctx context.Context, onNotice func(string)) {
	defer close(rc.done)
	parser := nostr.NewMessageParser()
	for {
		_, data, err := rc.ws.Read(ctx)
		if err != nil {
			rc.err = err
			return
		}
		var msg relayMsg
		parsed, _ := parser.ParseMessage(string(data)) // a malformed message is nil: skipped below
		switch env := parsed.(type) {
		case *nostr.EventEnvelope:
			if env.SubscriptionID == nil {
				continue
			}
			evt := env.Event
			msg = relayMsg{kind: "EVENT", sub: *env.SubscriptionID, event: &evt}
		case *nostr.EOSEEnvelope:
			msg = relayMsg{kind: "EOSE", sub: string(*env)}
		case *nostr.ClosedEnvelope:
			msg = relayMsg{kind: "CLOSED", sub: env.SubscriptionID, reason: env.Reason}
		case *nostr.NoticeEnvelope:
			if onNotice != nil {
				onNotice(string(*env))
			}
			continue
		default: // OK, AUTH, COUNT and unparsable messages: nothing to do
			continue
		}
		select {
		case rc.in <- msg:
		case <-rc.closing: // nobody listens any more; read on to the close frame
		case <-ctx.Done():
			rc.err = ctx.Err()
			return
		}
	}
}

// req opens (or replaces) subscription id with filters.
func (rc *relayConn) req(ctx context.Context, id string, filters nostr.Filters) error {
	b, err := json.Marshal(nostr.ReqEnvelope{SubscriptionID: id, Filters: filters})
	if err != nil {
		return err
	}
	return rc.write(ctx, b)
}

// unsub closes subscription id.
func (rc *relayConn) unsub(ctx context.Context, id string) error {
	b, _ := json.Marshal(nostr.CloseEnvelope(id))
	return rc.write(ctx, b)
}

func (rc *relayConn) write(ctx context.Context, b []byte) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := rc.ws.Write(wctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("write to relay: %w", err)
	}
	return nil
}

// close ends the connection (a close frame, answered or not within
// coder/websocket's 5 s, then the socket) and waits for the reader.
func (rc *relayConn) close() {
	close(rc.closing)
	rc.ws.Close(websocket.StatusNormalClosure, "")
	rc.cancel()
	rc.ws.CloseNow()
	<-rc.done
}

// lost is the error of a connection that ended on its own.
func (rc *relayConn) lost() error {
	return fmt.Errorf("connection lost: %v", rc.err)
}
