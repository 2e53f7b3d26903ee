package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// One method per operation of api/openapi.yaml, named after its operationId
// (TestClientCoversOpenAPI checks every operation has one), grouped as the
// document's tags are. Path parameters are arguments; optional query parameters
// are the generated XxxParams (nil for none); bodies are the generated request
// types.

// Short names for the answers and bodies the document describes inline.
type (
	// AuditLogPage is a page of GET /v1/audit-log.
	AuditLogPage = ListAuditLog200JSONResponseBody
	// CampaignPage is a page of GET /v1/campaigns.
	CampaignPage = ListCampaigns200JSONResponseBody
	// TopicSubscriberPage is a page of GET /v1/topics/{topic}/subscribers.
	TopicSubscriberPage = ListTopicSubscribers200JSONResponseBody
	// TopicSubscriber is one of its items.
	TopicSubscriber = ListTopicSubscribers200JSONResponseBody_Items
	// TopicSubscribersAdded answers POST /v1/topics/{topic}/subscribers.
	TopicSubscribersAdded = AddTopicSubscribers200JSONResponseBody
	// WebhookAttemptPage is a page of GET /v1/webhook-endpoints/{id}/attempts.
	WebhookAttemptPage = ListWebhookAttempts200JSONResponseBody
	// WebhookEndpointList answers GET /v1/webhook-endpoints.
	WebhookEndpointList = ListWebhookEndpoints200JSONResponseBody
	// TemplatePreview answers POST /v1/templates/{id}/preview.
	TemplatePreview = PreviewTemplate200JSONResponseBody
	// InboxCountsAnswer answers GET /v1/users/{id}/inbox/counts.
	InboxCountsAnswer = GetInboxCounts200JSONResponseBody
	// InboxSecret answers POST /v1/inbox/secret.
	InboxSecret = RotateInboxSecret201JSONResponseBody
	// PreviewTemplateRequest is the body of POST /v1/templates/{id}/preview.
	PreviewTemplateRequest = PreviewTemplateJSONBody
	// InboxSessionRequest is the body of POST /v1/inbox/session.
	InboxSessionRequest = InboxSessionJSONBody
	// PutInboxSettingsRequest is the body of PUT /v1/inbox/settings.
	PutInboxSettingsRequest = PutInboxSettingsJSONBody
	// MintUserTokenRequest is the body of POST /v1/users/{id}/token.
	MintUserTokenRequest = MintUserTokenJSONBody
	// ReplayWebhookMessagesRequest is the body of POST /v1/webhook-endpoints/{id}/replay.
	ReplayWebhookMessagesRequest = ReplayWebhookMessagesJSONBody
)

func get(path string, query url.Values) call {
	return call{method: http.MethodGet, path: path, query: query, idempotent: true}
}

func put(path string, body any) call {
	return call{method: http.MethodPut, path: path, body: body, idempotent: true}
}

func del(path string) call { return call{method: http.MethodDelete, path: path, idempotent: true} }

// post is a POST that is not idempotent unless the caller says so.
func post(path string, body any) call { return call{method: http.MethodPost, path: path, body: body} }

func idempotent(c call) call { c.idempotent = true; return c }

// doJSON runs cl and returns its decoded answer.
func doJSON[T any](ctx context.Context, c *Client, cl call) (*T, error) {
	var out T
	if _, err := c.do(ctx, cl, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ---- operations

// Healthz is GET /healthz: the process is up.
func (c *Client) Healthz(ctx context.Context) (*Health, error) {
	return doJSON[Health](ctx, c, get("/healthz", nil))
}

// Readyz is GET /readyz: PostgreSQL and Temporal answer (a 503 is an *Error).
func (c *Client) Readyz(ctx context.Context) (*Ready, error) {
	return doJSON[Ready](ctx, c, get("/readyz", nil))
}

// Metrics is GET /metrics: the Prometheus exposition text.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	b, err := c.raw(ctx, get("/metrics", nil))
	return string(b), err
}

// GetOpenAPIDocument is GET /openapi.yaml: the API document the server serves.
func (c *Client) GetOpenAPIDocument(ctx context.Context) ([]byte, error) {
	return c.raw(ctx, get("/openapi.yaml", nil))
}

// raw runs cl and returns its body as it came.
func (c *Client) raw(ctx context.Context, cl call) ([]byte, error) {
	resp, err := c.send(ctx, cl)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// ---- notifications

// NotificationSent is the answer to CreateNotification: a new notification (202,
// Duplicate false) or the one a same key (or same content) accepted before (200).
type NotificationSent struct {
	NotificationID string
	// Status is queued or scheduled for a new notification, the original's
	// current status for a duplicate.
	Status NotificationStatus
	// Duplicate: the key named a notification accepted at OriginalAcceptedAt.
	Duplicate          bool
	OriginalAcceptedAt time.Time
	// IdempotencyKey is the key sent: the caller's, or the one the client generated.
	IdempotencyKey string
}

// CreateNotification is POST /v1/notifications. Without req.IdempotencyKey the
// client generates one, sent on every retry of this call (see the package doc).
func (c *Client) CreateNotification(ctx context.Context, req CreateNotificationRequest) (*NotificationSent, error) {
	if req.IdempotencyKey == nil {
		req.IdempotencyKey = Ptr(NewIdempotencyKey())
	}
	var raw struct {
		NotificationID     string             `json:"notification_id"`
		Status             NotificationStatus `json:"status"`
		Dedup              string             `json:"dedup"`
		OriginalAcceptedAt time.Time          `json:"original_accepted_at"`
	}
	status, err := c.do(ctx, idempotent(post("/v1/notifications", req)), &raw)
	if err != nil {
		return nil, err
	}
	return &NotificationSent{NotificationID: raw.NotificationID, Status: raw.Status,
		Duplicate: status == http.StatusOK || raw.Dedup == "duplicate", OriginalAcceptedAt: raw.OriginalAcceptedAt,
		IdempotencyKey: *req.IdempotencyKey}, nil
}

// FindNotifications is GET /v1/notifications (the support view, by dedup key).
func (c *Client) FindNotifications(ctx context.Context, params *FindNotificationsParams) (*SupportNotificationList, error) {
	return doJSON[SupportNotificationList](ctx, c, get("/v1/notifications", queryOf(params)))
}

// GetNotification is GET /v1/notifications/{id}: its status overall and per channel.
func (c *Client) GetNotification(ctx context.Context, notificationID string) (*Notification, error) {
	return doJSON[Notification](ctx, c, get(pathOf("v1", "notifications", notificationID), nil))
}

// CancelNotification is DELETE /v1/notifications/{id} (a scheduled or deferred one).
func (c *Client) CancelNotification(ctx context.Context, notificationID string) (*Notification, error) {
	return doJSON[Notification](ctx, c, del(pathOf("v1", "notifications", notificationID)))
}

// ---- dead letters

// ListDeadLetters is GET /v1/dead-letters (one page; AllDeadLetters walks them all).
func (c *Client) ListDeadLetters(ctx context.Context, params *ListDeadLettersParams) (*DeadLetterList, error) {
	return doJSON[DeadLetterList](ctx, c, get("/v1/dead-letters", queryOf(params)))
}

// BulkRedriveDeadLetters is POST /v1/dead-letters/redrive. Redriving a dead
// letter twice starts one redrive (its workflow id is the dead letter's).
func (c *Client) BulkRedriveDeadLetters(ctx context.Context, req BulkRedriveRequest) (*BulkRedriveResult, error) {
	return doJSON[BulkRedriveResult](ctx, c, idempotent(post("/v1/dead-letters/redrive", req)))
}

// RedriveDeadLetter is POST /v1/dead-letters/{id}/redrive.
func (c *Client) RedriveDeadLetter(ctx context.Context, deadLetterID int64) (*RedriveStarted, error) {
	return doJSON[RedriveStarted](ctx, c, idempotent(post(pathOf("v1", "dead-letters", strconv.FormatInt(deadLetterID, 10), "redrive"), nil)))
}

// ---- users

// PutUser is PUT /v1/users/{id}: create or replace a user's profile.
func (c *Client) PutUser(ctx context.Context, userID string, req PutUserRequest) (*User, error) {
	return doJSON[User](ctx, c, put(pathOf("v1", "users", userID), req))
}

// UsersImported answers ImportUsers: the lines read and the distinct users
// created, updated and unchanged (the document's UserImportResult).
type UsersImported = UserImportResult

// ImportUsers is POST /v1/users/import: users (profile, locale, timezone,
// preferences, topics, push tokens) streamed as CSV or NDJSON, created or updated
// in one go; the first bad line is a 400 naming it and nothing is stored. body is
// retried like UploadList's. Importing the same file twice changes nothing.
func (c *Client) ImportUsers(ctx context.Context, format ListFormat, body io.Reader) (*UsersImported, error) {
	return doJSON[UsersImported](ctx, c, call{method: http.MethodPost, path: "/v1/users/import",
		stream: body, contentType: string(format), noTimeout: true, idempotent: true})
}

// GetUser is GET /v1/users/{id}.
func (c *Client) GetUser(ctx context.Context, userID string) (*User, error) {
	return doJSON[User](ctx, c, get(pathOf("v1", "users", userID), nil))
}

// DeleteUser is DELETE /v1/users/{id}: erases the user (docs/erasure.md) and
// says what was deleted and anonymised per table.
func (c *Client) DeleteUser(ctx context.Context, userID string) (*UserErasure, error) {
	return doJSON[UserErasure](ctx, c, del(pathOf("v1", "users", userID)))
}

// GetUsage is GET /v1/usage: the tenant's rows, bytes and oldest row per table.
func (c *Client) GetUsage(ctx context.Context) (*Usage, error) {
	return doJSON[Usage](ctx, c, get(pathOf("v1", "usage"), nil))
}

// ListUserNotifications is GET /v1/users/{id}/notifications (the support view).
func (c *Client) ListUserNotifications(ctx context.Context, userID string, params *ListUserNotificationsParams) (*SupportNotificationList, error) {
	return doJSON[SupportNotificationList](ctx, c, get(pathOf("v1", "users", userID, "notifications"), queryOf(params)))
}

// MintUserToken is POST /v1/users/{id}/token: a token for that user's inbox.
func (c *Client) MintUserToken(ctx context.Context, userID string, req MintUserTokenRequest) (*UserToken, error) {
	return doJSON[UserToken](ctx, c, post(pathOf("v1", "users", userID, "token"), req))
}

// RevokeUserTokens is DELETE /v1/users/{id}/tokens.
func (c *Client) RevokeUserTokens(ctx context.Context, userID string) error {
	_, err := c.do(ctx, del(pathOf("v1", "users", userID, "tokens")), nil)
	return err
}

// ---- audit

// ListAuditLog is GET /v1/audit-log (one page; AllAuditLog walks them all).
func (c *Client) ListAuditLog(ctx context.Context, params *ListAuditLogParams) (*AuditLogPage, error) {
	return doJSON[AuditLogPage](ctx, c, get("/v1/audit-log", queryOf(params)))
}

// ---- inbox (a tenant key or the user's token)

// ListInbox is GET /v1/users/{id}/inbox (one page; AllInbox walks them all).
func (c *Client) ListInbox(ctx context.Context, userID string, params *ListInboxParams) (*InboxPage, error) {
	return doJSON[InboxPage](ctx, c, get(pathOf("v1", "users", userID, "inbox"), queryOf(params)))
}

// GetInboxCounts is GET /v1/users/{id}/inbox/counts.
func (c *Client) GetInboxCounts(ctx context.Context, userID string) (*InboxCountsAnswer, error) {
	return doJSON[InboxCountsAnswer](ctx, c, get(pathOf("v1", "users", userID, "inbox", "counts"), nil))
}

// MarkInboxAllRead is POST /v1/users/{id}/inbox/read-all.
func (c *Client) MarkInboxAllRead(ctx context.Context, userID string) (*InboxMarkAll, error) {
	return doJSON[InboxMarkAll](ctx, c, idempotent(post(pathOf("v1", "users", userID, "inbox", "read-all"), nil)))
}

// MarkInboxAllSeen is POST /v1/users/{id}/inbox/seen-all.
func (c *Client) MarkInboxAllSeen(ctx context.Context, userID string) (*InboxMarkAll, error) {
	return doJSON[InboxMarkAll](ctx, c, idempotent(post(pathOf("v1", "users", userID, "inbox", "seen-all"), nil)))
}

// InboxAction is what MarkInboxItem does to an item.
type InboxAction string

// The inbox actions.
const (
	InboxSeen      InboxAction = "seen"
	InboxRead      InboxAction = "read"
	InboxUnread    InboxAction = "unread"
	InboxArchive   InboxAction = "archive"
	InboxUnarchive InboxAction = "unarchive"
)

// MarkInboxItem is POST /v1/users/{id}/inbox/{notification_id}/{action}. Every
// action is idempotent (doing it twice keeps the first times).
func (c *Client) MarkInboxItem(ctx context.Context, userID, notificationID string, action InboxAction) (*InboxItemWithCounts, error) {
	return doJSON[InboxItemWithCounts](ctx, c, idempotent(post(pathOf("v1", "users", userID, "inbox", notificationID, string(action)), nil)))
}

// GetInboxSettings is GET /v1/inbox/settings.
func (c *Client) GetInboxSettings(ctx context.Context) (*InboxSettings, error) {
	return doJSON[InboxSettings](ctx, c, get("/v1/inbox/settings", nil))
}

// PutInboxSettings is PUT /v1/inbox/settings.
func (c *Client) PutInboxSettings(ctx context.Context, req PutInboxSettingsRequest) (*InboxSettings, error) {
	return doJSON[InboxSettings](ctx, c, put("/v1/inbox/settings", req))
}

// RotateInboxSecret is POST /v1/inbox/secret: a new secret for user hashes.
func (c *Client) RotateInboxSecret(ctx context.Context) (*InboxSecret, error) {
	return doJSON[InboxSecret](ctx, c, post("/v1/inbox/secret", nil))
}

// InboxSession is POST /v1/inbox/session (no key: the user hash authenticates).
// Idempotent: another call mints another token for the same user.
func (c *Client) InboxSession(ctx context.Context, req InboxSessionRequest) (*UserToken, error) {
	return doJSON[UserToken](ctx, c, idempotent(post("/v1/inbox/session", req)))
}

// InboxComponent is GET /inbox/herald-inbox.js: the <herald-inbox> web component.
func (c *Client) InboxComponent(ctx context.Context) ([]byte, error) {
	return c.raw(ctx, get("/inbox/herald-inbox.js", nil))
}

// InboxDemo is GET /inbox/demo: the component's demo page (HTML).
func (c *Client) InboxDemo(ctx context.Context) ([]byte, error) {
	return c.raw(ctx, get("/inbox/demo", nil))
}

// ---- API keys

// ListAPIKeys is GET /v1/api-keys.
func (c *Client) ListAPIKeys(ctx context.Context) (*APIKeyList, error) {
	return doJSON[APIKeyList](ctx, c, get("/v1/api-keys", nil))
}

// CreateAPIKey is POST /v1/api-keys: the key is in the answer only.
func (c *Client) CreateAPIKey(ctx context.Context, req CreateAPIKeyRequest) (*CreatedAPIKey, error) {
	return doJSON[CreatedAPIKey](ctx, c, post("/v1/api-keys", req))
}

// RevokeAPIKey is DELETE /v1/api-keys/{id}.
func (c *Client) RevokeAPIKey(ctx context.Context, apiKeyID string) (*APIKey, error) {
	return doJSON[APIKey](ctx, c, del(pathOf("v1", "api-keys", apiKeyID)))
}

// ---- webhook endpoints

// ListWebhookEndpoints is GET /v1/webhook-endpoints.
func (c *Client) ListWebhookEndpoints(ctx context.Context) (*WebhookEndpointList, error) {
	return doJSON[WebhookEndpointList](ctx, c, get("/v1/webhook-endpoints", nil))
}

// CreateWebhookEndpoint is POST /v1/webhook-endpoints: the secret is in the answer only.
func (c *Client) CreateWebhookEndpoint(ctx context.Context, req WebhookEndpointRequest) (*WebhookEndpointWithSecret, error) {
	return doJSON[WebhookEndpointWithSecret](ctx, c, post("/v1/webhook-endpoints", req))
}

// GetWebhookEndpoint is GET /v1/webhook-endpoints/{id}.
func (c *Client) GetWebhookEndpoint(ctx context.Context, endpointID string) (*WebhookEndpoint, error) {
	return doJSON[WebhookEndpoint](ctx, c, get(pathOf("v1", "webhook-endpoints", endpointID), nil))
}

// UpdateWebhookEndpoint is PATCH /v1/webhook-endpoints/{id}.
func (c *Client) UpdateWebhookEndpoint(ctx context.Context, endpointID string, req WebhookEndpointRequest) (*WebhookEndpoint, error) {
	return doJSON[WebhookEndpoint](ctx, c, call{method: http.MethodPatch, path: pathOf("v1", "webhook-endpoints", endpointID), body: req, idempotent: true})
}

// DeleteWebhookEndpoint is DELETE /v1/webhook-endpoints/{id}.
func (c *Client) DeleteWebhookEndpoint(ctx context.Context, endpointID string) error {
	_, err := c.do(ctx, del(pathOf("v1", "webhook-endpoints", endpointID)), nil)
	return err
}

// RotateWebhookSecret is POST /v1/webhook-endpoints/{id}/rotate-secret.
func (c *Client) RotateWebhookSecret(ctx context.Context, endpointID string) (*WebhookEndpointWithSecret, error) {
	return doJSON[WebhookEndpointWithSecret](ctx, c, post(pathOf("v1", "webhook-endpoints", endpointID, "rotate-secret"), nil))
}

// ListWebhookAttempts is GET /v1/webhook-endpoints/{id}/attempts (one page;
// AllWebhookAttempts walks them all).
func (c *Client) ListWebhookAttempts(ctx context.Context, endpointID string, params *ListWebhookAttemptsParams) (*WebhookAttemptPage, error) {
	return doJSON[WebhookAttemptPage](ctx, c, get(pathOf("v1", "webhook-endpoints", endpointID, "attempts"), queryOf(params)))
}

// ReplayWebhookMessages is POST /v1/webhook-endpoints/{id}/replay.
func (c *Client) ReplayWebhookMessages(ctx context.Context, endpointID string, req ReplayWebhookMessagesRequest) (*WebhookReplayed, error) {
	return doJSON[WebhookReplayed](ctx, c, post(pathOf("v1", "webhook-endpoints", endpointID, "replay"), req))
}

// ReplayWebhookMessage is POST /v1/webhook-endpoints/{id}/messages/{message_id}/replay.
func (c *Client) ReplayWebhookMessage(ctx context.Context, endpointID, messageID string) (*WebhookReplayed, error) {
	return doJSON[WebhookReplayed](ctx, c, post(pathOf("v1", "webhook-endpoints", endpointID, "messages", messageID, "replay"), nil))
}

// ---- providers

// ListProviders is GET /v1/providers.
func (c *Client) ListProviders(ctx context.Context) (*ProviderConfigList, error) {
	return doJSON[ProviderConfigList](ctx, c, get("/v1/providers", nil))
}

// PutProvider is PUT /v1/providers/{channel}.
func (c *Client) PutProvider(ctx context.Context, channel ChannelName, req PutProviderConfigRequest) (*ProviderConfig, error) {
	return doJSON[ProviderConfig](ctx, c, put(pathOf("v1", "providers", string(channel)), req))
}

// DeleteProvider is DELETE /v1/providers/{channel}/{provider}.
func (c *Client) DeleteProvider(ctx context.Context, channel ChannelName, provider ProviderName) error {
	_, err := c.do(ctx, del(pathOf("v1", "providers", string(channel), string(provider))), nil)
	return err
}

// PutPushToken is PUT /v1/users/{id}/push-tokens.
func (c *Client) PutPushToken(ctx context.Context, userID string, req PutPushTokenRequest) (*PushToken, error) {
	return doJSON[PushToken](ctx, c, put(pathOf("v1", "users", userID, "push-tokens"), req))
}

// ListPushTokens is GET /v1/users/{id}/push-tokens (one page; AllPushTokens walks them all).
func (c *Client) ListPushTokens(ctx context.Context, userID string, params *ListPushTokensParams) (*PushTokenList, error) {
	return doJSON[PushTokenList](ctx, c, get(pathOf("v1", "users", userID, "push-tokens"), queryOf(params)))
}

// DeletePushToken is DELETE /v1/users/{id}/push-tokens/{token}.
func (c *Client) DeletePushToken(ctx context.Context, userID, token string) error {
	_, err := c.do(ctx, del(pathOf("v1", "users", userID, "push-tokens", token)), nil)
	return err
}

// ListSandboxMessages is GET /v1/sandbox/messages (dev stacks only).
func (c *Client) ListSandboxMessages(ctx context.Context, params *ListSandboxMessagesParams) (*SandboxMessageList, error) {
	return doJSON[SandboxMessageList](ctx, c, get("/v1/sandbox/messages", queryOf(params)))
}

// CreatePreferencesLink is POST /v1/users/{id}/inbox/preferences-link: the
// user's signed link to the hosted preference centre (its url).
func (c *Client) CreatePreferencesLink(ctx context.Context, userID string) (*CreatePreferencesLink200JSONResponseBody, error) {
	return doJSON[CreatePreferencesLink200JSONResponseBody](ctx, c, idempotent(post(pathOf("v1", "users", userID, "inbox", "preferences-link"), nil)))
}

// ---- suppressions

// ListSuppressions is GET /v1/suppressions (one page; AllSuppressions walks them all).
func (c *Client) ListSuppressions(ctx context.Context, params *ListSuppressionsParams) (*SuppressionList, error) {
	return doJSON[SuppressionList](ctx, c, get("/v1/suppressions", queryOf(params)))
}

// GetSuppression is GET /v1/suppressions/{address}: the entry, a 404 *Error when
// the address is not listed.
func (c *Client) GetSuppression(ctx context.Context, address string) (*Suppression, error) {
	return doJSON[Suppression](ctx, c, get(pathOf("v1", "suppressions", address), nil))
}

// PutSuppression is PUT /v1/suppressions/{address}: lists the address (reason
// manual), or answers its existing entry.
func (c *Client) PutSuppression(ctx context.Context, address string, req PutSuppressionJSONRequestBody) (*Suppression, error) {
	return doJSON[Suppression](ctx, c, put(pathOf("v1", "suppressions", address), req))
}

// DeleteSuppression is DELETE /v1/suppressions/{address}.
func (c *Client) DeleteSuppression(ctx context.Context, address string) error {
	_, err := c.do(ctx, del(pathOf("v1", "suppressions", address)), nil)
	return err
}

// ---- templates

// ListTemplates is GET /v1/templates (one page; AllTemplates walks them all).
func (c *Client) ListTemplates(ctx context.Context, params *ListTemplatesParams) (*TemplateList, error) {
	return doJSON[TemplateList](ctx, c, get("/v1/templates", queryOf(params)))
}

// PreviewTemplate is POST /v1/templates/{id}/preview (renders, changes nothing).
func (c *Client) PreviewTemplate(ctx context.Context, templateID string, req PreviewTemplateRequest) (*TemplatePreview, error) {
	return doJSON[TemplatePreview](ctx, c, idempotent(post(pathOf("v1", "templates", templateID, "preview"), req)))
}

// PutTemplate is PUT /v1/templates/{id}: a new version when the content changed.
func (c *Client) PutTemplate(ctx context.Context, templateID string, req PutTemplateRequest) (*Template, error) {
	return doJSON[Template](ctx, c, put(pathOf("v1", "templates", templateID), req))
}

// GetTemplate is GET /v1/templates/{id} (the latest version, or params.Version).
func (c *Client) GetTemplate(ctx context.Context, templateID string, params *GetTemplateParams) (*Template, error) {
	return doJSON[Template](ctx, c, get(pathOf("v1", "templates", templateID), queryOf(params)))
}

// DeleteTemplate is DELETE /v1/templates/{id}.
func (c *Client) DeleteTemplate(ctx context.Context, templateID string) error {
	_, err := c.do(ctx, del(pathOf("v1", "templates", templateID)), nil)
	return err
}

// ---- flows

// PutFlow is PUT /v1/flows/{id}: the definition as the flow's next version.
func (c *Client) PutFlow(ctx context.Context, flowID string, req FlowDefinition) (*Flow, error) {
	return doJSON[Flow](ctx, c, put(pathOf("v1", "flows", flowID), req))
}

// GetFlow is GET /v1/flows/{id} (the latest version, or params.Version).
func (c *Client) GetFlow(ctx context.Context, flowID string, params *GetFlowParams) (*Flow, error) {
	return doJSON[Flow](ctx, c, get(pathOf("v1", "flows", flowID), queryOf(params)))
}

// ListFlows is GET /v1/flows (one page; AllFlows walks them all).
func (c *Client) ListFlows(ctx context.Context, params *ListFlowsParams) (*FlowList, error) {
	return doJSON[FlowList](ctx, c, get("/v1/flows", queryOf(params)))
}

// DeleteFlow is DELETE /v1/flows/{id}.
func (c *Client) DeleteFlow(ctx context.Context, flowID string) error {
	_, err := c.do(ctx, del(pathOf("v1", "flows", flowID)), nil)
	return err
}

// ---- preferences and settings

// PutUserPreferences is PUT /v1/users/{id}/preferences.
func (c *Client) PutUserPreferences(ctx context.Context, userID string, req Preferences) (*UserPreferences, error) {
	return doJSON[UserPreferences](ctx, c, put(pathOf("v1", "users", userID, "preferences"), req))
}

// GetUserPreferences is GET /v1/users/{id}/preferences.
func (c *Client) GetUserPreferences(ctx context.Context, userID string) (*UserPreferences, error) {
	return doJSON[UserPreferences](ctx, c, get(pathOf("v1", "users", userID, "preferences"), nil))
}

// PutPreferenceDefaults is PUT /v1/preferences/defaults.
func (c *Client) PutPreferenceDefaults(ctx context.Context, req Preferences) (*Preferences, error) {
	return doJSON[Preferences](ctx, c, put("/v1/preferences/defaults", req))
}

// GetPreferenceDefaults is GET /v1/preferences/defaults.
func (c *Client) GetPreferenceDefaults(ctx context.Context) (*Preferences, error) {
	return doJSON[Preferences](ctx, c, get("/v1/preferences/defaults", nil))
}

// PutSettings is PUT /v1/settings.
func (c *Client) PutSettings(ctx context.Context, req PutSettingsRequest) (*TenantSettings, error) {
	return doJSON[TenantSettings](ctx, c, put("/v1/settings", req))
}

// GetSettings is GET /v1/settings.
func (c *Client) GetSettings(ctx context.Context) (*TenantSettings, error) {
	return doJSON[TenantSettings](ctx, c, get("/v1/settings", nil))
}

// ---- operator (the operator key)

// GetTenantLimits is GET /v1/operator/tenants/{id}/limits.
func (c *Client) GetTenantLimits(ctx context.Context, tenantID string) (*TenantLimitsView, error) {
	return doJSON[TenantLimitsView](ctx, c, get(pathOf("v1", "operator", "tenants", tenantID, "limits"), nil))
}

// PutTenantLimits is PUT /v1/operator/tenants/{id}/limits.
func (c *Client) PutTenantLimits(ctx context.Context, tenantID string, req TenantLimits) (*TenantLimitsView, error) {
	return doJSON[TenantLimitsView](ctx, c, put(pathOf("v1", "operator", "tenants", tenantID, "limits"), req))
}

// ---- unsubscribe (the recipient's signed link; no key)

// OneClickUnsubscribe is POST /v1/unsubscribe?token=…, the RFC 8058 one-click
// form a mail client posts.
func (c *Client) OneClickUnsubscribe(ctx context.Context, token string) (*UnsubscribeResult, error) {
	cl := idempotent(call{method: http.MethodPost, path: "/v1/unsubscribe", query: url.Values{"token": {token}},
		contentType: "application/x-www-form-urlencoded"})
	cl.stream = strings.NewReader("List-Unsubscribe=One-Click")
	return doJSON[UnsubscribeResult](ctx, c, cl)
}

// UnsubscribePage is GET /v1/unsubscribe?token=…: the confirmation page (HTML).
func (c *Client) UnsubscribePage(ctx context.Context, token string) ([]byte, error) {
	return c.raw(ctx, get("/v1/unsubscribe", url.Values{"token": {token}}))
}

// ---- campaigns

// CreateCampaign is POST /v1/campaigns. Without req.CampaignID or
// req.IdempotencyKey the client generates an idempotency key (the campaign id is
// derived from it), so a retried call starts one campaign.
func (c *Client) CreateCampaign(ctx context.Context, req CreateCampaignRequest) (*CampaignAccepted, error) {
	if req.CampaignID == nil && req.IdempotencyKey == nil {
		req.IdempotencyKey = Ptr(NewIdempotencyKey())
	}
	return doJSON[CampaignAccepted](ctx, c, idempotent(post("/v1/campaigns", req)))
}

// ListCampaigns is GET /v1/campaigns (one page; AllCampaigns walks them all).
func (c *Client) ListCampaigns(ctx context.Context, params *ListCampaignsParams) (*CampaignPage, error) {
	return doJSON[CampaignPage](ctx, c, get("/v1/campaigns", queryOf(params)))
}

// GetCampaign is GET /v1/campaigns/{id}: status, counts per channel per outcome, rate, ETA.
func (c *Client) GetCampaign(ctx context.Context, campaignID string) (*Campaign, error) {
	return doJSON[Campaign](ctx, c, get(pathOf("v1", "campaigns", campaignID), nil))
}

// PauseCampaign is POST /v1/campaigns/{id}/pause.
func (c *Client) PauseCampaign(ctx context.Context, campaignID string) (*Campaign, error) {
	return doJSON[Campaign](ctx, c, idempotent(post(pathOf("v1", "campaigns", campaignID, "pause"), nil)))
}

// ResumeCampaign is POST /v1/campaigns/{id}/resume.
func (c *Client) ResumeCampaign(ctx context.Context, campaignID string) (*Campaign, error) {
	return doJSON[Campaign](ctx, c, idempotent(post(pathOf("v1", "campaigns", campaignID, "resume"), nil)))
}

// CancelCampaign is POST /v1/campaigns/{id}/cancel.
func (c *Client) CancelCampaign(ctx context.Context, campaignID string) (*Campaign, error) {
	return doJSON[Campaign](ctx, c, idempotent(post(pathOf("v1", "campaigns", campaignID, "cancel"), nil)))
}

// ListFormat is the format of a recipient list (or a user import).
type ListFormat string

// The formats uploads take.
const (
	CSV    ListFormat = "text/csv"
	NDJSON ListFormat = "application/x-ndjson"
)

// UploadList is POST /v1/lists: body streams to Herald as it is read (any size).
// A 429 or 503 is retried only when body is an io.Seeker (a file), rewound first.
func (c *Client) UploadList(ctx context.Context, format ListFormat, body io.Reader, params *UploadListParams) (*RecipientList, error) {
	return doJSON[RecipientList](ctx, c, call{method: http.MethodPost, path: "/v1/lists", query: queryOf(params),
		stream: body, contentType: string(format), noTimeout: true})
}

// GetList is GET /v1/lists/{id}.
func (c *Client) GetList(ctx context.Context, listID string) (*RecipientList, error) {
	return doJSON[RecipientList](ctx, c, get(pathOf("v1", "lists", listID), nil))
}

// DeleteList is DELETE /v1/lists/{id}.
func (c *Client) DeleteList(ctx context.Context, listID string) error {
	_, err := c.do(ctx, del(pathOf("v1", "lists", listID)), nil)
	return err
}

// ---- topics

// AddTopicSubscribers is POST /v1/topics/{topic}/subscribers (adding a
// subscriber twice keeps one).
func (c *Client) AddTopicSubscribers(ctx context.Context, topic string, userIDs []string) (*TopicSubscribersAdded, error) {
	return doJSON[TopicSubscribersAdded](ctx, c, idempotent(post(pathOf("v1", "topics", topic, "subscribers"), AddTopicSubscribersJSONBody{UserIds: userIDs})))
}

// ListTopicSubscribers is GET /v1/topics/{topic}/subscribers (one page;
// AllTopicSubscribers walks them all).
func (c *Client) ListTopicSubscribers(ctx context.Context, topic string, params *ListTopicSubscribersParams) (*TopicSubscriberPage, error) {
	return doJSON[TopicSubscriberPage](ctx, c, get(pathOf("v1", "topics", topic, "subscribers"), queryOf(params)))
}

// RemoveTopicSubscriber is DELETE /v1/topics/{topic}/subscribers/{user_id}.
func (c *Client) RemoveTopicSubscriber(ctx context.Context, topic, userID string) error {
	_, err := c.do(ctx, del(pathOf("v1", "topics", topic, "subscribers", userID)), nil)
	return err
}
