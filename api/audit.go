package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/webhooks"
)

// The audit log: every change a tenant makes through the API is recorded by one
// middleware, audited(action), set on each mutating route where its room
// registers it. After the handler answered with a success it appends {API key id, time, action, target
// (the path parameters), status, details} to audit_log. details is the request's
// fields with every secret removed (redact), so "what changed" is answerable
// without ever storing a credential.
//
// The entry is written ahead of the change, as pending (status 0), and
// completed with the answer's status after the handler: a change that was
// refused (4xx) leaves no entry, one that failed (5xx) keeps its status, as it
// may have been applied in part. A crash between the change and the answer
// leaves the pending entry — the change may or may not have happened — so no
// change is ever applied without an entry. If the entry cannot be written, the
// change is not attempted (503). The handlers' store calls each own their
// transaction; writing ahead avoids threading one through every handler.

// Audit actions.
const (
	auditTemplatePut           = "template.put"
	auditTemplateDelete        = "template.delete"
	auditPreferencesPut        = "preferences.put"
	auditPreferenceDefaults    = "preference_defaults.put"
	auditSettingsPut           = "settings.put"
	auditProviderPut           = "provider.put"
	auditProviderDelete        = "provider.delete"
	auditPushTokenPut          = "push_token.put"
	auditPushTokenDelete       = "push_token.delete"
	auditNotificationCancel    = "notification.cancel"
	auditDeadLetterRedrive     = "dead_letter.redrive"
	auditDeadLetterBulkRedrive = "dead_letter.bulk_redrive"
	auditAPIKeyCreate          = "api_key.create"
	auditAPIKeyRevoke          = "api_key.revoke"
	auditUserPut               = "user.put"
	auditTenantLimitsPut       = "tenant_limits.put"
	auditCampaignCreate        = "campaign.create"
	auditCampaignPause         = "campaign.pause"
	auditCampaignResume        = "campaign.resume"
	auditCampaignCancel        = "campaign.cancel"
	auditListCreate            = "list.create"
	auditListDelete            = "list.delete"
	auditTopicSubscribe        = "topic.subscribe"
	auditTopicUnsubscribe      = "topic.unsubscribe"
	auditInboxSettingsPut      = "inbox_settings.put"
	auditInboxSecretRotate     = "inbox_secret.rotate"
	auditUserTokensRevoke      = "user_tokens.revoke"
	auditUserTokenMint         = "user_token.mint"
	auditWebhookEndpointCreate = "webhook_endpoint.create"
	auditWebhookEndpointUpdate = "webhook_endpoint.update"
	auditWebhookEndpointDelete = "webhook_endpoint.delete"
	auditWebhookSecretRotate   = "webhook_endpoint.rotate_secret"
	auditWebhookReplay         = "webhook_endpoint.replay"
	auditFlowPut               = "flow.put"
	auditFlowDelete            = "flow.delete"
	auditSuppressionPut        = "suppression.put"
	auditSuppressionDelete     = "suppression.delete"
	auditUsersImport           = "users.import"
	auditDigestFlush           = "digest.flush"
	auditUserDelete            = "user.delete"
)

// auditOperatorKeyID stands for the operator key in api_key_id.
const auditOperatorKeyID = "operator"

// auditPreferenceCentreKeyID stands in api_key_id for a user saving their own
// preferences on the hosted preference centre (a signed link, no API key).
const auditPreferenceCentreKeyID = "preference-centre"

// The operator CLI (cmd/herald) records its changes in the same log, under
// AuditOperatorCLIKeyID, with these actions.
const (
	AuditOperatorCLIKeyID = "operator-cli"
	AuditTenantCreate     = "tenant.create"
	AuditTenantLimitsPut  = auditTenantLimitsPut
	AuditAPIKeyCreate     = auditAPIKeyCreate
	AuditAPIKeyRevoke     = auditAPIKeyRevoke
)

// maxAuditBody is how much of a request body the audit reads; a larger body
// (a big template) is recorded by its field names only.
const maxAuditBody = 256 << 10

// maxAuditDetails bounds the stored details; over it, the field names only.
const maxAuditDetails = 16 << 10

// auditMode says how much of the body an action records.
type auditMode int

const (
	// auditFields: the body's fields and values, secrets removed.
	auditFields auditMode = iota
	// auditFieldNames: only which fields were set (personal data such as a user's
	// email address stays out of the log).
	auditFieldNames
	// auditUpload: an upload (a recipient list): only its size, and the body is
	// not read by the audit at all.
	auditUpload
)

// audited records the request as action: pending before the handler runs, with
// its status after (see the top of the file).
func (m *middleware) audited(action string, routeMode auditMode) gin.HandlerFunc {
	return func(c *gin.Context) {
		mode := routeMode
		var body []byte
		if mode != auditUpload && c.Request.Body != nil && c.Request.ContentLength != 0 {
			raw, err := io.ReadAll(io.LimitReader(c.Request.Body, maxAuditBody+1))
			if err != nil {
				m.abort(c, &httpError{Status: http.StatusBadRequest, Code: "unreadable_body", Message: "could not read request body"})
				return
			}
			// The handler reads the same bytes (and applies its own limit).
			c.Request.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(raw), c.Request.Body), c.Request.Body}
			if len(raw) <= maxAuditBody {
				body = raw
			} else {
				mode = auditFieldNames // too big to keep; the names are enough
				body = nil
			}
		}
		tenantID, keyID := "", ""
		if t, ok := c.Get(tenantKey); ok {
			tenantID, keyID = t.(store.Tenant).ID, t.(store.Tenant).APIKeyID
		} else if id := c.Param("tenant_id"); id != "" { // the operator API
			tenantID, keyID = id, auditOperatorKeyID
		}
		if tenantID == "" {
			c.Next()
			return
		}
		details := auditDetails(body, mode)
		if mode == auditUpload {
			details, _ = json.Marshal(map[string]any{"content_type": c.ContentType(), "bytes": c.Request.ContentLength})
		}
		e := store.AuditEntry{APIKeyID: keyID, Action: action, Target: auditTarget(c), Details: details}
		id, err := m.store.BeginAudit(c.Request.Context(), tenantID, e)
		if errors.Is(err, herald.ErrNotFound) {
			c.Next() // the operator named no tenant that exists: nothing to change, the handler answers 404
			return
		}
		if err != nil {
			m.log.Error("writing the audit log failed; the change was not attempted", "tenant_id", tenantID, "action", action, "error", err)
			c.Header("Retry-After", "1")
			m.abort(c, &httpError{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable",
				Message: "the change could not be recorded in the audit log, so it was not made; retry"})
			return
		}
		c.Next()
		status := c.Writer.Status()
		// Finish even if the client went away: the change is done either way.
		ctx := context.WithoutCancel(c.Request.Context())
		if err := m.store.FinishAudit(ctx, tenantID, id, status, status < 400 || status >= 500); err != nil {
			m.log.Error("completing the audit log entry failed; it stays pending", "tenant_id", tenantID, "action", action, "id", id, "error", err)
		}
	}
}

// auditTarget names what was changed: the route's parameters, in route order
// ("template_id=welcome"); a push token and a suppressed address by their
// hash (the hash of the address as given: GET /v1/suppressions/{address} shows
// the entry).
func auditTarget(c *gin.Context) string {
	parts := make([]string, 0, len(c.Params))
	for _, p := range c.Params {
		if p.Key == "tenant_id" {
			continue
		}
		v := p.Value
		if p.Key == "token" || p.Key == "address" { // a secret; personal data
			v = redactedHash(v)
		}
		parts = append(parts, p.Key+"="+v)
	}
	return strings.Join(parts, " ")
}

// auditDetails is {"request": <the body, secrets removed>} (or {"fields": [...]}
// for auditFieldNames, or a body that does not fit maxAuditDetails).
func auditDetails(body []byte, mode auditMode) json.RawMessage {
	out := auditDetailsJSON(body, mode)
	// PostgreSQL's jsonb holds no NUL character; such a request is refused by
	// its handler anyway, but its entry is written first.
	if bytes.Contains(out, []byte(`\u0000`)) {
		return json.RawMessage(`{}`)
	}
	return out
}

func auditDetailsJSON(body []byte, mode auditMode) json.RawMessage {
	if len(bytes.TrimSpace(body)) == 0 {
		return json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return json.RawMessage(`{}`)
	}
	obj, isObj := v.(map[string]any)
	names := func() json.RawMessage {
		fields := make([]string, 0, len(obj))
		for k := range obj {
			fields = append(fields, k)
		}
		sort.Strings(fields)
		out, _ := json.Marshal(map[string]any{"fields": fields})
		return out
	}
	if mode == auditFieldNames && isObj {
		return names()
	}
	out, err := json.Marshal(map[string]any{"request": redact(v)})
	if err != nil || len(out) > maxAuditDetails {
		if isObj {
			return names()
		}
		return json.RawMessage(`{}`)
	}
	return out
}

// secretKey matches the field names whose values are secrets: provider
// credentials, passwords, tokens, keys.
var secretKey = regexp.MustCompile(`(?i)(credential|secret|password|passwd|token|private|api_?key|auth|signing)`)

// isSecretKey: a public id ("api_key_id") is not a secret.
func isSecretKey(k string) bool {
	return secretKey.MatchString(k) && !strings.HasSuffix(strings.ToLower(k), "_id")
}

// redact replaces every value under a secret-looking key: a whole credentials
// object becomes "[redacted]"; a push token (an identifier, not a password) its
// hash, so the log can still tell two tokens apart.
func redact(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			switch {
			case strings.EqualFold(k, "token"):
				if s, ok := e.(string); ok {
					out[k] = redactedHash(s)
					continue
				}
				out[k] = "[redacted]"
			case isSecretKey(k):
				out[k] = "[redacted]"
			case strings.EqualFold(k, "url"): // a webhook endpoint's: its path and query may hold a secret
				if s, ok := e.(string); ok {
					out[k] = webhooks.RedactURL(s)
					continue
				}
				out[k] = redact(e)
			default:
				out[k] = redact(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = redact(e)
		}
		return out
	default:
		return v
	}
}

func redactedHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// listAuditLog is GET /v1/audit-log: newest first, filtered by action, since and
// until, keyset paginated.
func (h *accountRoom) listAuditLog(c *gin.Context) {
	var f store.AuditFilter
	f.Action = c.Query("action")
	if f.Action != "" && !contains(auditActions, f.Action) {
		h.abort(c, badField("action", "invalid_field", "action must be one of %v", auditActions))
		return
	}
	for _, p := range []struct {
		name string
		dst  **time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := c.Query(p.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				h.abort(c, badField(p.name, "invalid_field", "%s must be an RFC 3339 time", p.name))
				return
			}
			*p.dst = &t
		}
	}
	limit, verr := pageLimit(c)
	if verr != nil {
		h.abort(c, verr)
		return
	}
	cur, ok, verr := readPageCursor(c, "audit-log")
	if verr != nil {
		h.abort(c, verr)
		return
	}
	if ok {
		t := time.UnixMicro(cur.At)
		f.Before, f.BeforeID = &t, cur.ID
	}
	f.Limit = limit + 1
	items, err := h.store.ListAudit(c.Request.Context(), tenantOf(c).ID, f)
	if err != nil {
		h.abort(c, err)
		return
	}
	items, next := onePage(items, limit, func(last store.AuditEntry) pageCursor {
		return pageCursor{List: "audit-log", At: last.At.UnixMicro(), ID: last.ID}
	})
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next})
}

// auditActions are the actions GET /v1/audit-log filters by.
var auditActions = []string{
	auditTemplatePut, auditTemplateDelete, auditPreferencesPut, auditPreferenceDefaults, auditSettingsPut,
	auditProviderPut, auditProviderDelete, auditPushTokenPut, auditPushTokenDelete, auditNotificationCancel,
	auditDeadLetterRedrive, auditDeadLetterBulkRedrive, auditAPIKeyCreate, auditAPIKeyRevoke, auditUserPut,
	auditTenantLimitsPut, auditCampaignCreate, auditCampaignPause, auditCampaignResume, auditCampaignCancel,
	auditListCreate, auditListDelete, auditTopicSubscribe, auditTopicUnsubscribe,
	auditInboxSettingsPut, auditInboxSecretRotate, auditUserTokensRevoke, auditUserTokenMint, AuditTenantCreate,
	auditWebhookEndpointCreate, auditWebhookEndpointUpdate, auditWebhookEndpointDelete, auditWebhookSecretRotate, auditWebhookReplay,
	auditFlowPut, auditFlowDelete, auditDigestFlush, auditUserDelete,
	auditSuppressionPut, auditSuppressionDelete, auditUsersImport, retention.AuditPruned,
}
