package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/inboxlive"
	"github.com/herald-notify/herald/internal/store"
)

// GET /v1/users/{user_id}/inbox/stream: Server-Sent Events.
//
// Every event carries the user's event seq as its SSE id and, as data, the
// store.InboxEvent (kind, item, counts). A client that reconnects with
// Last-Event-ID (EventSource does so itself; or ?last_event_id=) gets what it
// missed from the durable log, in order, then live events; with no id it gets a
// "ready" event carrying the current id and counts first. If its id is older
// than the kept history (store.InboxEventRetention) or unknown, it gets a
// "refetch" event: reload the list, then go on from that event's id.
//
// The stream is woken by the process's inboxlive.Hub (one LISTEN connection per
// process) and re-reads the log on every heartbeat too, so a lost NOTIFY delays
// an event by at most one heartbeat and never loses it.

// Stream tuning.
const (
	DefaultInboxHeartbeat = 15 * time.Second
	// MaxInboxStreamLife ends a stream opened with the tenant key after an hour
	// (a user token's stream ends when the token expires); the client reconnects
	// with Last-Event-ID and loses nothing.
	MaxInboxStreamLife = time.Hour
	inboxStreamPage    = 100
	streamWriteTimeout = 30 * time.Second
)

type streamReady struct {
	ID     int64             `json:"id"`
	Counts store.InboxCounts `json:"counts"`
}

func (s *Server) inboxStream(c *gin.Context) {
	tenantID, userID, ok := s.knownUser(c)
	if !ok {
		return
	}
	if s.hub == nil {
		s.abort(c, &Error{Status: http.StatusServiceUnavailable, Code: "streams_unavailable", Message: "inbox streams are not enabled on this server"})
		return
	}
	lastRaw := c.GetHeader("Last-Event-ID")
	field := "Last-Event-ID"
	if lastRaw == "" {
		lastRaw, field = c.Query("last_event_id"), "last_event_id"
	}
	var last int64 = -1
	if lastRaw != "" {
		n, err := strconv.ParseInt(lastRaw, 10, 64)
		if err != nil || n < 0 {
			s.abort(c, badField(field, "invalid_field", "%s must be an event id this stream sent", field))
			return
		}
		last = n
	}
	sub, err := s.hub.Subscribe(tenantID, userID)
	var tooMany *inboxlive.ErrTooManyStreams
	if errors.As(err, &tooMany) {
		c.Header("Retry-After", "5")
		s.abort(c, &Error{Status: http.StatusTooManyRequests, Code: "too_many_streams", Message: tooMany.Error() + "; close one first"})
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	defer s.hub.Unsubscribe(sub)

	ctx := c.Request.Context()
	counts, seq, err := s.store.GetInboxCounts(ctx, tenantID, userID)
	if err != nil {
		s.abort(c, err)
		return
	}
	life := MaxInboxStreamLife
	if exp, ok := c.Get(userTokenExpiryKey); ok {
		life = min(life, time.Until(exp.(time.Time)))
	}
	w := c.Writer
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(id int64, event string, data any) error {
		raw, err := json.Marshal(data)
		if err != nil {
			return err
		}
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", id, event, raw); err != nil {
			return err
		}
		return nil
	}
	flush := func() error {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		return rc.Flush()
	}
	// The client's retry delay after a dropped connection.
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil {
		return
	}
	refetch := func(seq int64, counts store.InboxCounts) error {
		last = seq
		return send(seq, herald.InboxRefetch, streamReady{ID: seq, Counts: counts})
	}
	switch {
	case last < 0:
		last = seq
		err = send(seq, "ready", streamReady{ID: seq, Counts: counts})
	case last > seq:
		err = refetch(seq, counts)
	}
	if err != nil || flush() != nil {
		return
	}
	// pump sends every event after last; a gap (pruned history) becomes a refetch.
	pump := func() error {
		for {
			events, err := s.store.InboxEventsAfter(ctx, tenantID, userID, last, inboxStreamPage)
			if err != nil {
				return err
			}
			if len(events) > 0 && events[0].Seq != last+1 {
				counts, seq, err := s.store.GetInboxCounts(ctx, tenantID, userID)
				if err != nil {
					return err
				}
				if err := refetch(seq, counts); err != nil {
					return err
				}
				if err := flush(); err != nil {
					return err
				}
				continue
			}
			for _, e := range events {
				if err := send(e.Seq, e.Kind, e); err != nil {
					return err
				}
				last = e.Seq
			}
			if len(events) > 0 {
				if err := flush(); err != nil {
					return err
				}
			}
			if len(events) < inboxStreamPage {
				return nil
			}
		}
	}
	if err := pump(); err != nil {
		return
	}
	beat := time.NewTicker(s.heartbeat())
	defer beat.Stop()
	end := time.NewTimer(life)
	defer end.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case <-end.C:
			return
		case <-sub.Wake():
			if pump() != nil {
				return
			}
		case <-beat.C:
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil || flush() != nil {
				return
			}
			if pump() != nil {
				return
			}
		}
	}
}

func (s *Server) heartbeat() time.Duration {
	if s.cfg.InboxHeartbeat > 0 {
		return s.cfg.InboxHeartbeat
	}
	return DefaultInboxHeartbeat
}
