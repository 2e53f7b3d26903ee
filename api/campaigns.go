package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/workflows"
)

// Campaign bounds.
const (
	// maxInlineRecipients bounds audience.user_ids; larger audiences are
	// uploaded as a list (POST /v1/lists) or managed as a topic.
	maxInlineRecipients = 10_000
	// maxCampaignBodyBytes bounds POST /v1/campaigns (10,000 ids of up to 255
	// bytes, JSON-quoted, plus the data, at most contract.MaxCampaignDataBytes).
	maxCampaignBodyBytes = 3 << 20
	// reconcileEvery: GET /v1/campaigns/{id} of an unfinished campaign asks
	// Temporal whether its workflow still runs at most this often per campaign.
	reconcileEvery = 5 * time.Second
	// maxCampaignRate bounds rate_per_second (recipients per second).
	maxCampaignRate = 100_000
)

type audienceRequest struct {
	UserIDs  []string `json:"user_ids"`
	ListID   *string  `json:"list_id"`
	Topic    *string  `json:"topic"`
	AllUsers *bool    `json:"all_users"`
}

type createCampaignRequest struct {
	CampaignID     *string          `json:"campaign_id"`
	IdempotencyKey *string          `json:"idempotency_key"`
	TemplateID     *string          `json:"template_id"`
	Data           json.RawMessage  `json:"data"`
	Channels       []string         `json:"channels"`
	Audience       *audienceRequest `json:"audience"`
	SendAt         *string          `json:"send_at"`
	RatePerSecond  *float64         `json:"rate_per_second"`
}

// campaignsRoom holds the campaigns and their audiences: uploaded lists and
// topics (lists.go).
type campaignsRoom struct {
	responder
	store     *store.Store
	workflows *workflows.Client
	templates *templateCache
	settings  *settingsCache
	cfg       CampaignConfig
	// limits are the server's default tenant limits (the operator's own per
	// tenant apply over them); limiter reads the daily quota (nil: no quota).
	limits  TenantLimits
	limiter *ratelimit.Limiter
	// reconciled remembers the unfinished campaigns whose workflow was found
	// running a moment ago (reconcileEvery).
	reconciled *expirable.LRU[string, struct{}]
	// uploads counts this process's list uploads in progress per tenant.
	uploads uploadSlots
}

func newCampaignsRoom(r responder, st *store.Store, wf *workflows.Client, tc *templateCache, sc *settingsCache, cfg Config) *campaignsRoom {
	return &campaignsRoom{responder: r, store: st, workflows: wf, templates: tc, settings: sc, cfg: cfg.Campaigns,
		limits: cfg.Limits.Tenant, limiter: cfg.Limits.Limiter,
		reconciled: expirable.NewLRU[string, struct{}](10_000, nil, reconcileEvery)}
}

func (h *campaignsRoom) register(v1, public gin.IRouter, mw *middleware) {
	cost := mw.limits.Cost
	v1.POST("/campaigns", mw.limitCost("tenant-campaign-create:", cost.CampaignCreate, "campaign creations"),
		mw.audited(auditCampaignCreate, auditFields), h.createCampaign)
	v1.GET("/campaigns", h.listCampaigns)
	v1.GET("/campaigns/:campaign_id", h.getCampaign)
	v1.POST("/campaigns/:campaign_id/pause", mw.audited(auditCampaignPause, auditFields), h.controlCampaign(workflows.UpdatePause))
	v1.POST("/campaigns/:campaign_id/resume", mw.audited(auditCampaignResume, auditFields), h.controlCampaign(workflows.UpdateResume))
	v1.POST("/campaigns/:campaign_id/cancel", mw.audited(auditCampaignCancel, auditFields), h.controlCampaign(workflows.UpdateCancelCampaign))
	v1.POST("/lists", mw.limitCost("tenant-list-upload:", cost.ListUpload, "list uploads"),
		mw.audited(auditListCreate, auditUpload), h.createList)
	v1.GET("/lists/:list_id", h.getList)
	v1.DELETE("/lists/:list_id", mw.audited(auditListDelete, auditFields), h.deleteList)
	v1.POST("/topics/:topic/subscribers", mw.audited(auditTopicSubscribe, auditFields), h.addTopicSubscribers)
	v1.GET("/topics/:topic/subscribers", h.listTopicSubscribers)
	v1.DELETE("/topics/:topic/subscribers/:user_id", mw.audited(auditTopicUnsubscribe, auditFields), h.removeTopicSubscriber)
}

// validateCampaign checks every field and returns the campaign to record (and,
// for an inline audience, its user ids).
func validateCampaign(tenantID string, req createCampaignRequest) (store.Campaign, []string, *httpError) {
	out := store.Campaign{TenantID: tenantID, Status: herald.CampaignScheduled}
	id, err := campaignID(req)
	if err != nil {
		return out, nil, err
	}
	out.ID, out.WorkflowID = id, ids.CampaignWorkflowID(tenantID, id)
	if out.TemplateID, err = requireTemplateID(req.TemplateID); err != nil {
		return out, nil, err
	}
	channels, err := validChannels(req.Channels)
	if err != nil {
		return out, nil, err
	}
	data, err := decodeData(req.Data)
	if err != nil {
		return out, nil, err
	}
	raw, merr := json.Marshal(data)
	if merr != nil {
		return out, nil, badField("data", "invalid_field", "data cannot be encoded: %v", merr)
	}
	if len(raw) > contract.MaxCampaignDataBytes {
		return out, nil, badField("data", "data_too_large", "data is %d bytes as JSON; a campaign's data is at most %d (%d KiB), as a single notification's: put per-recipient values in an uploaded list's columns",
			len(raw), contract.MaxCampaignDataBytes, contract.MaxCampaignDataBytes>>10)
	}
	out.Data = raw
	sendAt, err := parseSendAt(req.SendAt, time.Now())
	if err != nil {
		return out, nil, err
	}
	if !sendAt.ahead.IsZero() {
		out.SendAt = &sendAt.ahead
	}
	if r := req.RatePerSecond; r != nil {
		if math.IsNaN(*r) || *r < 1 || *r > maxCampaignRate {
			return out, nil, badField("rate_per_second", "invalid_field", "rate_per_second must be a number from 1 to %d (recipients per second)", maxCampaignRate)
		}
		out.RatePerSecond = *r
	}
	inline, err := validAudience(req.Audience, &out)
	if err != nil {
		return out, nil, err
	}
	out.Channels = channels
	return out, inline, nil
}

// campaignID is the campaign's id: the client's campaign_id, one derived from
// its idempotency_key, or a new random one.
func campaignID(req createCampaignRequest) (string, *httpError) {
	switch {
	case req.CampaignID != nil && req.IdempotencyKey != nil:
		return "", badField("idempotency_key", "conflicting_field", "give campaign_id or idempotency_key, not both")
	case req.CampaignID != nil:
		if err := validID("campaign_id", *req.CampaignID); err != nil {
			return "", err
		}
		return *req.CampaignID, nil
	case req.IdempotencyKey != nil:
		if err := validID("idempotency_key", *req.IdempotencyKey); err != nil {
			return "", err
		}
		return ids.CampaignIDFromKey(*req.IdempotencyKey), nil
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return ids.CampaignIDPrefix + hex.EncodeToString(b[:]), nil
}

// validAudience checks the audience, which names exactly one of user_ids,
// list_id, topic or all_users, and sets the campaign's audience kind and
// reference; it returns an inline audience's user ids, each once.
func validAudience(a *audienceRequest, out *store.Campaign) ([]string, *httpError) {
	if a == nil {
		return nil, badField("audience", "missing_field", "audience is required: one of user_ids, list_id, topic or all_users")
	}
	given := 0
	for _, set := range []bool{a.UserIDs != nil, a.ListID != nil, a.Topic != nil, a.AllUsers != nil} {
		if set {
			given++
		}
	}
	if given != 1 {
		return nil, badField("audience", "invalid_field", "audience must have exactly one of user_ids, list_id, topic or all_users")
	}
	switch {
	case a.UserIDs != nil:
		inline, err := inlineAudience(a.UserIDs)
		if err != nil {
			return nil, err
		}
		out.AudienceKind, out.AudienceRef = herald.AudienceUserIDs, out.ID
		return inline, nil
	case a.ListID != nil:
		if err := validID("audience.list_id", *a.ListID); err != nil {
			return nil, err
		}
		out.AudienceKind, out.AudienceRef = herald.AudienceList, *a.ListID
	case a.Topic != nil:
		if err := validTopic("audience.topic", *a.Topic); err != nil {
			return nil, err
		}
		out.AudienceKind, out.AudienceRef = herald.AudienceTopic, *a.Topic
	default:
		if !*a.AllUsers {
			return nil, badField("audience.all_users", "invalid_field", "audience.all_users must be true when given")
		}
		out.AudienceKind = herald.AudienceAllUsers
	}
	return nil, nil
}

// inlineAudience checks audience.user_ids (1 to maxInlineRecipients) and drops
// repeats.
func inlineAudience(userIDs []string) ([]string, *httpError) {
	switch {
	case len(userIDs) == 0:
		return nil, badField("audience.user_ids", "empty_audience", "audience.user_ids must name at least one user")
	case len(userIDs) > maxInlineRecipients:
		return nil, badField("audience.user_ids", "too_many_recipients",
			"audience.user_ids names %d users; at most %d inline: upload a list (POST /v1/lists) or use a topic", len(userIDs), maxInlineRecipients)
	}
	var inline []string
	uniq := map[string]bool{}
	for i, u := range userIDs {
		if err := validID("audience.user_ids["+itoa(i)+"]", u); err != nil {
			return nil, err
		}
		if !uniq[u] {
			uniq[u] = true
			inline = append(inline, u)
		}
	}
	return inline, nil
}

// checkCampaignTemplate pins the template's latest version, fills in its
// channels when the request named none and checks the campaign's data renders
// every channel (for audiences without per-recipient data, which could supply
// what is missing), in the tenant's default locale.
func (h *campaignsRoom) checkCampaignTemplate(c *gin.Context, cp *store.Campaign) error {
	ctx := c.Request.Context()
	t, err := h.templates.forSend(ctx, cp.TenantID, cp.TemplateID)
	if err != nil {
		return err
	}
	if t.Critical {
		return &httpError{Status: http.StatusUnprocessableEntity, Code: "critical_template", Field: "template_id",
			Message: "template " + t.ID + " is critical; campaigns send on the bulk lane and honour every preference: use POST /v1/notifications for critical messages"}
	}
	if cp.Channels, err = templateChannels(t, cp.Channels); err != nil {
		return err
	}
	if cp.AudienceKind != herald.AudienceList {
		var data templates.Data
		if err := json.Unmarshal(cp.Data, &data); err != nil {
			return err
		}
		if err := checkContent(ctx, h.settings, cp.TenantID, t, cp.Channels, "", data); err != nil {
			return err
		}
	}
	cp.TemplateVersion, cp.Category = t.Version, t.Category
	return nil
}

// checkAudience refuses an unknown list or topic, and an audience with no user;
// it returns the audience's size as far as it is known now (an inline
// audience's distinct ids, a list's known members, a topic's subscribers, the
// tenant's users when count is set; -1 for all users otherwise).
func (h *campaignsRoom) checkAudience(c *gin.Context, cp store.Campaign, inline []string, count bool) (int64, error) {
	ctx := c.Request.Context()
	switch cp.AudienceKind {
	case herald.AudienceUserIDs:
		return int64(len(inline)), nil
	case herald.AudienceList:
		l, err := h.store.GetList(ctx, cp.TenantID, cp.AudienceRef)
		if errors.Is(err, herald.ErrNotFound) || (err == nil && l.Kind != herald.ListUploaded) {
			return 0, &httpError{Status: http.StatusUnprocessableEntity, Code: "unknown_list", Field: "audience.list_id",
				Message: "list " + cp.AudienceRef + " does not exist; upload it with POST /v1/lists"}
		}
		if err != nil {
			return 0, err
		}
		if l.MemberCount-l.UnknownCount == 0 {
			return 0, &httpError{Status: http.StatusUnprocessableEntity, Code: "empty_audience", Field: "audience.list_id",
				Message: "list " + cp.AudienceRef + " names no existing user"}
		}
		return l.MemberCount - l.UnknownCount, nil
	case herald.AudienceTopic:
		n, err := h.store.CountTopicSubscribers(ctx, cp.TenantID, cp.AudienceRef)
		if errors.Is(err, herald.ErrNotFound) {
			return 0, &httpError{Status: http.StatusUnprocessableEntity, Code: "unknown_topic", Field: "audience.topic",
				Message: "topic " + cp.AudienceRef + " does not exist; add subscribers with POST /v1/topics/{topic}/subscribers"}
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, &httpError{Status: http.StatusUnprocessableEntity, Code: "empty_audience", Field: "audience.topic",
				Message: "topic " + cp.AudienceRef + " has no subscribers"}
		}
		return n, nil
	}
	if !count {
		return -1, nil
	}
	n, _, err := h.store.CountAudience(ctx, cp.TenantID, herald.AudienceAllUsers, "")
	return n, err
}

// limitsFor is the tenant's effective limits (its own over the defaults).
func (h *campaignsRoom) limitsFor(ctx context.Context, tenantID string) (TenantLimits, error) {
	ts, err := h.settings.get(ctx, tenantID)
	if err != nil {
		return h.limits, err
	}
	return h.limits.over(ts.Limits()), nil
}

// checkCampaignLimits refuses a campaign whose audience is over the operator's
// cap (422 audience_too_large) or, when it sends today, does not fit what is
// left of the tenant's daily quota (429 daily_quota_exceeded, Retry-After until
// the quota resets). The quota is reserved when the campaign starts
// (activities.CampaignStart): this check refuses what cannot fit at once, so a
// tenant whose quota is spent learns it from the 429, not from a failed
// campaign.
func (h *campaignsRoom) checkCampaignLimits(c *gin.Context, l TenantLimits, cp store.Campaign, size int64) error {
	if l.MaxAudienceSize > 0 && size > l.MaxAudienceSize {
		return &httpError{Status: http.StatusUnprocessableEntity, Code: "audience_too_large", Field: "audience",
			Message: fmt.Sprintf("the audience has %d users; the operator allows at most %d per campaign", size, l.MaxAudienceSize)}
	}
	now := time.Now().UTC()
	if l.DailyQuota <= 0 || h.limiter == nil || size < 0 || (cp.SendAt != nil && !sameUTCDay(*cp.SendAt, now)) {
		return nil
	}
	used, err := h.limiter.QuotaUsed(c.Request.Context(), ratelimit.TenantDayQuotaKey(cp.TenantID), now)
	if err != nil {
		return err
	}
	if int64(used)+size > int64(l.DailyQuota) {
		resetAt := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
		c.Header("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(resetAt.Sub(now))))
		return &httpError{Status: http.StatusTooManyRequests, Code: "daily_quota_exceeded", Field: "audience",
			Message: fmt.Sprintf("the audience of %d users does not fit the daily quota of %d (%d counted today); it resets at %s",
				size, l.DailyQuota, used, resetAt.Format(time.RFC3339))}
	}
	return nil
}

func sameUTCDay(a, b time.Time) bool {
	return a.UTC().Truncate(24 * time.Hour).Equal(b.UTC().Truncate(24 * time.Hour))
}

// createCampaign accepts a campaign: the row (with an inline audience's ids) is
// recorded, then its workflow is started; 202 only once the start returned, so
// an accepted campaign cannot be lost. The same campaign key again answers 200
// with the campaign it names (Layer 1), after making sure its workflow runs.
func (h *campaignsRoom) createCampaign(c *gin.Context) {
	var req createCampaignRequest
	if err := decodeJSONLimit(c, &req, maxCampaignBodyBytes); err != nil {
		h.abort(c, err)
		return
	}
	cp, inline, verr := validateCampaign(tenantOf(c).ID, req)
	if verr != nil {
		h.abort(c, verr)
		return
	}
	ctx := c.Request.Context()
	if existing, err := h.store.GetCampaign(ctx, cp.TenantID, cp.ID); err == nil {
		h.startCampaign(c, existing, false)
		return
	} else if !errors.Is(err, herald.ErrNotFound) {
		h.abort(c, err)
		return
	}
	if err := h.checkCampaignTemplate(c, &cp); err != nil {
		h.abort(c, err)
		return
	}
	limits, err := h.limitsFor(ctx, cp.TenantID)
	if err != nil {
		h.abort(c, err)
		return
	}
	size, err := h.checkAudience(c, cp, inline, limits.MaxAudienceSize > 0 || limits.DailyQuota > 0)
	if err == nil {
		err = h.checkCampaignLimits(c, limits, cp, size)
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	rec, created, err := h.store.CreateCampaign(ctx, cp, inline, limits.MaxConcurrentCampaigns)
	if errors.Is(err, store.ErrTooManyCampaigns) && h.reconcileActive(ctx, cp.TenantID, limits.MaxConcurrentCampaigns) {
		rec, created, err = h.store.CreateCampaign(ctx, cp, inline, limits.MaxConcurrentCampaigns)
	}
	if errors.Is(err, store.ErrTooManyCampaigns) {
		c.Header("Retry-After", "60")
		h.abort(c, &httpError{Status: http.StatusTooManyRequests, Code: "too_many_campaigns",
			Message: fmt.Sprintf("the tenant has %d campaigns scheduled, running or paused, the most the operator allows at once; retry when one has finished (or cancel one)", limits.MaxConcurrentCampaigns)})
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	h.startCampaign(c, rec, created)
}

// reconcileActive looks at the tenant's unfinished campaigns (up to max) in
// Temporal and ends failed those whose workflow has ended (reconcile); it
// reports whether it ended any, so a slot is free again.
func (h *campaignsRoom) reconcileActive(ctx context.Context, tenantID string, max int) bool {
	cps, err := h.store.ActiveCampaigns(ctx, tenantID, max)
	if err != nil {
		h.log.Warn("reading the tenant's unfinished campaigns failed", "tenant_id", tenantID, "error", err)
		return false
	}
	freed := false
	for _, cp := range cps {
		if now := h.reconcile(ctx, cp, true); herald.CampaignFinal(now.Status) {
			freed = true
		}
	}
	return freed
}

// reconcile makes an unfinished campaign's status agree with its workflow: a
// campaign whose workflow has ended without finishing it (terminated by an
// operator or by Temporal's history limits, timed out, failed) sends nothing
// any more, so it is ended failed, reason workflow_ended, instead of showing
// running for ever. A campaign without any workflow a minute after it was
// recorded (its start failed and the client never retried) is ended the same
// way. The workflow records every status it reaches itself; this only catches
// a workflow that could not. Unless force, a campaign found running is not
// asked about again for reconcileEvery. Errors leave the campaign as it is.
func (h *campaignsRoom) reconcile(ctx context.Context, cp store.Campaign, force bool) store.Campaign {
	if herald.CampaignFinal(cp.Status) {
		return cp
	}
	key := cp.TenantID + "\x00" + cp.ID
	if _, seen := h.reconciled.Get(key); seen && !force {
		return cp
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ended, how, err := h.workflows.CampaignRunEnded(dctx, cp.WorkflowID)
	var msg string
	switch {
	case errors.Is(err, workflows.ErrRunNotFound) && time.Since(cp.CreatedAt) > time.Minute:
		msg = "the campaign's workflow was never started (or is gone), so nothing sends it; create it again"
	case err != nil:
		if !errors.Is(err, workflows.ErrRunNotFound) {
			h.log.Warn("describing a campaign's workflow failed", "workflow_id", cp.WorkflowID, "error", err)
		}
		return cp
	case !ended:
		h.reconciled.Add(key, struct{}{})
		return cp
	default:
		msg = "the campaign's workflow ended (" + how + ") before the campaign finished; nothing more is sent"
	}
	if _, err := h.store.FailCampaign(ctx, cp.TenantID, cp.ID, herald.CampaignWorkflowEnded, msg); err != nil {
		h.log.Warn("recording a campaign whose workflow ended failed", "workflow_id", cp.WorkflowID, "error", err)
		return cp
	}
	h.log.Warn("campaign workflow ended without finishing the campaign; recorded failed", "tenant_id", cp.TenantID,
		"campaign_id", cp.ID, "workflow", how)
	if now, err := h.store.GetCampaign(ctx, cp.TenantID, cp.ID); err == nil {
		return now
	}
	return cp
}

// campaignInput is the workflow input of a recorded campaign, with the
// tenant's limits as it is accepted (the data stays in the campaign's row:
// activities read it by the campaign's id).
func campaignInput(cp store.Campaign, l TenantLimits) workflows.CampaignInput {
	in := workflows.CampaignInput{
		Spec: contract.CampaignSpec{TenantID: cp.TenantID, CampaignID: cp.ID, WorkflowID: cp.WorkflowID, TemplateID: cp.TemplateID,
			TemplateVersion: cp.TemplateVersion, Category: cp.Category, Channels: cp.Channels,
			AudienceKind: cp.AudienceKind, AudienceRef: cp.AudienceRef,
			DailyQuota: l.DailyQuota, MaxAudience: l.MaxAudienceSize},
		RatePerSecond: cp.RatePerSecond,
	}
	if cp.SendAt != nil {
		in.SendAt = *cp.SendAt
	}
	return in
}

// startCampaign makes sure the campaign's workflow runs and answers 202 for a
// campaign just created, 200 for one the request named again.
func (h *campaignsRoom) startCampaign(c *gin.Context, cp store.Campaign, created bool) {
	if herald.CampaignFinal(cp.Status) {
		// Finished (a failed one included): never started again.
		c.JSON(http.StatusOK, gin.H{"campaign_id": cp.ID, "status": cp.Status, "dedup": "duplicate"})
		return
	}
	limits, err := h.limitsFor(c.Request.Context(), cp.TenantID)
	if err != nil {
		h.abort(c, err)
		return
	}
	in := campaignInput(cp, limits)
	in.PageSize, in.Window, in.Spec.InDoubtWait = h.cfg.PageSize, h.cfg.Window, h.cfg.InDoubtWait
	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	if err := h.workflows.StartCampaign(ctx, in); err != nil {
		h.log.Error("starting campaign workflow failed", "workflow_id", cp.WorkflowID, "error", err)
		c.Header("Retry-After", "1")
		h.abort(c, &httpError{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable",
			Message: "the campaign was not started; retry with the same campaign_id or idempotency_key"})
		return
	}
	if created {
		c.JSON(http.StatusAccepted, gin.H{"campaign_id": cp.ID, "status": cp.Status, "dedup": "new"})
		return
	}
	c.JSON(http.StatusOK, gin.H{"campaign_id": cp.ID, "status": cp.Status, "dedup": "duplicate"})
}

// channelCounts are one channel's deliveries by outcome.
type channelCounts struct {
	Queued       int64                   `json:"queued"`
	Deferred     int64                   `json:"deferred"`
	Retrying     int64                   `json:"retrying"`
	Sent         int64                   `json:"sent"`
	Delivered    int64                   `json:"delivered"`
	Suppressed   map[herald.Reason]int64 `json:"suppressed"`
	Failed       int64                   `json:"failed"`
	DeadLettered int64                   `json:"dead_lettered"`
	Cancelled    int64                   `json:"cancelled"`
}

type campaignView struct {
	CampaignID    string                            `json:"campaign_id"`
	Status        string                            `json:"status"`
	TemplateID    string                            `json:"template_id"`
	Channels      []herald.Channel                  `json:"channels"`
	Audience      gin.H                             `json:"audience"`
	RatePerSecond *float64                          `json:"rate_per_second"`
	SendAt        *time.Time                        `json:"send_at"`
	CreatedAt     time.Time                         `json:"created_at"`
	StartedAt     *time.Time                        `json:"started_at"`
	FinishedAt    *time.Time                        `json:"finished_at"`
	WorkflowID    string                            `json:"workflow_id"`
	Processed     int64                             `json:"recipients_processed"`
	Counts        map[herald.Channel]*channelCounts `json:"counts"`
	CurrentRate   float64                           `json:"current_rate"`
	ETASeconds    *int64                            `json:"eta_seconds"`
	// Failure says why a failed campaign failed (absent otherwise).
	Failure *campaignFailure `json:"failure,omitempty"`
}

type campaignFailure struct {
	Reason  herald.Reason `json:"reason"`
	Message string        `json:"message"`
}

func viewCampaign(cp store.Campaign) campaignView {
	v := campaignView{CampaignID: cp.ID, Status: cp.Status, TemplateID: cp.TemplateID, Channels: cp.Channels,
		SendAt: cp.SendAt, CreatedAt: cp.CreatedAt.UTC(), StartedAt: cp.StartedAt, FinishedAt: cp.FinishedAt, WorkflowID: cp.WorkflowID,
		Audience: gin.H{"kind": cp.AudienceKind, "size": cp.AudienceSize, "unknown_users": cp.UnknownUsers}}
	switch cp.AudienceKind {
	case herald.AudienceList:
		v.Audience["list_id"] = cp.AudienceRef
	case herald.AudienceTopic:
		v.Audience["topic"] = cp.AudienceRef
	}
	if cp.RatePerSecond > 0 {
		r := cp.RatePerSecond
		v.RatePerSecond = &r
	}
	if cp.FailureReason != nil {
		v.Failure = &campaignFailure{Reason: *cp.FailureReason}
		if cp.FailureMessage != nil {
			v.Failure.Message = *cp.FailureMessage
		}
	}
	return v
}

// campaignWithCounts adds the live counts, rate and ETA.
func (h *campaignsRoom) campaignWithCounts(ctx context.Context, cp store.Campaign) (campaignView, error) {
	v := viewCampaign(cp)
	counts, processed, err := h.store.CampaignCounts(ctx, cp.TenantID, cp.ID)
	if err != nil {
		return v, err
	}
	v.Processed = processed
	v.Counts = map[herald.Channel]*channelCounts{}
	var notYet int64
	if cp.AudienceSize != nil && *cp.AudienceSize > processed && !herald.CampaignFinal(cp.Status) {
		notYet = *cp.AudienceSize - processed
	}
	for _, ch := range cp.Channels {
		v.Counts[ch] = &channelCounts{Queued: notYet, Suppressed: map[herald.Reason]int64{}}
	}
	for _, n := range counts {
		cc := v.Counts[n.Channel]
		if cc == nil {
			continue
		}
		switch n.Status {
		case herald.DeliveryPending:
			cc.Queued += n.Count
		case herald.DeliverySending:
			if n.Reason == herald.ReasonRetrying {
				cc.Retrying += n.Count
			} else {
				cc.Queued += n.Count
			}
		case herald.DeliveryScheduled:
			cc.Deferred += n.Count
		case herald.DeliverySent:
			cc.Sent += n.Count
		case herald.DeliveryDelivered:
			cc.Delivered += n.Count
		case herald.DeliverySuppressed:
			cc.Suppressed[n.Reason] += n.Count
		case herald.DeliveryFailed:
			if n.Reason == herald.ReasonDeadLettered {
				cc.DeadLettered += n.Count
			} else {
				cc.Failed += n.Count
			}
		case herald.DeliveryCancelled:
			cc.Cancelled += n.Count
		}
	}
	if cp.StartedAt != nil && processed > 0 {
		end := time.Now()
		if cp.FinishedAt != nil {
			end = *cp.FinishedAt
		}
		if secs := end.Sub(*cp.StartedAt).Seconds(); secs > 0 {
			v.CurrentRate = math.Round(float64(processed)/secs*10) / 10
		}
		if v.CurrentRate > 0 && notYet > 0 && cp.Status == herald.CampaignRunning {
			eta := int64(math.Ceil(float64(notYet) / v.CurrentRate))
			v.ETASeconds = &eta
		}
	}
	return v, nil
}

func (h *campaignsRoom) getCampaign(c *gin.Context) {
	cp, err := h.store.GetCampaign(c.Request.Context(), tenantOf(c).ID, c.Param("campaign_id"))
	if errors.Is(err, herald.ErrNotFound) {
		h.abort(c, notFound("campaign"))
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	cp = h.reconcile(c.Request.Context(), cp, false)
	v, err := h.campaignWithCounts(c.Request.Context(), cp)
	if err != nil {
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

// listCampaigns pages the tenant's campaigns, newest first (no counts: GET one
// campaign for those). The unfinished ones are reconciled as GET one is (a
// describe each at most every reconcileEvery; the operator's cap on unfinished
// campaigns bounds how many a page has).
func (h *campaignsRoom) listCampaigns(c *gin.Context) {
	limit, cur, ok, verr := pageRequest(c, "campaigns")
	if verr != nil {
		h.abort(c, verr)
		return
	}
	var after *store.CampaignCursor
	if ok {
		after = &store.CampaignCursor{CreatedAt: time.UnixMicro(cur.At), ID: cur.Key}
	}
	cps, more, err := h.store.ListCampaigns(c.Request.Context(), tenantOf(c).ID, after, limit)
	if err != nil {
		h.abort(c, err)
		return
	}
	items := make([]campaignView, 0, len(cps))
	for _, cp := range cps {
		items = append(items, viewCampaign(h.reconcile(c.Request.Context(), cp, false)))
	}
	var next *string
	if more {
		last := cps[len(cps)-1]
		next = encodePageCursor(pageCursor{List: "campaigns", At: last.CreatedAt.UnixMicro(), Key: last.ID})
	}
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next})
}

// controlCampaign runs a pause, resume or cancel update on the campaign's
// workflow: the workflow decides (so a control never races a batch) and the
// answer is the campaign as it is now. A finished campaign answers 409.
func (h *campaignsRoom) controlCampaign(update string) gin.HandlerFunc {
	return func(c *gin.Context) {
		tenantID := tenantOf(c).ID
		id := c.Param("campaign_id")
		cp, err := h.store.GetCampaign(c.Request.Context(), tenantID, id)
		if errors.Is(err, herald.ErrNotFound) {
			h.abort(c, notFound("campaign"))
			return
		}
		if err != nil {
			h.abort(c, err)
			return
		}
		ctx, cancel := context.WithTimeout(c.Request.Context(), 15*time.Second)
		defer cancel()
		st, err := h.workflows.ControlCampaign(ctx, cp.WorkflowID, update)
		switch {
		case errors.Is(err, workflows.ErrCampaignFinal):
			cp, _ = h.store.GetCampaign(c.Request.Context(), tenantID, id)
			h.abort(c, &httpError{Status: http.StatusConflict, Code: "campaign_finished", Message: "the campaign has finished (" + cp.Status + ")"})
			return
		case err != nil:
			h.abort(c, temporalError(c, err))
			return
		}
		if cp, err = h.store.GetCampaign(c.Request.Context(), tenantID, id); err != nil {
			h.abort(c, err)
			return
		}
		v, err := h.campaignWithCounts(c.Request.Context(), cp)
		if err != nil {
			h.abort(c, err)
			return
		}
		v.Status = st.Status
		c.JSON(http.StatusOK, v)
	}
}
