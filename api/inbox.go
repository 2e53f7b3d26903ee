package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/workflows"
)

// inboxRoom holds a user's inbox: its items and counts, its live stream
// (inbox_stream.go), the user tokens a browser opens it with (user_tokens.go),
// the tenant's inbox settings and CORS (inbox_settings.go), and the
// <herald-inbox> component (inbox_component.go).
type inboxRoom struct {
	responder
	store *store.Store
	users *userDirectory
	// auth finds a user token's tenant, and forgets revocations made here.
	auth *authenticator
	cfg  InboxConfig
	// baseURL is Config.PublicBaseURL: a page served from it is Herald's own.
	baseURL string
	// origins caches the tenants' allowed origins.
	origins *expirable.LRU[string, []string]
	// actions holds the users' inbox action buckets (InboxConfig.ActionRate).
	actions *publicLimiter
	// closing ends every open stream (closeStreams, on shutdown).
	closing   chan struct{}
	closeOnce sync.Once
	// workflows wakes flow runs waiting for an item to be seen or read.
	workflows *workflows.Client
}

// DefaultInboxActions is InboxConfig.ActionRate when zero: a person clicking
// through their feed is well under it; a script toggling read/unread to flood
// the user's event log and streams is held to it.
var DefaultInboxActions = Rate{PerSecond: 5, Burst: 30}

func newInboxRoom(r responder, st *store.Store, users *userDirectory, auth *authenticator, cfg InboxConfig, baseURL string) *inboxRoom {
	if cfg.ActionRate.PerSecond == 0 {
		cfg.ActionRate = DefaultInboxActions
	}
	return &inboxRoom{responder: r, store: st, users: users, auth: auth, cfg: cfg, baseURL: baseURL,
		origins: expirable.NewLRU[string, []string](10_000, nil, 5*time.Second),
		actions: newPublicLimiter(PublicLimits{PerIP: cfg.ActionRate, Keys: 100_000}), closing: make(chan struct{})}
}

func (h *inboxRoom) register(v1, public gin.IRouter, mw *middleware) {
	v1.POST("/users/:user_id/token", mw.audited(auditUserTokenMint, auditFields), h.mintUserToken)
	v1.DELETE("/users/:user_id/tokens", mw.audited(auditUserTokensRevoke, auditFields), h.revokeUserTokens)
	v1.GET("/users/:user_id/inbox", h.inboxCORS, h.listInbox)
	v1.GET("/users/:user_id/inbox/counts", h.inboxCORS, h.getInboxCounts)
	v1.GET("/users/:user_id/inbox/stream", h.inboxCORS, h.inboxStream)
	v1.POST("/users/:user_id/inbox/read-all", h.inboxCORS, h.limitActions, h.markAll(true))
	v1.POST("/users/:user_id/inbox/seen-all", h.inboxCORS, h.limitActions, h.markAll(false))
	v1.POST("/users/:user_id/inbox/:notification_id/:action", h.inboxCORS, h.limitActions, h.inboxAction)
	v1.GET("/inbox/settings", h.getInboxSettings)
	v1.PUT("/inbox/settings", mw.audited(auditInboxSettingsPut, auditFields), h.putInboxSettings)
	v1.POST("/inbox/secret", mw.audited(auditInboxSecretRotate, auditFields), h.rotateInboxSecret)
	public.POST("/v1/inbox/session", mw.limitPublic("inbox-session", maxBodyBytes, false), h.inboxSession)
	public.GET(inboxComponentPath, serveInboxComponent)
	public.GET(InboxDemoPath, serveInboxDemo)
}

// limitActions takes a token from the user's inbox action bucket (in process,
// like the public limits: a refusal costs a map lookup, never a database
// round trip; N replicas let N times the rate through), or answers 429
// rate_limited with Retry-After before anything is read or written.
func (h *inboxRoom) limitActions(c *gin.Context) {
	user := c.Param("user_id")
	if u, ok := tokenUser(c); ok {
		user = u
	}
	key := tenantOf(c).ID + "/" + user
	if len(key) > 300 { // an id the handler will refuse: bound the bucket key's memory anyway
		sum := sha256.Sum256([]byte(key))
		key = hex.EncodeToString(sum[:])
	}
	r := h.cfg.ActionRate
	if ok, retry := h.actions.take(key, 1, r, time.Now()); !ok {
		c.Header("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(retry)))
		h.abort(c, &httpError{Status: http.StatusTooManyRequests, Code: "rate_limited",
			Message: fmt.Sprintf("more than %g inbox actions per second for this user; retry after the Retry-After seconds", r.PerSecond)})
	}
}

// closeStreams ends every open stream.
func (h *inboxRoom) closeStreams() { h.closeOnce.Do(func() { close(h.closing) }) }

// Inbox page sizes.
const (
	defaultInboxLimit = 20
	maxInboxLimit     = 100
)

// listInbox pages a user's inbox newest first with an opaque keyset cursor, with
// the user's counts. Filters: read, seen, archived (default false: the feed;
// true: the archive) and category.
func (h *inboxRoom) listInbox(c *gin.Context) {
	tenantID, userID, ok := h.users.knownUser(c)
	if !ok {
		return
	}
	q := store.InboxQuery{TenantID: tenantID, UserID: userID, Limit: defaultInboxLimit}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxInboxLimit {
			h.abort(c, badField("limit", "invalid_field", "limit must be an integer from 1 to %d", maxInboxLimit))
			return
		}
		q.Limit = n
	}
	for _, f := range []struct {
		name string
		dst  **bool
		not  bool
	}{{"read", &q.Read, false}, {"unread", &q.Read, true}, {"seen", &q.Seen, false}, {"archived", &q.Archived, false}} {
		v := c.Query(f.name)
		if v == "" {
			continue
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			h.abort(c, badField(f.name, "invalid_field", "%s must be true or false", f.name))
			return
		}
		if f.not {
			b = !b
		}
		if *f.dst != nil && **f.dst != b {
			h.abort(c, badField(f.name, "invalid_field", "read and unread contradict each other"))
			return
		}
		*f.dst = &b
	}
	if v, ok := c.GetQuery("category"); ok {
		if len(v) > 128 {
			h.abort(c, badField("category", "invalid_field", "category must be at most 128 bytes"))
			return
		}
		q.Category = &v
	}
	if v := c.Query("cursor"); v != "" {
		cur, e := readInboxCursor(c)
		if e != nil {
			h.abort(c, e)
			return
		}
		q.After = &cur
	}
	items, more, err := h.store.ListInbox(c.Request.Context(), q)
	if err != nil {
		h.abort(c, err)
		return
	}
	counts, _, err := h.store.GetInboxCounts(c.Request.Context(), tenantID, userID)
	if err != nil {
		h.abort(c, err)
		return
	}
	if items == nil {
		items = []store.InboxItem{}
	}
	var next *string
	if more {
		last := items[len(items)-1]
		next = encodePageCursor(pageCursor{List: inboxList, ID: last.Sequence, Key: last.NotificationID})
	}
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next, "counts": counts})
}

// getInboxCounts is GET /v1/users/{user_id}/inbox/counts.
func (h *inboxRoom) getInboxCounts(c *gin.Context) {
	tenantID, userID, ok := h.users.knownUser(c)
	if !ok {
		return
	}
	counts, _, err := h.store.GetInboxCounts(c.Request.Context(), tenantID, userID)
	if err != nil {
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"counts": counts})
}

// inboxAction is POST /v1/users/{user_id}/inbox/{notification_id}/{action}
// (herald.InboxActions): the item as it now is. The read answer keeps its
// original shape (the item's fields at the top level) and adds counts.
func (h *inboxRoom) inboxAction(c *gin.Context) {
	tenantID, userID, ok := h.users.knownUser(c)
	if !ok {
		return
	}
	action := c.Param("action")
	if !slices.Contains(herald.InboxActions, action) {
		h.abort(c, notFound("route"))
		return
	}
	id := c.Param("notification_id")
	if _, _, err := ids.ParseNotificationID(id); err != nil {
		h.abort(c, badField("notification_id", "invalid_field", "notification_id is not a Herald notification id"))
		return
	}
	it, counts, err := h.store.UpdateInboxItem(c.Request.Context(), tenantID, userID, id, action)
	if errors.Is(err, herald.ErrNotFound) {
		h.abort(c, notFound("inbox item"))
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	if action == herald.InboxActionSeen || action == herald.InboxActionRead {
		h.wakeFlowWaiters(c, tenantID, userID, id, action == herald.InboxActionRead)
	}
	c.JSON(http.StatusOK, struct {
		store.InboxItem
		Counts store.InboxCounts `json:"counts"`
	}{it, counts})
}

// markAll is POST /v1/users/{user_id}/inbox/read-all and .../seen-all.
func (h *inboxRoom) markAll(read bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		tenantID, userID, ok := h.users.knownUser(c)
		if !ok {
			return
		}
		counts, changed, err := h.store.MarkAllInbox(c.Request.Context(), tenantID, userID, read)
		if err != nil {
			h.abort(c, err)
			return
		}
		if changed > 0 {
			h.wakeFlowWaiters(c, tenantID, userID, "", read)
		}
		c.JSON(http.StatusOK, gin.H{"changed": changed, "counts": counts})
	}
}

// wakeFlowWaiters signals the flow runs waiting for the user's item (every
// item when notificationID is "") to be seen or read (a flow's wait step),
// after the mark has committed. A run that registered after this read found
// the item marked itself (store.AddFlowWaiter); a signal that fails is logged,
// and the run checks the item again when its timeout ends.
func (h *inboxRoom) wakeFlowWaiters(c *gin.Context, tenantID, userID, notificationID string, read bool) {
	if h.workflows == nil {
		return
	}
	ctx := c.Request.Context()
	waiters, err := h.store.FlowWaitersOf(ctx, tenantID, userID, notificationID)
	if err != nil {
		h.log.Warn("reading the flow runs waiting on the inbox failed", "error", err)
		return
	}
	for _, w := range waiters {
		if err := h.workflows.WakeFlowWaiter(ctx, w.WorkflowID, w.RunID, w.NotificationID, true, read); err != nil {
			h.log.Warn("waking a flow run waiting on the inbox failed", "workflow_id", w.WorkflowID, "error", err)
		}
	}
}

// inboxList names the inbox's cursors: the keyset is the last item's due
// sequence and notification id.
const inboxList = "inbox"

// readInboxCursor reads ?cursor= of the inbox list.
func readInboxCursor(c *gin.Context) (store.InboxCursor, *httpError) {
	p, _, e := readPageCursor(c, inboxList)
	if e != nil {
		return store.InboxCursor{}, e
	}
	if _, _, err := ids.ParseNotificationID(p.Key); err != nil || p.ID < 0 {
		return store.InboxCursor{}, badField("cursor", "invalid_field", "cursor is not one this list returned; pass next_cursor of the previous page unchanged")
	}
	return store.InboxCursor{Sequence: p.ID, NotificationID: p.Key}, nil
}
