package kv

import "sync"

// Hub delivers notifications to this process's subscribers: each
// subscription has its own goroutine and queue, so a slow subscriber delays
// only itself and every subscriber sees one publisher's payloads in order.
// Engines use it for Subscribe (badgerkv publishes its own commits; pgkv
// publishes what its LISTEN connection receives).
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[*hubSub]struct{}
}

type hubSub struct {
	fn      func(string)
	mu      sync.Mutex
	queue   []string
	wake    chan struct{}
	stopped chan struct{}
	done    chan struct{}
}

// Subscribe adds fn for channel; after stop returns fn is not called again,
// except a call already running (stop does not wait for it, so fn may call
// stop).
func (h *Hub) Subscribe(channel string, fn func(payload string)) (stop func()) {
	s := &hubSub{fn: fn, wake: make(chan struct{}, 1), stopped: make(chan struct{}), done: make(chan struct{})}
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[string]map[*hubSub]struct{}{}
	}
	if h.subs[channel] == nil {
		h.subs[channel] = map[*hubSub]struct{}{}
	}
	h.subs[channel][s] = struct{}{}
	h.mu.Unlock()
	go s.run()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs[channel], s)
			if len(h.subs[channel]) == 0 {
				delete(h.subs, channel)
			}
			h.mu.Unlock()
			close(s.stopped)
		})
	}
}

// Publish queues payload for every subscriber of channel.
func (h *Hub) Publish(channel, payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[channel] {
		s.mu.Lock()
		s.queue = append(s.queue, payload)
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Channels lists the channels with subscribers (pgkv LISTENs to them).
func (h *Hub) Channels() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.subs))
	for c := range h.subs {
		out = append(out, c)
	}
	return out
}

func (s *hubSub) run() {
	defer close(s.done)
	for {
		select {
		case <-s.stopped:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			if len(s.queue) == 0 {
				s.mu.Unlock()
				break
			}
			p := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			select {
			case <-s.stopped:
				return
			default:
			}
			s.fn(p)
		}
	}
}
