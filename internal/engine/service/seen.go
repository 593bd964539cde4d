package service

import "sync"

// maxInvalidSeen bounds invalidSeen: far more wrong objects than a State
// Hub holds at once, a few hundred kilobytes at most.
const maxInvalidSeen = 4096

// seenSet remembers up to max keys, forgetting the oldest first: what the
// engine has already reported (invalidSeen) must not grow with every object
// State Hub ever sent wrong. A key forgotten while its object is still wrong
// is reported once more, which only happens past max distinct ones.
type seenSet struct {
	mu    sync.Mutex
	max   int
	keys  map[string]struct{}
	order []string // insertion order, oldest first; a ring once full
	next  int      // where the next key goes in order once it is full
}

func newSeenSet(max int) *seenSet {
	return &seenSet{max: max, keys: make(map[string]struct{})}
}

// add records key and says whether it is new.
func (s *seenSet) add(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[key]; ok {
		return false
	}
	if len(s.order) < s.max {
		s.order = append(s.order, key)
	} else {
		delete(s.keys, s.order[s.next])
		s.order[s.next] = key
		s.next = (s.next + 1) % s.max
	}
	s.keys[key] = struct{}{}
	return true
}

// len is how many keys it holds.
func (s *seenSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}
