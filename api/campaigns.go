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
	"sort"
	"time"

	"github.com/gin-gonic/gin"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/workflows"
)

// Campaign bounds.
const (
	// MaxInlineRecipients bounds audience.user_ids; larger audiences are
	// uploaded as a list (POST /v1/lists) or managed as a topic.
	MaxInlineRecipients = 10_000
	// MaxCampaignBodyBytes bounds POST /v1/campaigns (10,000 ids of up to 255
	// bytes, JSON-quoted, plus 64 KiB of data).
	MaxCampaignBodyBytes = 3 << 20
	// MaxCampaignRate bounds rate_per_second (recipients per second).
	MaxCampaignRate = 100_000
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

// validateCampaign checks every field and returns the campaign to record (and,
// for an inline audience, its user ids).
func (s *Server) validateCampaign(c *gin.Context, req createCampaignRequest) (store.Campaign, []string, *Error) {
	tenantID := tenantOf(c).ID
	out := store.Campaign{TenantID: tenantID, Status: herald.CampaignScheduled}
	switch {
	case req.CampaignID != nil && req.IdempotencyKey != nil:
		return out, nil, badField("idempotency_key", "conflicting_field", "give campaign_id or idempotency_key, not both")
	case req.CampaignID != nil:
		if err := validID("campaign_id", *req.CampaignID); err != nil {
			return out, nil, err
		}
		out.ID = *req.CampaignID
	case req.IdempotencyKey != nil:
		if err := validID("idempotency_key", *req.IdempotencyKey); err != nil {
			return out, nil, err
		}
		out.ID = ids.CampaignIDFromKey(*req.IdempotencyKey)
	default:
		var b [16]byte
		_, _ = rand.Read(b[:])
		out.ID = ids.CampaignIDPrefix + hex.EncodeToString(b[:])
	}
	out.WorkflowID = ids.CampaignWorkflowID(tenantID, out.ID)
	if req.TemplateID == nil {
		return out, nil, badField("template_id", "missing_field", "template_id is required")
	}
	if err := validTemplateID(*req.TemplateID); err != nil {
		return out, nil, err
	}
	out.TemplateID = *req.TemplateID
	if req.Channels != nil && len(req.Channels) == 0 {
		return out, nil, badField("channels", "invalid_field", "channels must list at least one of %v, or be left out for the template's channels", knownChannels)
	}
	seen := map[string]bool{}
	for i, ch := range req.Channels {
		field := "channels[" + itoa(i) + "]"
		switch {
		case !contains(knownChannels, ch):
			return out, nil, badField(field, "unknown_channel", "unknown channel %q; channels are %v", ch, knownChannels)
		case seen[ch]:
			return out, nil, badField(field, "duplicate_channel", "channel %q is listed twice", ch)
		}
		seen[ch] = true
	}
	data, derr := decodeData(req.Data)
	if derr != nil {
		return out, nil, derr
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return out, nil, badField("data", "invalid_field", "data cannot be encoded: %v", err)
	}
	out.Data = raw
	if req.SendAt != nil {
		t, err := time.Parse(time.RFC3339, *req.SendAt)
		if err != nil {
			return out, nil, badField("send_at", "invalid_field", "send_at must be an RFC 3339 time such as 2026-12-24T18:00:00Z")
		}
		if t.After(time.Now().Add(MaxScheduleAhead)) {
			return out, nil, badField("send_at", "invalid_field", "send_at must be at most a year ahead")
		}
		if t.After(time.Now()) {
			t = t.UTC()
			out.SendAt = &t
		}
	}
	if r := req.RatePerSecond; r != nil {
		if math.IsNaN(*r) || *r < 1 || *r > MaxCampaignRate {
			return out, nil, badField("rate_per_second", "invalid_field", "rate_per_second must be a number from 1 to %d (recipients per second)", MaxCampaignRate)
		}
		out.RatePerSecond = *r
	}
	var inline []string
	a := req.Audience
	if a == nil {
		return out, nil, badField("audience", "missing_field", "audience is required: one of user_ids, list_id, topic or all_users")
	}
	given := 0
	for _, set := range []bool{a.UserIDs != nil, a.ListID != nil, a.Topic != nil, a.AllUsers != nil} {
		if set {
			given++
		}
	}
	if given != 1 {
		return out, nil, badField("audience", "invalid_field", "audience must have exactly one of user_ids, list_id, topic or all_users")
	}
	switch {
	case a.UserIDs != nil:
		switch {
		case len(a.UserIDs) == 0:
			return out, nil, badField("audience.user_ids", "empty_audience", "audience.user_ids must name at least one user")
		case len(a.UserIDs) > MaxInlineRecipients:
			return out, nil, badField("audience.user_ids", "too_many_recipients",
				"audience.user_ids names %d users; at most %d inline: upload a list (POST /v1/lists) or use a topic", len(a.UserIDs), MaxInlineRecipients)
		}
		uniq := map[string]bool{}
		for i, u := range a.UserIDs {
			if err := validID("audience.user_ids["+itoa(i)+"]", u); err != nil {
				return out, nil, err
			}
			if !uniq[u] {
				uniq[u] = true
				inline = append(inline, u)
			}
		}
		out.AudienceKind, out.AudienceRef = herald.AudienceUserIDs, out.ID
	case a.ListID != nil:
		if err := validID("audience.list_id", *a.ListID); err != nil {
			return out, nil, err
		}
		out.AudienceKind, out.AudienceRef = herald.AudienceList, *a.ListID
	case a.Topic != nil:
		if err := validTopic("audience.topic", *a.Topic); err != nil {
			return out, nil, err
		}
		out.AudienceKind, out.AudienceRef = herald.AudienceTopic, *a.Topic
	default:
		if !*a.AllUsers {
			return out, nil, badField("audience.all_users", "invalid_field", "audience.all_users must be true when given")
		}
		out.AudienceKind = herald.AudienceAllUsers
	}
	channels := append([]string(nil), req.Channels...)
	sort.Strings(channels)
	out.Channels = channels
	return out, inline, nil
}

// checkCampaignTemplate pins the template's latest version, fills in its
// channels when the request named none and checks the campaign's data renders
// every channel (for audiences without per-recipient data, which could supply
// what is missing).
func (s *Server) checkCampaignTemplate(c *gin.Context, cp *store.Campaign) error {
	rec, err := s.latestTemplate(c.Request.Context(), cp.TenantID, cp.TemplateID)
	if errors.Is(err, herald.ErrNotFound) {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "unknown_template", Field: "template_id",
			Message: "template " + cp.TemplateID + " does not exist; create it with PUT /v1/templates/{template_id}"}
	}
	if err != nil {
		return err
	}
	t := rec.Template
	if t.Critical {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "critical_template", Field: "template_id",
			Message: "template " + t.ID + " is critical; campaigns send on the bulk lane and honour every preference: use POST /v1/notifications for critical messages"}
	}
	if len(cp.Channels) == 0 {
		cp.Channels = t.Channels()
	}
	for i, ch := range cp.Channels {
		if !t.HasChannel(ch) {
			return &Error{Status: http.StatusUnprocessableEntity, Code: "channel_not_in_template", Field: "channels[" + itoa(i) + "]",
				Message: fmt.Sprintf("template %s has no %s content; it has %v", t.ID, ch, t.Channels())}
		}
	}
	if cp.AudienceKind != herald.AudienceList {
		var data templates.Data
		if err := json.Unmarshal(cp.Data, &data); err != nil {
			return err
		}
		if missing := templates.MissingVariables(t, "", data, cp.Channels...); len(missing) > 0 {
			return missingVariablesError(missing)
		}
		ts, err := s.cachedSettings(c, cp.TenantID)
		if err != nil {
			return err
		}
		locale := templates.ResolveLocale("", t.AvailableLocales(), ts.DefaultLocale)
		for _, ch := range cp.Channels {
			if _, err := checkRender(t, ch, locale, data); err != nil {
				return err
			}
		}
	}
	cp.TemplateVersion, cp.Category = t.Version, t.Category
	return nil
}

// checkAudience refuses an unknown list or topic, and an audience with no user.
func (s *Server) checkAudience(c *gin.Context, cp store.Campaign) error {
	ctx := c.Request.Context()
	switch cp.AudienceKind {
	case herald.AudienceList:
		l, err := s.store.GetList(ctx, cp.TenantID, cp.AudienceRef)
		if errors.Is(err, herald.ErrNotFound) || (err == nil && l.Kind != herald.ListUploaded) {
			return &Error{Status: http.StatusUnprocessableEntity, Code: "unknown_list", Field: "audience.list_id",
				Message: "list " + cp.AudienceRef + " does not exist; upload it with POST /v1/lists"}
		}
		if err != nil {
			return err
		}
		if l.MemberCount-l.UnknownCount == 0 {
			return &Error{Status: http.StatusUnprocessableEntity, Code: "empty_audience", Field: "audience.list_id",
				Message: "list " + cp.AudienceRef + " names no existing user"}
		}
	case herald.AudienceTopic:
		n, err := s.store.CountTopicSubscribers(ctx, cp.TenantID, cp.AudienceRef)
		if errors.Is(err, herald.ErrNotFound) {
			return &Error{Status: http.StatusUnprocessableEntity, Code: "unknown_topic", Field: "audience.topic",
				Message: "topic " + cp.AudienceRef + " does not exist; add subscribers with POST /v1/topics/{topic}/subscribers"}
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return &Error{Status: http.StatusUnprocessableEntity, Code: "empty_audience", Field: "audience.topic",
				Message: "topic " + cp.AudienceRef + " has no subscribers"}
		}
	}
	return nil
}

// createCampaign accepts a campaign: the row (with an inline audience's ids) is
// recorded, then its workflow is started; 202 only once the start returned, so
// an accepted campaign cannot be lost. The same campaign key again answers 200
// with the campaign it names (Layer 1), after making sure its workflow runs.
func (s *Server) createCampaign(c *gin.Context) {
	var req createCampaignRequest
	if err := decodeJSONLimit(c, &req, MaxCampaignBodyBytes); err != nil {
		s.abort(c, err)
		return
	}
	cp, inline, verr := s.validateCampaign(c, req)
	if verr != nil {
		s.abort(c, verr)
		return
	}
	ctx := c.Request.Context()
	if existing, err := s.store.GetCampaign(ctx, cp.TenantID, cp.ID); err == nil {
		s.startCampaign(c, existing, false)
		return
	} else if !errors.Is(err, herald.ErrNotFound) {
		s.abort(c, err)
		return
	}
	if err := s.checkCampaignTemplate(c, &cp); err != nil {
		s.abort(c, err)
		return
	}
	if err := s.checkAudience(c, cp); err != nil {
		s.abort(c, err)
		return
	}
	rec, created, err := s.store.CreateCampaign(ctx, cp, inline)
	if err != nil {
		s.abort(c, err)
		return
	}
	s.startCampaign(c, rec, created)
}

// CampaignInput is the workflow input of a recorded campaign.
func CampaignInput(cp store.Campaign) (workflows.CampaignInput, error) {
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

// CampaignStartOptions start a campaign's workflow on the bulk lane. Starting
// again while it runs attaches to it (USE_EXISTING); a finished campaign is
// never started again (REJECT_DUPLICATE).
func CampaignStartOptions(cp store.Campaign, baseTaskQueue string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       cp.WorkflowID,
		TaskQueue:                workflows.LaneTaskQueue(baseTaskQueue, workflows.LaneBulk),
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.SearchAttrTenant.ValueSet(cp.TenantID),
			workflows.SearchAttrCampaign.ValueSet(cp.ID),
			workflows.SearchAttrStatus.ValueSet(herald.CampaignScheduled),
		),
	}
}

func (s *Server) startCampaign(c *gin.Context, cp store.Campaign, created bool) {
	in, err := CampaignInput(cp)
	if err != nil {
		s.abort(c, err)
		return
	}
	in.PageSize, in.Window, in.Spec.InDoubtWait = s.cfg.CampaignPageSize, s.cfg.CampaignWindow, s.cfg.CampaignInDoubtWait
	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	_, err = s.temporal.ExecuteWorkflow(ctx, CampaignStartOptions(cp, s.cfg.TaskQueue), workflows.CampaignWorkflow, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &already) {
		s.log.Error("starting campaign workflow failed", "workflow_id", cp.WorkflowID, "error", err)
		c.Header("Retry-After", "1")
		s.abort(c, &Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable",
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
	Queued       int64            `json:"queued"`
	Deferred     int64            `json:"deferred"`
	Retrying     int64            `json:"retrying"`
	Sent         int64            `json:"sent"`
	Delivered    int64            `json:"delivered"`
	Suppressed   map[string]int64 `json:"suppressed"`
	Failed       int64            `json:"failed"`
	DeadLettered int64            `json:"dead_lettered"`
	Cancelled    int64            `json:"cancelled"`
}

type campaignView struct {
	CampaignID    string                    `json:"campaign_id"`
	Status        string                    `json:"status"`
	TemplateID    string                    `json:"template_id"`
	Channels      []string                  `json:"channels"`
	Audience      gin.H                     `json:"audience"`
	RatePerSecond *float64                  `json:"rate_per_second"`
	SendAt        *time.Time                `json:"send_at"`
	CreatedAt     time.Time                 `json:"created_at"`
	StartedAt     *time.Time                `json:"started_at"`
	FinishedAt    *time.Time                `json:"finished_at"`
	WorkflowID    string                    `json:"workflow_id"`
	Processed     int64                     `json:"recipients_processed"`
	Counts        map[string]*channelCounts `json:"counts"`
	CurrentRate   float64                   `json:"current_rate"`
	ETASeconds    *int64                    `json:"eta_seconds"`
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
func (s *Server) campaignWithCounts(ctx context.Context, cp store.Campaign) (campaignView, error) {
	v := viewCampaign(cp)
	counts, processed, err := s.store.CampaignCounts(ctx, cp.TenantID, cp.ID)
	if err != nil {
		return v, err
	}
	v.Processed = processed
	v.Counts = map[string]*channelCounts{}
	var notYet int64
	if cp.AudienceSize != nil && *cp.AudienceSize > processed && !herald.CampaignFinal(cp.Status) {
		notYet = *cp.AudienceSize - processed
	}
	for _, ch := range cp.Channels {
		v.Counts[ch] = &channelCounts{Queued: notYet, Suppressed: map[string]int64{}}
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

func (s *Server) getCampaign(c *gin.Context) {
	cp, err := s.store.GetCampaign(c.Request.Context(), tenantOf(c).ID, c.Param("campaign_id"))
	if errors.Is(err, herald.ErrNotFound) {
		s.abort(c, notFound("campaign"))
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	v, err := s.campaignWithCounts(c.Request.Context(), cp)
	if err != nil {
		s.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

// listCampaigns pages the tenant's campaigns, newest first (no counts: GET one
// campaign for those).
func (s *Server) listCampaigns(c *gin.Context) {
	limit, verr := pageLimit(c)
	var cur pageCursor
	var ok bool
	if verr == nil {
		cur, ok, verr = readPageCursor(c, "campaigns")
	}
	if verr != nil {
		s.abort(c, verr)
		return
	}
	var after *store.CampaignCursor
	if ok {
		after = &store.CampaignCursor{CreatedAt: time.UnixMicro(cur.At), ID: cur.Key}
	}
	cps, more, err := s.store.ListCampaigns(c.Request.Context(), tenantOf(c).ID, after, limit)
	if err != nil {
		s.abort(c, err)
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
func (s *Server) controlCampaign(update string) gin.HandlerFunc {
	return func(c *gin.Context) {
		tenantID := tenantOf(c).ID
		id := c.Param("campaign_id")
		cp, err := s.store.GetCampaign(c.Request.Context(), tenantID, id)
		if errors.Is(err, herald.ErrNotFound) {
			s.abort(c, notFound("campaign"))
			return
		}
		if err != nil {
			s.abort(c, err)
			return
		}
		ctx, cancel := context.WithTimeout(c.Request.Context(), 15*time.Second)
		defer cancel()
		handle, err := s.temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: cp.WorkflowID, UpdateName: update, WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		var st workflows.CampaignState
		if err == nil {
			err = handle.Get(ctx, &st)
		}
		var appErr *temporal.ApplicationError
		var nf *serviceerror.NotFound
		switch {
		case err == nil:
		case errors.As(err, &appErr) && appErr.Type() == herald.ErrTypeCampaignFinal, errors.As(err, &nf):
			cp, _ = s.store.GetCampaign(c.Request.Context(), tenantID, id)
			s.abort(c, &Error{Status: http.StatusConflict, Code: "campaign_finished", Message: "the campaign has finished (" + cp.Status + ")"})
			return
		default:
			s.abort(c, temporalError(c, err))
			return
		}
		if cp, err = s.store.GetCampaign(c.Request.Context(), tenantID, id); err != nil {
			s.abort(c, err)
			return
		}
		v, err := s.campaignWithCounts(c.Request.Context(), cp)
		if err != nil {
			s.abort(c, err)
			return
		}
		v.Status = st.Status
		c.JSON(http.StatusOK, v)
	}
}
