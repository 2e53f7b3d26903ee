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

// TestClientCallsAcrossTheAPI calls most operations once through the client
// against a real Herald, every answer checked against api/openapi.yaml, so a
// wrong path, method, parameter or answer type in operations.go fails here.
func TestClientCallsAcrossTheAPI(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.TenantWith("calls", "welcome")
	c := newClient(t, h, h.URL, key)
	ctx := context.Background()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	_, err := c.Healthz(ctx)
	must("Healthz", err)
	_, err = c.Readyz(ctx)
	must("Readyz", err)
	doc, err := c.GetOpenAPIDocument(ctx)
	must("GetOpenAPIDocument", err)
	if !strings.HasPrefix(string(doc), "openapi: 3") {
		t.Fatalf("the document starts %.20q", doc)
	}
	js, err := c.InboxComponent(ctx)
	must("InboxComponent", err)
	if !strings.Contains(string(js), "herald-inbox") {
		t.Fatal("the component script does not define herald-inbox")
	}

	// Users, preferences, push tokens, topics.
	_, err = c.PutUser(ctx, "ada", client.PutUserRequest{Email: client.Ptr("ada@example.com"), Timezone: client.Ptr("Europe/London")})
	must("PutUser", err)
	u, err := c.GetUser(ctx, "ada")
	must("GetUser", err)
	if u.Email == nil || *u.Email != "ada@example.com" {
		t.Fatalf("GetUser: %+v", u)
	}
	_, err = c.PutPreferenceDefaults(ctx, client.Preferences{Channels: &client.ChannelSwitches{Sms: client.Ptr(false)}})
	must("PutPreferenceDefaults", err)
	_, err = c.GetPreferenceDefaults(ctx)
	must("GetPreferenceDefaults", err)
	_, err = c.PutUserPreferences(ctx, "ada", client.Preferences{Channels: &client.ChannelSwitches{Email: client.Ptr(false)}})
	must("PutUserPreferences", err)
	up, err := c.GetUserPreferences(ctx, "ada")
	must("GetUserPreferences", err)
	_ = up
	_, err = c.PutPushToken(ctx, "ada", client.PutPushTokenRequest{Token: "fcm-token:APA91b_1", Platform: client.Android})
	must("PutPushToken", err)
	var tokens []string
	for pt, err := range c.AllPushTokens(ctx, "ada", nil) {
		must("AllPushTokens", err)
		tokens = append(tokens, pt.Token)
	}
	if len(tokens) != 1 || tokens[0] != "fcm-token:APA91b_1" {
		t.Fatalf("push tokens %q", tokens)
	}
	must("DeletePushToken", c.DeletePushToken(ctx, "ada", "fcm-token:APA91b_1")) // a ':' in a path segment
	added, err := c.AddTopicSubscribers(ctx, "news", []string{"ada", "nobody"})
	must("AddTopicSubscribers", err)
	if added.Added != 1 || len(added.UnknownUsers) != 1 {
		t.Fatalf("AddTopicSubscribers: %+v", added)
	}
	subs, err := c.ListTopicSubscribers(ctx, "news", nil)
	must("ListTopicSubscribers", err)
	if len(subs.Items) != 1 || subs.Items[0].UserID != "ada" {
		t.Fatalf("subscribers %+v", subs.Items)
	}
	must("RemoveTopicSubscriber", c.RemoveTopicSubscriber(ctx, "news", "ada"))

	// Templates.
	tpl, err := c.GetTemplate(ctx, "welcome", nil)
	must("GetTemplate", err)
	_, err = c.GetTemplate(ctx, "welcome", &client.GetTemplateParams{Version: &tpl.Version})
	must("GetTemplate version", err)
	pv, err := c.PreviewTemplate(ctx, "welcome", client.PreviewTemplateRequest{Data: &client.TemplateData{"title": "Hi"}})
	must("PreviewTemplate", err)
	if pv.Channels.InApp == nil {
		t.Fatalf("preview %+v", pv)
	}
	_, err = c.PutTemplate(ctx, "scratch", client.PutTemplateRequest{Category: "general", InApp: &client.InAppContent{Title: client.Ptr("x"), Body: client.Ptr("y")}})
	must("PutTemplate", err)
	must("DeleteTemplate", c.DeleteTemplate(ctx, "scratch"))

	// The inbox, with the tenant key and with a user token.
	sent, err := c.CreateNotification(ctx, client.CreateNotificationRequest{UserID: "ada", TemplateID: "welcome",
		Channels: []client.ChannelName{"in_app"}, IdempotencyKey: client.Ptr("calls-1")})
	must("CreateNotification", err)
	h.Eventually(20*time.Second, "the inbox item", func() bool {
		counts, err := c.GetInboxCounts(ctx, "ada")
		return err == nil && counts.Counts.Total == 1
	})
	tok, err := c.MintUserToken(ctx, "ada", client.MintUserTokenRequest{TTLSeconds: client.Ptr(600)})
	must("MintUserToken", err)
	asUser := newClient(t, h, h.URL, tok.Token)
	page, err := asUser.ListInbox(ctx, "ada", &client.ListInboxParams{Unread: client.Ptr(true)})
	must("ListInbox (user token)", err)
	if len(page.Items) != 1 || page.Items[0].NotificationID != sent.NotificationID {
		t.Fatalf("inbox %+v", page.Items)
	}
	item, err := asUser.MarkInboxItem(ctx, "ada", sent.NotificationID, client.InboxRead)
	must("MarkInboxItem", err)
	if item.Counts.Unread != 0 {
		t.Fatalf("after read: %+v", item.Counts)
	}
	_, err = c.MarkInboxAllSeen(ctx, "ada")
	must("MarkInboxAllSeen", err)
	_, err = c.MarkInboxAllRead(ctx, "ada")
	must("MarkInboxAllRead", err)
	must("RevokeUserTokens", c.RevokeUserTokens(ctx, "ada"))
	_, err = c.GetInboxSettings(ctx)
	must("GetInboxSettings", err)
	_, err = c.PutInboxSettings(ctx, client.PutInboxSettingsRequest{AllowedOrigins: []string{"https://shop.example.com"}})
	must("PutInboxSettings", err)
	_, err = c.RotateInboxSecret(ctx)
	must("RotateInboxSecret", err)

	// The support view, a scheduled notification cancelled, dead letters, the audit log.
	found, err := c.FindNotifications(ctx, &client.FindNotificationsParams{DedupKey: client.Ptr("calls-1")})
	must("FindNotifications", err)
	if len(found.Items) != 1 {
		t.Fatalf("FindNotifications: %+v", found.Items)
	}
	_, err = c.ListUserNotifications(ctx, "ada", nil)
	must("ListUserNotifications", err)
	later, err := c.CreateNotification(ctx, client.CreateNotificationRequest{UserID: "ada", TemplateID: "welcome",
		Channels: []client.ChannelName{"in_app"}, SendAt: client.Ptr(time.Now().Add(time.Hour))})
	must("CreateNotification send_at", err)
	h.Eventually(20*time.Second, "the scheduled notification cancelled", func() bool {
		n, err := c.CancelNotification(ctx, later.NotificationID)
		return err == nil && n.Status == client.NotificationStatusCancelled
	})
	_, err = c.ListDeadLetters(ctx, nil)
	must("ListDeadLetters", err)
	_, err = c.BulkRedriveDeadLetters(ctx, client.BulkRedriveRequest{})
	must("BulkRedriveDeadLetters", err)
	actions := map[string]bool{}
	for e, err := range c.AllAuditLog(ctx, &client.ListAuditLogParams{Limit: client.Ptr(2)}) {
		must("AllAuditLog", err)
		actions[e.Action] = true
	}
	if len(actions) < 3 {
		t.Fatalf("audit actions %v", actions)
	}

	// Keys, providers, settings, sandbox, webhook endpoints.
	k, err := c.CreateAPIKey(ctx, client.CreateAPIKeyRequest{Name: client.Ptr("ci")})
	must("CreateAPIKey", err)
	keys, err := c.ListAPIKeys(ctx)
	must("ListAPIKeys", err)
	if len(keys.Items) != 2 {
		t.Fatalf("keys %+v", keys.Items)
	}
	_, err = c.RevokeAPIKey(ctx, k.ID)
	must("RevokeAPIKey", err)
	_, err = c.ListProviders(ctx)
	must("ListProviders", err)
	_, err = c.GetSettings(ctx)
	must("GetSettings", err)
	_, err = c.PutSettings(ctx, client.PutSettingsRequest{DefaultLocale: client.Ptr("en-GB")})
	must("PutSettings", err)
	_, err = c.ListSandboxMessages(ctx, &client.ListSandboxMessagesParams{Limit: client.Ptr(5)})
	must("ListSandboxMessages", err)
	ep, err := c.CreateWebhookEndpoint(ctx, client.WebhookEndpointRequest{URL: client.Ptr("http://127.0.0.1:9/hooks")})
	must("CreateWebhookEndpoint", err)
	_, err = c.GetWebhookEndpoint(ctx, ep.Endpoint.ID)
	must("GetWebhookEndpoint", err)
	_, err = c.UpdateWebhookEndpoint(ctx, ep.Endpoint.ID, client.WebhookEndpointRequest{Description: client.Ptr("renamed")})
	must("UpdateWebhookEndpoint", err)
	eps, err := c.ListWebhookEndpoints(ctx)
	must("ListWebhookEndpoints", err)
	if len(eps.Items) != 1 || eps.Items[0].Description != "renamed" {
		t.Fatalf("endpoints %+v", eps.Items)
	}
	_, err = c.RotateWebhookSecret(ctx, ep.Endpoint.ID)
	must("RotateWebhookSecret", err)
	_, err = c.ReplayWebhookMessages(ctx, ep.Endpoint.ID, client.ReplayWebhookMessagesRequest{Since: time.Now().Add(-time.Hour), Until: time.Now()})
	must("ReplayWebhookMessages", err)
	must("DeleteWebhookEndpoint", c.DeleteWebhookEndpoint(ctx, ep.Endpoint.ID))

	// Lists and campaign controls.
	list, err := c.UploadList(ctx, client.NDJSON, strings.NewReader(`{"user_id":"ada","data":{"title":"A"}}`+"\n"), nil)
	must("UploadList", err)
	_, err = c.GetList(ctx, list.ListID)
	must("GetList", err)
	acc, err := c.CreateCampaign(ctx, client.CreateCampaignRequest{TemplateID: "welcome", Channels: []client.ChannelName{"in_app"},
		SendAt: client.Ptr(time.Now().Add(time.Hour)), Audience: client.CreateCampaignRequest_Audience{ListID: &list.ListID}})
	must("CreateCampaign", err)
	_, err = c.PauseCampaign(ctx, acc.CampaignID)
	must("PauseCampaign", err)
	_, err = c.ResumeCampaign(ctx, acc.CampaignID)
	must("ResumeCampaign", err)
	cp, err := c.CancelCampaign(ctx, acc.CampaignID)
	must("CancelCampaign", err)
	h.Eventually(20*time.Second, "the campaign cancelled", func() bool {
		cp, err = c.GetCampaign(ctx, acc.CampaignID)
		return err == nil && cp.Status == client.CampaignStatusCancelled
	})
	must("DeleteList", c.DeleteList(ctx, list.ListID))

	// The operator's API, with the operator key.
	op := newClient(t, h, h.URL, h.OperatorKey)
	lim, err := op.GetTenantLimits(ctx, tenantID)
	must("GetTenantLimits", err)
	_, err = op.PutTenantLimits(ctx, tenantID, client.TenantLimits{DailyQuota: client.Ptr(1000)})
	must("PutTenantLimits", err)
	_ = lim
}
