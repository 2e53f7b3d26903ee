package providertest

import "sync"

// Script is the behaviour queue every test server shares: Next queues behaviours
// for the next requests (or connections), one each, in order; Always sets the
// behaviour for every later one until Recover. The HTTP fakes here and the SMTP
// server in providers/smtp/smtptest embed it, so the three methods mean the same
// everywhere. B is the server's own Behavior type; its zero value accepts. The zero
// Script is ready to use and safe for concurrent use.
type Script[B any] struct {
	mu     sync.Mutex
	queue  []B
	always *B
}

// Next queues behaviours for the next requests, one each, in order; later requests
// get the Always behaviour, or are accepted.
func (s *Script[B]) Next(bs ...B) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, bs...)
}

// Always makes every request not covered by Next behave as b (an outage) until
// Recover.
func (s *Script[B]) Always(b B) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.always = &b
}

// Recover ends Always: requests are accepted again.
func (s *Script[B]) Recover() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.always = nil
}

// Take removes and returns the behaviour for the next request: the first queued
// one, else the Always one, else the zero B (accept). It is a function, not a
// method, so that it is not promoted onto the servers that embed a Script: only
// the server itself takes.
func Take[B any](s *Script[B]) B {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b B
	switch {
	case len(s.queue) > 0:
		b, s.queue = s.queue[0], s.queue[1:]
	case s.always != nil:
		b = *s.always
	}
	return b
}

// clear forgets the queued behaviours and Always.
func (s *Script[B]) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue, s.always = nil, nil
}
