package main

import (
	"context"
	"net/url"
	"sync"
	"time"
)

// tracker follows submitted notifications until each is visible in its user's inbox.
type tracker struct {
	mu        sync.Mutex
	pending   map[string]map[string]time.Time // user → notification id → POST send time
	order     []string                        // users in round-robin order
	rr        int
	latencies []time.Duration
	firstSend time.Time
	lastSeen  time.Time
	open      int // ids added and not yet seen
	seen      map[string]bool
	polls     int
	pollErrs  int
	errSample string
}

func newTracker(users []string) *tracker {
	t := &tracker{pending: map[string]map[string]time.Time{}, order: users, seen: map[string]bool{}}
	for _, u := range users {
		t.pending[u] = map[string]time.Time{}
	}
	return t
}

// add registers an accepted id and the time its POST was sent.
func (t *tracker) add(user, id string, sent time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.firstSend.IsZero() || sent.Before(t.firstSend) {
		t.firstSend = sent
	}
	if _, dup := t.pending[user][id]; !dup {
		t.pending[user][id] = sent
		t.open++
	}
}

// nextUser returns the next user, round-robin, who has ids not yet seen.
func (t *tracker) nextUser() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for range len(t.order) {
		u := t.order[t.rr%len(t.order)]
		t.rr++
		if len(t.pending[u]) > 0 {
			return u, true
		}
	}
	return "", false
}

// observe marks the ids a poll of user's inbox returned as visible at `at`.
func (t *tracker) observe(user string, ids []string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.polls++
	for _, id := range ids {
		sent, ok := t.pending[user][id]
		if !ok {
			continue
		}
		delete(t.pending[user], id)
		t.seen[id] = true
		t.open--
		t.latencies = append(t.latencies, at.Sub(sent))
		if at.After(t.lastSeen) {
			t.lastSeen = at
		}
	}
}

func (t *tracker) pollFailed(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.polls++
	t.pollErrs++
	if t.errSample == "" {
		t.errSample = err.Error()
	}
}

func (t *tracker) remaining() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.open
}

// poll reads inboxes at no more than pollRate requests/s (at most pollers in flight)
// until every added id has been seen after submitted is closed, or ctx ends.
func (b *bench) poll(ctx context.Context, t *tracker, pollRate float64, submitted <-chan struct{}) {
	interval := time.Duration(float64(time.Second) / pollRate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	sem := make(chan struct{}, b.o.pollers)
	var wg sync.WaitGroup
	defer wg.Wait()
	done := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-submitted:
			done, submitted = true, nil
		case <-tick.C:
		}
		if done && t.remaining() == 0 {
			return
		}
		u, ok := t.nextUser()
		if !ok {
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // every poller busy: skip this tick, the rate stays bounded
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			pctx, cancel := context.WithTimeout(ctx, b.o.reqTimeout)
			defer cancel()
			ids, err := b.inbox(pctx, u)
			if err != nil {
				if ctx.Err() == nil {
					t.pollFailed(err)
				}
				return
			}
			t.observe(u, ids, time.Now())
		}()
	}
}

// inbox returns the notification ids on the first page of a user's inbox (newest
// first; the bench keeps every user's inbox within one page).
func (b *bench) inbox(ctx context.Context, user string) ([]string, error) {
	var out struct {
		Items []struct {
			NotificationID string `json:"notification_id"`
		} `json:"items"`
	}
	if _, err := b.getJSON(ctx, "/v1/users/"+url.PathEscape(user)+"/inbox?limit="+itoa(inboxPage), &out); err != nil {
		return nil, err
	}
	ids := make([]string, len(out.Items))
	for i, it := range out.Items {
		ids[i] = it.NotificationID
	}
	return ids, nil
}
