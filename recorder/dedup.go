package recorder

// RecentRequestIDs is how many of the latest request ids a Reader
// remembers to recognise a request event the recording holds twice.
const RecentRequestIDs = 1 << 16

// recentIDs remembers the ids of the latest RecentRequestIDs request events,
// oldest first out.
//
// A request id is unique within a session (the probe names each request
// ls-<run>-<seq>) and a recording holds one session (see SessionError), so
// an id read again is the same request recorded twice. Remembering every id
// would grow with the recording; a window bounds the memory (a few MiB)
// and still catches how events come to be repeated: a stretch of an agent's
// stream sent again (its ring holds 10,000 events), a frame written twice,
// a file's lines doubled, each within a few thousand requests of the first
// copy. A repeat further back than the window is not recognised and is
// counted again; an id the window has not seen is never dropped.
type recentIDs struct {
	seen map[string]struct{}
	ring []string // the ids in seen, in the order read; a circular buffer once full
	next int      // where the next id goes once ring is full
}

// add remembers id and reports whether it is new: false when the window
// already holds it.
func (s *recentIDs) add(id string) bool {
	if _, ok := s.seen[id]; ok {
		return false
	}
	if s.seen == nil {
		s.seen = make(map[string]struct{})
	}
	if len(s.ring) < RecentRequestIDs {
		s.ring = append(s.ring, id)
	} else {
		delete(s.seen, s.ring[s.next])
		s.ring[s.next] = id
		s.next = (s.next + 1) % RecentRequestIDs
	}
	s.seen[id] = struct{}{}
	return true
}
