package engage

import (
	"maps"
	"sync"
	"testing"
)

func TestMembers(t *testing.T) {
	var s Members[int]
	if _, ok := s.Get("east"); ok {
		t.Fatal("zero Members has east")
	}
	s.Set("east", 1)
	s.Set("west", 2)
	if v, ok := s.Get("east"); !ok || v != 1 {
		t.Fatalf("Get(east) = %d, %v", v, ok)
	}
	seen := map[string]int{}
	s.Each(func(c string, v int) { seen[c] = v })
	if !maps.Equal(seen, map[string]int{"east": 1, "west": 2}) {
		t.Fatalf("Each saw %v", seen)
	}
	if v, ok := s.Take("east"); !ok || v != 1 {
		t.Fatalf("Take(east) = %d, %v", v, ok)
	}
	if _, ok := s.Take("east"); ok {
		t.Fatal("east taken twice")
	}
	// Writers and readers on other goroutines (go test -race).
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Set("west", i)
			s.Get("west")
			s.Each(func(string, int) {})
		}()
	}
	wg.Wait()
}
