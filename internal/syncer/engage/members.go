package engage

import "sync"

// Members is an Engager's state per engaged member, by cluster name. The
// Runner's workers write it (Engage, Disengage); informer handlers read it
// from other goroutines, hence the lock. The zero value is ready to use.
type Members[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// Get returns the member's state.
func (s *Members[T]) Get(cluster string) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[cluster]
	return v, ok
}

// Set stores the member's state.
func (s *Members[T]) Set(cluster string, v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]T{}
	}
	s.m[cluster] = v
}

// Take removes the member's state and returns it.
func (s *Members[T]) Take(cluster string) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[cluster]
	delete(s.m, cluster)
	return v, ok
}

// Each calls fn for every member, under the lock: fn must not call back
// into s.
func (s *Members[T]) Each(fn func(cluster string, v T)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c, v := range s.m {
		fn(c, v)
	}
}
