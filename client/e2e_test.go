package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/client"
	"github.com/herald-notify/herald/internal/apitest"
)

// newClient is a client of h with key whose every answer is checked against
// api/openapi.yaml.
func newClient(t *testing.T, h *apitest.Harness, base, key string) *client.Client {
	t.Helper()
	c, err := client.New(base, key, client.WithHTTPClient(&http.Client{Transport: h.CheckedTransport()}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClientAgainstHerald drives a real Herald (API + worker) through the client:
// users, templates, a send and its retry, typed errors, pages, a list upload and a
// campaign to completion.
func TestClientAgainstHerald(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("client")
	c := newClient(t, h, h.URL, key)
	ctx := context.Background()

	for _, id := range []string{"welcome", "t1", "t2", "t3", "t4"} {
		if _, err := c.PutTemplate(ctx, id, client.PutTemplateRequest{Category: "general",
			InApp: &client.InAppContent{Title: client.Ptr("Hi {{.name}}"), Body: client.Ptr("Welcome, {{.name}}")}}); err != nil {
			t.Fatalf("PutTemplate %s: %v", id, err)
		}
	}
	var ids []string
	for tpl, err := range c.AllTemplates(ctx, &client.ListTemplatesParams{Limit: client.Ptr(2)}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tpl.ID)
	}
	if len(ids) != 5 {
		t.Fatalf("AllTemplates in pages of 2: %v, want the 5 templates", ids)
	}

	if _, err := c.PutUser(ctx, "ada", client.PutUserRequest{Email: client.Ptr("ada@example.com")}); err != nil {
		t.Fatal(err)
	}
	req := client.CreateNotificationRequest{UserID: "ada", TemplateID: "welcome", Data: &client.TemplateData{"name": "Ada"}}
	sent, err := c.CreateNotification(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if sent.Duplicate || sent.IdempotencyKey == "" || !strings.HasPrefix(sent.NotificationID, "n_") {
		t.Fatalf("first send: %+v", sent)
	}
	// The same call as a retry would send it: the generated key again.
	req.IdempotencyKey = client.Ptr(sent.IdempotencyKey)
	again, err := c.CreateNotification(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.NotificationID != sent.NotificationID {
		t.Fatalf("retry: %+v, want a duplicate of %s", again, sent.NotificationID)
	}
	h.Eventually(20*time.Second, "the notification delivered", func() bool {
		n, err := c.GetNotification(ctx, sent.NotificationID)
		return err == nil && n.Status == "delivered"
	})

	_, err = c.CreateNotification(ctx, client.CreateNotificationRequest{UserID: "nobody", TemplateID: "welcome"})
	var herr *client.Error
	if !errors.As(err, &herr) || herr.Status != http.StatusUnprocessableEntity || herr.Code != "unknown_user" || herr.Field != "user_id" {
		t.Fatalf("unknown user: %v, want 422 unknown_user (user_id)", err)
	}
	if _, err := c.GetCampaign(ctx, "missing"); !errors.As(err, &herr) || herr.Status != http.StatusNotFound || herr.Code != "not_found" {
		t.Fatalf("missing campaign: %v", err)
	}

	for _, u := range []string{"bob", "cy"} {
		if _, err := c.PutUser(ctx, u, client.PutUserRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := c.UploadList(ctx, client.CSV, strings.NewReader("user_id,name\nada,Ada\nbob,Bob\ncy,Cy\nghost,Ghost\n"), &client.UploadListParams{Name: client.Ptr("friends")})
	if err != nil {
		t.Fatal(err)
	}
	if list.Lines != 5 || list.Members != 4 || list.UnknownUsers != 1 {
		t.Fatalf("list %+v", list)
	}
	_, err = c.UploadList(ctx, client.CSV, strings.NewReader("user_id\nok\n\"broken\n"), nil)
	if !errors.As(err, &herr) || herr.Status != http.StatusBadRequest || !strings.HasPrefix(herr.Field, "line ") {
		t.Fatalf("bad list: %v, want 400 naming the line", err)
	}
	acc, err := c.CreateCampaign(ctx, client.CreateCampaignRequest{TemplateID: "welcome",
		Audience: client.CreateCampaignRequest_Audience{ListID: &list.ListID}})
	if err != nil {
		t.Fatal(err)
	}
	var done *client.Campaign
	h.Eventually(30*time.Second, "the campaign completed", func() bool {
		done, err = c.GetCampaign(ctx, acc.CampaignID)
		return err == nil && done.Status == client.CampaignStatusCompleted
	})
	if done.RecipientsProcessed != 3 || done.Counts["in_app"].Delivered != 3 {
		t.Fatalf("campaign %+v, want 3 recipients delivered in the inbox", done)
	}
	var campaigns []string
	for cp, err := range c.AllCampaigns(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		campaigns = append(campaigns, cp.CampaignID)
	}
	if len(campaigns) != 1 || campaigns[0] != acc.CampaignID {
		t.Fatalf("AllCampaigns %v", campaigns)
	}
}

// TestClientInboxStreamResumes reads the inbox stream through a proxy that drops
// every connection mid-stream: the client reconnects with Last-Event-ID and
// delivers each event once, in order, including one created while it was away.
func TestClientInboxStreamResumes(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.TenantWith("stream", "welcome")
	h.PutUser(key, "ada", map[string]any{})
	target, _ := url.Parse(h.URL)
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, FlushInterval: -1})
	defer proxy.Close()
	c := newClient(t, h, proxy.URL, key)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	stream, err := c.StreamInbox(ctx, "ada", nil)
	if err != nil {
		t.Fatal(err)
	}
	next := func(want string) client.InboxStreamEvent {
		t.Helper()
		select {
		case ev, ok := <-stream.Events:
			if !ok {
				t.Fatalf("stream closed: %v", stream.Err())
			}
			if ev.Type != want {
				t.Fatalf("event %s (%d), want %s", ev.Type, ev.ID, want)
			}
			return ev
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s event", want)
		}
		panic("unreachable")
	}
	ready := next("ready")
	if ready.Marker == nil {
		t.Fatalf("ready without its marker: %+v", ready)
	}
	first := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "welcome", "channels": []string{"in_app"}})
	ev1 := next("item.created")
	if ev1.Change == nil || ev1.Change.NotificationID == nil || *ev1.Change.NotificationID != first || ev1.Change.Counts.Unread != 1 {
		t.Fatalf("first item: %+v", ev1.Change)
	}

	proxy.CloseClientConnections()
	second := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "welcome", "channels": []string{"in_app"},
		"data": map[string]any{"body": "second"}})
	ev2 := next("item.created")
	if *ev2.Change.NotificationID != second || ev2.ID != ev1.ID+1 {
		t.Fatalf("after the reconnect: event %d for %s, want %d for %s", ev2.ID, *ev2.Change.NotificationID, ev1.ID+1, second)
	}
	if stream.LastEventID() == "" {
		t.Fatal("no last event id kept")
	}
	cancel()
	for range stream.Events { // drains until closed
	}
	if !errors.Is(stream.Err(), context.Canceled) {
		t.Fatalf("stream ended with %v, want context.Canceled", stream.Err())
	}
}

// TestClientVerifiesHeraldWebhooks subscribes an endpoint served by the client's
// WebhookVerifier.Handler: Herald's signed delivery events are verified and
// decoded; the same body with another secret is refused.
func TestClientVerifiesHeraldWebhooks(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.TenantWith("hooks", "welcome")
	h.PutUser(key, "ada", map[string]any{})
	c := newClient(t, h, h.URL, key)
	ctx := context.Background()

	events := make(chan *client.WebhookEvent, 16)
	var mu sync.Mutex
	handler := http.NotFoundHandler()
	setHandler := func(next http.Handler) { mu.Lock(); handler = next; mu.Unlock() }
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		current := handler
		mu.Unlock()
		current.ServeHTTP(w, r)
	}))
	defer recv.Close()
	ep, err := c.CreateWebhookEndpoint(ctx, client.WebhookEndpointRequest{URL: client.Ptr(recv.URL + "/hooks"),
		Events: []client.WebhookEventType{"delivery.delivered"}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := client.NewWebhookVerifier(ep.Secret)
	if err != nil {
		t.Fatal(err)
	}
	setHandler(v.Handler(func(_ *http.Request, ev *client.WebhookEvent) error { events <- ev; return nil }))

	id := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "welcome", "channels": []string{"in_app"}})
	var ev *client.WebhookEvent
	select {
	case ev = <-events:
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook")
	}
	d, err := ev.Delivery()
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != "delivery.delivered" || d.NotificationID != id || d.Channel != "in_app" || !strings.HasPrefix(ev.MessageID, "msg_") {
		t.Fatalf("event %+v, data %+v", ev, d)
	}

	other, _ := client.NewWebhookVerifier("whsec_" + "c2VjcmV0LW9mLWFub3RoZXItZW5kcG9pbnQtMzJieXRlcw==")
	setHandler(other.Handler(func(*http.Request, *client.WebhookEvent) error {
		t.Error("an event signed with another secret was accepted")
		return nil
	}))
	// Replay the message (once Herald has recorded its delivery: a message still
	// in flight is not replayed) and wait for the receiver's 401.
	replayed := false
	h.Eventually(20*time.Second, "the replay refused with 401", func() bool {
		if !replayed {
			r, err := c.ReplayWebhookMessage(ctx, ep.Endpoint.ID, ev.MessageID)
			if err != nil {
				t.Fatal(err)
			}
			replayed = r.Replayed == 1
			return false
		}
		page, err := c.ListWebhookAttempts(ctx, ep.Endpoint.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page.Items {
			if a.StatusCode != nil && *a.StatusCode == http.StatusUnauthorized {
				return true
			}
		}
		return false
	})
}
