package apitest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Event is one Server-Sent Event of the inbox stream.
type Event struct {
	ID   int64
	Type string
	Data map[string]any
	Raw  string
}

// Counts returns the event's counts (every inbox event carries them).
func (e Event) Counts() (total, unread, unseen int64) {
	c, _ := e.Data["counts"].(map[string]any)
	n := func(k string) int64 { f, _ := c[k].(float64); return int64(f) }
	return n("total"), n("unread"), n("unseen")
}

// NotificationID is the event's notification_id ("" for none).
func (e Event) NotificationID() string { s, _ := e.Data["notification_id"].(string); return s }

// Stream is an open inbox stream read by a goroutine into Events.
type Stream struct {
	Status int
	Body   []byte // the error body when Status is not 200
	Events chan Event
	// Heartbeats counts the ": heartbeat" comments seen.
	Heartbeats chan struct{}
	cancel     context.CancelFunc
	h          *Harness
}

// OpenStream opens GET path (an inbox stream) on base (h.URL when ""), with the
// Authorization key unless "" and the extra headers, checks the answer's status
// and headers against the OpenAPI document, and reads its events until the test
// ends or Close.
func (h *Harness) OpenStream(base, path, key string, headers ...string) *Stream {
	h.T.Helper()
	if base == "" {
		base = h.URL
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		h.T.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		cancel()
		h.T.Fatalf("GET %s: %v", path, err)
	}
	st := &Stream{Status: resp.StatusCode, Events: make(chan Event, 10_000), Heartbeats: make(chan struct{}, 10_000), cancel: cancel, h: h}
	h.T.Cleanup(st.Close)
	if resp.StatusCode != http.StatusOK {
		st.Body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		checkAgainstOpenAPI(h.T, req, resp, st.Body)
		return st
	}
	checkAgainstOpenAPI(h.T, req, resp, nil)
	go st.read(resp.Body)
	return st
}

func (st *Stream) read(body io.ReadCloser) {
	defer body.Close()
	defer close(st.Events)
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var ev Event
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Type != "" || data.Len() > 0 {
				ev.Raw = data.String()
				if ev.Type == "" {
					ev.Type = "message"
				}
				_ = json.Unmarshal([]byte(ev.Raw), &ev.Data)
				st.Events <- ev
			}
			ev, data = Event{}, strings.Builder{}
		case strings.HasPrefix(line, ":"):
			if strings.Contains(line, "heartbeat") {
				select {
				case st.Heartbeats <- struct{}{}:
				default:
				}
			}
		case strings.HasPrefix(line, "id: "):
			ev.ID, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
		case strings.HasPrefix(line, "event: "):
			ev.Type = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data.WriteString(strings.TrimPrefix(line, "data: "))
		}
	}
}

// Next returns the next event, failing the test after within.
func (st *Stream) Next(within time.Duration) Event {
	st.h.T.Helper()
	if st.Status != http.StatusOK {
		st.h.T.Fatalf("the stream answered %d: %s", st.Status, st.Body)
	}
	select {
	case ev, ok := <-st.Events:
		if !ok {
			st.h.T.Fatalf("the stream ended while an event was awaited")
		}
		return ev
	case <-time.After(within):
		st.h.T.Fatalf("no stream event within %s", within)
	}
	return Event{}
}

// NextOf skips events until one of type typ (failing after within).
func (st *Stream) NextOf(typ string, within time.Duration) Event {
	st.h.T.Helper()
	deadline := time.Now().Add(within)
	for {
		ev := st.Next(time.Until(deadline))
		if ev.Type == typ {
			return ev
		}
	}
}

// Quiet fails the test if an event arrives within d.
func (st *Stream) Quiet(d time.Duration) {
	st.h.T.Helper()
	select {
	case ev, ok := <-st.Events:
		if ok {
			st.h.T.Fatalf("unexpected stream event %s %d: %s", ev.Type, ev.ID, ev.Raw)
		}
	case <-time.After(d):
	}
}

// Close ends the stream.
func (st *Stream) Close() { st.cancel() }
