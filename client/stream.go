package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// InboxStreamEvent is one event of a user's inbox stream.
type InboxStreamEvent struct {
	// ID is the user's event sequence number (what Last-Event-ID resumes after).
	ID int64
	// Type is the SSE event name: ready, refetch (reload the list, then go on),
	// item.created, item.updated, all.read or all.seen.
	Type string
	// Change is the data of item.* and all.* events.
	Change *InboxEvent
	// Marker is the data of ready and refetch.
	Marker *InboxStreamMarker
}

// InboxStream is an open inbox stream. Events delivers the events in order,
// exactly once, across reconnections; it is closed when the stream's context is
// done or Herald refuses to go on (then Err says why).
type InboxStream struct {
	Events <-chan InboxStreamEvent

	mu     sync.Mutex
	err    error
	lastID string
}

// Err is why Events was closed: the context's error, or an *Error Herald answered
// a reconnection with (401 when a user token expired). Nil while open.
func (s *InboxStream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// LastEventID is the id of the last event delivered ("" before the first).
func (s *InboxStream) LastEventID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastID
}

// StreamInbox is GET /v1/users/{id}/inbox/stream: the user's inbox as events on a
// channel. It connects before returning (so a refused stream is an error here),
// then reconnects by itself whenever the connection ends (a network error, the
// server's hourly end, a restart), sending Last-Event-ID so Herald replays what
// was missed, with backoff between failed attempts. params.LastEventID resumes a
// stream read before; cancel ctx to close it.
//
// The hand-written SSE reader is the few lines the format needs (id, event, data,
// comments); SSE client libraries bring their own reconnection, which would have
// to be replaced for Herald's typed events and refetch marker anyway.
func (c *Client) StreamInbox(ctx context.Context, userID string, params *StreamInboxParams) (*InboxStream, error) {
	p := withCursor(params)
	s := &InboxStream{}
	if p.LastEventID != nil {
		s.lastID = *p.LastEventID
	}
	open := func() (*http.Response, error) {
		cl := get(pathOf("v1", "users", userID, "inbox", "stream"), nil)
		cl.noTimeout = true
		cl.header = http.Header{"Accept": {"text/event-stream"}}
		if id := s.LastEventID(); id != "" {
			cl.header.Set("Last-Event-ID", id)
		}
		if p.AccessToken != nil {
			cl.query = queryOf(&StreamInboxParams{AccessToken: p.AccessToken})
		}
		return c.send(ctx, cl)
	}
	resp, err := open() //nolint:bodyclose // the reading goroutine closes each connection's body
	if err != nil {
		return nil, err
	}
	events := make(chan InboxStreamEvent)
	s.Events = events
	go func() {
		defer close(events)
		failures := 0
		for {
			got, rerr := s.read(ctx, resp.Body, events)
			resp.Body.Close()
			if ctx.Err() != nil {
				s.finish(ctx.Err())
				return
			}
			if got {
				failures = 0
			}
			_ = rerr // the connection ended: reconnect after the last id
			for {
				failures++
				if err := c.sleep(ctx, c.backoff(min(failures, 8))); err != nil {
					s.finish(err)
					return
				}
				resp, err = open() //nolint:bodyclose // closed after read, above
				if err == nil {
					break
				}
				var herr *Error
				if errors.As(err, &herr) && herr.Status != http.StatusTooManyRequests && herr.Status != http.StatusServiceUnavailable && herr.Status < 500 {
					s.finish(err)
					return
				}
				if ctx.Err() != nil {
					s.finish(ctx.Err())
					return
				}
			}
		}
	}()
	return s, nil
}

func (s *InboxStream) finish(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// read delivers the events of one connection until it ends; got says whether any
// event came.
func (s *InboxStream) read(ctx context.Context, body io.Reader, out chan<- InboxStreamEvent) (got bool, err error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, name string
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if line == "" { // dispatch
			if data.Len() > 0 || name != "" {
				ev, perr := parseEvent(id, name, data.String())
				if perr != nil {
					return got, perr
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return got, ctx.Err()
				}
				got = true
				if id != "" {
					s.mu.Lock()
					s.lastID = id
					s.mu.Unlock()
				}
			}
			id, name = "", ""
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") { // a comment (heartbeat)
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			id = value
		case "event":
			name = value
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		}
	}
	if err := sc.Err(); err != nil {
		return got, err
	}
	return got, io.EOF
}

func parseEvent(id, name, data string) (InboxStreamEvent, error) {
	ev := InboxStreamEvent{Type: name}
	if id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return ev, fmt.Errorf("herald client: inbox stream: event id %q: %w", id, err)
		}
		ev.ID = n
	}
	var target any
	switch name {
	case "ready", "refetch":
		ev.Marker = &InboxStreamMarker{}
		target = ev.Marker
	default:
		ev.Change = &InboxEvent{}
		target = ev.Change
	}
	if err := json.Unmarshal([]byte(data), target); err != nil {
		return ev, fmt.Errorf("herald client: inbox stream: %s event %s: %w", name, id, err)
	}
	return ev, nil
}
