package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
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
	// bytes, JSON-quoted, plus 64 KiB of data).
	maxCampaignBodyBytes = 3 << 20
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
}

func (h *campaignsRoom) register(v1, public gin.IRouter, mw *middleware) {
	v1.POST("/campaigns", mw.audited(auditCampaignCreate, auditFields), h.createCampaign)
	v1.GET("/campaigns", h.listCampaigns)
	v1.GET("/campaigns/:campaign_id", h.getCampaign)
	v1.POST("/campaigns/:campaign_id/pause", mw.audited(auditCampaignPause, auditFields), h.controlCampaign(workflows.UpdatePause))
	v1.POST("/campaigns/:campaign_id/resume", mw.audited(auditCampaignResume, auditFields), h.controlCampaign(workflows.UpdateResume))
	v1.POST("/campaigns/:campaign_id/cancel", mw.audited(auditCampaignCancel, auditFields), h.controlCampaign(workflows.UpdateCancelCampaign))
	v1.POST("/lists", mw.audited(auditListCreate, auditUpload), h.createList)
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

// checkAudience refuses an unknown list or topic, and an audience with no user.
func (h *campaignsRoom) checkAudience(c *gin.Context, cp store.Campaign) error {
	ctx := c.Request.Context()
	switch cp.AudienceKind {
	case herald.AudienceList:
		l, err := h.store.GetList(ctx, cp.TenantID, cp.AudienceRef)
		if errors.Is(err, herald.ErrNotFound) || (err == nil && l.Kind != herald.ListUploaded) {
			return &httpError{Status: http.StatusUnprocessableEntity, Code: "unknown_list", Field: "audience.list_id",
				Message: "list " + cp.AudienceRef + " does not exist; upload it with POST /v1/lists"}
		}
		if err != nil {
			return err
		}
		if l.MemberCount-l.UnknownCount == 0 {
			return &httpError{Status: http.StatusUnprocessableEntity, Code: "empty_audience", Field: "audience.list_id",
				Message: "list " + cp.AudienceRef + " names no existing user"}
		}
	case herald.AudienceTopic:
		n, err := h.store.CountTopicSubscribers(ctx, cp.TenantID, cp.AudienceRef)
		if errors.Is(err, herald.ErrNotFound) {
			return &httpError{Status: http.StatusUnprocessableEntity, Code: "unknown_topic", Field: "audience.topic",
				Message: "topic " + cp.AudienceRef + " does not exist; add subscribers with POST /v1/topics/{topic}/subscribers"}
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return &httpError{Status: http.StatusUnprocessableEntity, Code: "empty_audience", Field: "audience.topic",
				Message: "topic " + cp.AudienceRef + " has no subscribers"}
		}
	}
	return nil
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
	if err := h.checkAudience(c, cp); err != nil {
		h.abort(c, err)
		return
	}
	rec, created, err := h.store.CreateCampaign(ctx, cp, inline)
	if err != nil {
		h.abort(c, err)
		return
	}
	h.startCampaign(c, rec, created)
}

// campaignInput is the workflow input of a recorded campaign.
func campaignInput(cp store.Campaign) (workflows.CampaignInput, error) {
	var data templates.Data
	if err := json.Unmarshal(cp.Data, &data); err != nil {
		return workflows.CampaignInput{}, err
	}
	in := workflows.CampaignInput{
		Spec: contract.CampaignSpec{TenantID: cp.TenantID, CampaignID: cp.ID, WorkflowID: cp.WorkflowID, TemplateID: cp.TemplateID,
			TemplateVersion: cp.TemplateVersion, Category: cp.Category, Channels: cp.Channels, Data: data,
			AudienceKind: cp.AudienceKind, AudienceRef: cp.AudienceRef},
		RatePerSecond: cp.RatePerSecond,
	}
	if cp.SendAt != nil {
		in.SendAt = *cp.SendAt
	}
	return in, nil
}

// startCampaign makes sure the campaign's workflow runs and answers 202 for a
// campaign just created, 200 for one the request named again.
func (h *campaignsRoom) startCampaign(c *gin.Context, cp store.Campaign, created bool) {
	in, err := campaignInput(cp)
	if err != nil {
		h.abort(c, err)
		return
	}
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
	v, err := h.campaignWithCounts(c.Request.Context(), cp)
	if err != nil {
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

// listCampaigns pages the tenant's campaigns, newest first (no counts: GET one
// campaign for those).
func (h *campaignsRoom) listCampaigns(c *gin.Context) {
	limit, verr := pageLimit(c)
	var cur pageCursor
	var ok bool
	if verr == nil {
		cur, ok, verr = readPageCursor(c, "campaigns")
	}
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
		items = append(items, viewCampaign(cp))
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
