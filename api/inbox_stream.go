package api

import (
	"context"
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
	// DefaultInboxHeartbeat is the streams' heartbeat when InboxConfig.Heartbeat
	// is 0 (config HERALD_INBOX_HEARTBEAT defaults to it).
	DefaultInboxHeartbeat = 15 * time.Second
	// maxInboxStreamLife ends a stream opened with the tenant key after an hour
	// (a user token's stream ends when the token expires; either ends at the
	// first heartbeat after its credential is revoked); the client reconnects
	// with Last-Event-ID and loses nothing.
	maxInboxStreamLife = time.Hour
	inboxStreamPage    = 100
	streamWriteTimeout = 30 * time.Second
)

type streamReady struct {
	ID     int64             `json:"id"`
	Counts store.InboxCounts `json:"counts"`
}

// inboxStream opens one user's stream: it checks the request, subscribes to
// the hub, and hands the connection to an inboxStream until the client leaves,
// the stream's life ends, the token is revoked or the server shuts down.
func (h *inboxRoom) inboxStream(c *gin.Context) {
	tenantID, userID, ok := h.users.knownUser(c)
	if !ok {
		return
	}
	if h.cfg.Hub == nil {
		h.abort(c, &httpError{Status: http.StatusServiceUnavailable, Code: "streams_unavailable", Message: "inbox streams are not enabled on this server"})
		return
	}
	last, verr := lastEventID(c)
	if verr != nil {
		h.abort(c, verr)
		return
	}
	sub, err := h.cfg.Hub.Subscribe(tenantID, userID)
	var tooMany *inboxlive.ErrTooManyStreams
	if errors.As(err, &tooMany) {
		c.Header("Retry-After", "5")
		h.abort(c, &httpError{Status: http.StatusTooManyRequests, Code: "too_many_streams", Message: tooMany.Error() + "; close one first"})
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	defer h.cfg.Hub.Unsubscribe(sub)

	counts, seq, err := h.store.GetInboxCounts(c.Request.Context(), tenantID, userID)
	if err != nil {
		h.abort(c, err)
		return
	}
	life := maxInboxStreamLife
	if exp, ok := c.Get(userTokenExpiryKey); ok {
		life = min(life, time.Until(exp.(time.Time)))
	}
	st := &inboxStream{room: h, c: c, ctx: c.Request.Context(), tenantID: tenantID, userID: userID, last: last,
		w: c.Writer, rc: http.NewResponseController(c.Writer)}
	st.run(sub, seq, counts, life)
}

// lastEventID is the id the client saw last (Last-Event-ID, or ?last_event_id=
// for a client that cannot set headers); -1 for none.
func lastEventID(c *gin.Context) (int64, *httpError) {
	raw, field := c.GetHeader("Last-Event-ID"), "Last-Event-ID"
	if raw == "" {
		raw, field = c.Query("last_event_id"), "last_event_id"
	}
	if raw == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, badField(field, "invalid_field", "%s must be an event id this stream sent", field)
	}
	return n, nil
}

// inboxStream is one open stream: last is the seq of the last event the
// client has (sent on this connection, or named by its Last-Event-ID).
type inboxStream struct {
	room             *inboxRoom
	c                *gin.Context
	ctx              context.Context
	tenantID, userID string
	last             int64
	w                gin.ResponseWriter
	rc               *http.ResponseController
}

// run writes the stream: the opening (ready, refetch or nothing), what a
// resuming client missed, then live events on every wake-up and every
// heartbeat. A client sent ready or refetch has nothing to replay: it holds
// the current id, and anything written after it wakes the subscription taken
// before that id was read; reading again right away would also make a burst
// that lands just after ready arrive as a replay or as a live backlog
// (refetch) depending on scheduling.
func (st *inboxStream) run(sub *inboxlive.Sub, seq int64, counts store.InboxCounts, life time.Duration) {
	resuming := st.last >= 0 && st.last <= seq
	if st.open(seq, counts) != nil || resuming && st.replay(false) != nil {
		return
	}
	beat := time.NewTicker(st.room.heartbeat())
	defer beat.Stop()
	end := time.NewTimer(life)
	defer end.Stop()
	for {
		select {
		case <-st.ctx.Done():
			return
		case <-st.room.closing:
			return
		case <-end.C:
			return
		case <-sub.Wake():
			if st.replay(true) != nil {
				return
			}
		case <-beat.C:
			if st.heartbeat() != nil || st.room.auth.revoked(st.c, st.tenantID, st.userID) || st.replay(true) != nil {
				return
			}
		}
	}
}

// open writes the headers, the client's retry delay and the first event: ready
// (with the current id and counts) for a client with no id, refetch for one
// whose id is ahead of the log; none for a client that resumes.
func (st *inboxStream) open(seq int64, counts store.InboxCounts) error {
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer
	st.w.WriteHeader(http.StatusOK)
	// The client's retry delay after a dropped connection.
	if _, err := fmt.Fprint(st.w, "retry: 2000\n\n"); err != nil {
		return err
	}
	var err error
	switch {
	case st.last < 0:
		st.last = seq
		err = st.send(seq, "ready", streamReady{ID: seq, Counts: counts})
	case st.last > seq:
		err = st.refetch(seq, counts)
	}
	if err != nil {
		return err
	}
	return st.flush()
}

// errSlowClient ends a live stream that fell more than a page behind.
var errSlowClient = errors.New("inbox stream: the client fell more than a page behind")

// replay sends every event after last, a page at a time; a gap (pruned
// history, or an item.created event gone with its item) becomes a refetch. Each page is at most the hub's PageBytes of
// items, read only once the process's stream memory has room for it
// (inboxlive.Hub.ReservePage) and released once written, so a stream holds at
// most one page and all streams together at most Limits.MemoryBytes. On a live
// stream (after the opening replay), a backlog larger than one page means the
// client does not keep up (or a burst outran it): it gets "refetch" (reload
// the list, go on from that id) and the stream ends (errSlowClient); the
// client reconnects from the refetch's id with nothing to replay.
func (st *inboxStream) replay(live bool) error {
	s, hub := st.room.store, st.room.cfg.Hub
	for {
		release, err := hub.ReservePage(st.ctx)
		if err != nil {
			return err
		}
		more, err := st.page(s, hub, live)
		release()
		if err != nil || !more {
			return err
		}
	}
}

// page reads and writes one page of replay; more reports that another follows.
func (st *inboxStream) page(s *store.Store, hub *inboxlive.Hub, live bool) (more bool, err error) {
	hub.CountRead()
	events, cut, err := s.InboxEventsAfter(st.ctx, st.tenantID, st.userID, st.last, inboxStreamPage, hub.PageBytes())
	if err != nil {
		return false, err
	}
	// A hole anywhere in the page (not only before its first event) is
	// history the log no longer has: pruned, or an item.created event gone
	// with its item (capped, aged out, erased; store.InboxEventsAfter). The
	// client reloads rather than miss it.
	gap := false
	for i, e := range events {
		if e.Seq != st.last+1+int64(i) {
			gap = true
			break
		}
	}
	if gap || live && cut {
		counts, seq, err := s.GetInboxCounts(st.ctx, st.tenantID, st.userID)
		if err != nil {
			return false, err
		}
		if err := st.refetch(seq, counts); err != nil {
			return false, err
		}
		if err := st.flush(); err != nil {
			return false, err
		}
		if !gap {
			hub.CountSlowClient()
			return false, errSlowClient
		}
		return true, nil
	}
	for _, e := range events {
		if err := st.send(e.Seq, e.Kind, e); err != nil {
			return false, err
		}
		st.last = e.Seq
	}
	if len(events) > 0 {
		if err := st.flush(); err != nil {
			return false, err
		}
	}
	return cut || len(events) == inboxStreamPage, nil
}

// refetch tells the client to reload its list and go on from seq.
func (st *inboxStream) refetch(seq int64, counts store.InboxCounts) error {
	st.last = seq
	return st.send(seq, herald.InboxRefetch, streamReady{ID: seq, Counts: counts})
}

// send writes one event (unflushed).
func (st *inboxStream) send(id int64, event string, data any) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	_ = st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	_, err = fmt.Fprintf(st.w, "id: %d\nevent: %s\ndata: %s\n\n", id, event, raw)
	return err
}

// heartbeat writes a comment line, so proxies keep the connection and a gone
// client is noticed.
func (st *inboxStream) heartbeat() error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := fmt.Fprint(st.w, ": heartbeat\n\n"); err != nil {
		return err
	}
	return st.flush()
}

func (st *inboxStream) flush() error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	return st.rc.Flush()
}

func (h *inboxRoom) heartbeat() time.Duration {
	if h.cfg.Heartbeat > 0 {
		return h.cfg.Heartbeat
	}
	return DefaultInboxHeartbeat
}
