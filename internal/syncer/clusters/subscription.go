package clusters

import (
	"sort"
	"sync"
)

// Subscribe returns a subscription to registry events. Every member
// registered at the time is replayed first as MemberAdded. Events are
// queued without bound, so a slow subscriber never blocks leafsync; Close
// the subscription when done.
func (r *Registry) Subscribe() *Subscription {
	s := &Subscription{r: r, signal: make(chan struct{}, 1), done: make(chan struct{}), out: make(chan Event)}
	r.mu.Lock()
	names := make([]string, 0, len(r.entries))
	for n := range r.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e := r.entries[n]
		s.queue = append(s.queue, Event{Type: MemberAdded, Cluster: n, Member: e.member()})
	}
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	go s.pump()
	s.notify()
	return s
}

// publishLocked queues ev for every subscriber; r.mu must be held, which
// keeps events in order.
func (r *Registry) publishLocked(ev Event) {
	for s := range r.subs {
		s.push(ev)
	}
}

// Subscription delivers registry events in order on Events().
type Subscription struct {
	r      *Registry
	mu     sync.Mutex
	queue  []Event
	signal chan struct{}
	done   chan struct{}
	once   sync.Once
	out    chan Event
}

// Events returns the channel of events; it is closed after Close.
func (s *Subscription) Events() <-chan Event { return s.out }

// Close ends the subscription.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.r.mu.Lock()
		delete(s.r.subs, s)
		s.r.mu.Unlock()
		close(s.done)
	})
}

func (s *Subscription) push(ev Event) {
	s.mu.Lock()
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	s.notify()
}

func (s *Subscription) notify() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

func (s *Subscription) pump() {
	defer close(s.out)
	for {
		s.mu.Lock()
		q := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, ev := range q {
			select {
			case s.out <- ev:
			case <-s.done:
				return
			}
		}
		select {
		case <-s.signal:
		case <-s.done:
			return
		}
	}
}
