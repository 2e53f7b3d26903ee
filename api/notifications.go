package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/gin-gonic/gin"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/workflows"
)

// Dedup window bounds for dedup_ttl_sec.
const (
	MinDedupTTL = time.Second
	MaxDedupTTL = 7 * 24 * time.Hour
)

// knownChannels are the channels Herald delivers; anything else is rejected, never dropped.
var knownChannels = []string{herald.ChannelInApp, herald.ChannelEmail, herald.ChannelSMS, herald.ChannelPush}

// Memo keys set at start.
const (
	memoUser     = "user_id"
	memoTemplate = "template_id"
	memoChannels = "channels"
	// memoBodyHash is the hex body hash (see bodyHash) the key was accepted with:
	// the durable copy of notification_dedup.body_hash, read by a duplicate that
	// reaches PostgreSQL before the original's ledger row does.
	memoBodyHash = "body_hash"
)

type createNotificationRequest struct {
	UserID     *string  `json:"user_id"`
	TemplateID *string  `json:"template_id"`
	Channels   []string `json:"channels"`
	// Data is decoded by decodeData, which names the path of what it refuses.
	Data           json.RawMessage `json:"data"`
	IdempotencyKey *string         `json:"idempotency_key"`
	DedupTTLSec    *int64          `json:"dedup_ttl_sec"`
	SendAt         *string         `json:"send_at"`
	Priority       *string         `json:"priority"`
}

// MaxScheduleAhead bounds send_at.
const MaxScheduleAhead = 366 * 24 * time.Hour

// acceptedNotification is a validated request, ready to start.
type acceptedNotification struct {
	input workflows.NotificationInput
	key   ids.KeyHash
	lane  string
	// clientKey: the key was the client's. input.BodyHash identifies the
	// request body; a duplicate whose hash differs is a reused key (422).
	clientKey string
}

func (s *Server) validateNotification(c *gin.Context, req createNotificationRequest) (acceptedNotification, *Error) {
	var out acceptedNotification
	if req.UserID == nil {
		return out, badField("user_id", "missing_field", "user_id is required")
	}
	if err := validID("user_id", *req.UserID); err != nil {
		return out, err
	}
	if req.TemplateID == nil {
		return out, badField("template_id", "missing_field", "template_id is required")
	}
	if err := validTemplateID(*req.TemplateID); err != nil {
		return out, err
	}
	if req.Channels != nil && len(req.Channels) == 0 {
		return out, badField("channels", "invalid_field", "channels must list at least one of %v, or be left out for the template's channels", knownChannels)
	}
	seen := map[string]bool{}
	for i, ch := range req.Channels {
		field := "channels[" + itoa(i) + "]"
		switch {
		case !contains(knownChannels, ch):
			return out, badField(field, "unknown_channel", "unknown channel %q; channels are %v", ch, knownChannels)
		case seen[ch]:
			return out, badField(field, "duplicate_channel", "channel %q is listed twice", ch)
		}
		seen[ch] = true
	}
	window := s.cfg.DefaultDedupWindow
	if req.DedupTTLSec != nil {
		ttl := time.Duration(*req.DedupTTLSec) * time.Second
		if *req.DedupTTLSec < int64(MinDedupTTL/time.Second) || *req.DedupTTLSec > int64(MaxDedupTTL/time.Second) {
			return out, badField("dedup_ttl_sec", "invalid_field", "dedup_ttl_sec must be between 1 and %d seconds", int64(MaxDedupTTL/time.Second))
		}
		window = ttl
	}
	data, derr := decodeData(req.Data)
	if derr != nil {
		return out, derr
	}
	idemKey := c.GetHeader("Idempotency-Key")
	if req.IdempotencyKey != nil {
		if idemKey != "" && idemKey != *req.IdempotencyKey {
			return out, badField("idempotency_key", "conflicting_idempotency_key", "the Idempotency-Key header and idempotency_key differ")
		}
		idemKey = *req.IdempotencyKey
		if idemKey == "" {
			return out, badField("idempotency_key", "invalid_field", "idempotency_key must not be empty when given")
		}
	}
	if idemKey != "" {
		if err := validID("idempotency_key", idemKey); err != nil {
			return out, err
		}
		out.key = ids.IdempotencyKeyHash(idemKey)
		out.clientKey = idemKey
	} else {
		k, err := ids.ContentKeyHash(*req.UserID, *req.TemplateID, data)
		if err != nil {
			return out, badField("data", "invalid_field", "data cannot be encoded: %v", err)
		}
		out.key = k
	}
	var sendAt, sendAtParsed time.Time
	if req.SendAt != nil {
		t, err := time.Parse(time.RFC3339, *req.SendAt)
		if err != nil {
			return out, badField("send_at", "invalid_field", "send_at must be an RFC 3339 time such as 2026-12-24T18:00:00Z")
		}
		sendAtParsed = t
		if t.After(time.Now().Add(MaxScheduleAhead)) {
			return out, badField("send_at", "invalid_field", "send_at must be at most a year ahead")
		}
		if t.After(time.Now()) { // a time in the past means now
			sendAt = t.UTC()
		}
	}
	out.lane = workflows.LaneNormal
	if req.Priority != nil {
		switch *req.Priority {
		case workflows.LaneNormal, workflows.LaneBulk:
			out.lane = *req.Priority
		default:
			return out, badField("priority", "invalid_field", "priority must be normal or bulk (critical templates always use the critical lane)")
		}
	}
	// Channels in a canonical order so a resubmission in another order is equal.
	channels := append([]string(nil), req.Channels...)
	sort.Strings(channels)
	var hash []byte
	if out.clientKey != "" {
		h, err := bodyHash(*req.UserID, *req.TemplateID, data, channels, req.Channels != nil, req.SendAt != nil, sendAtParsed)
		if err != nil {
			return out, badField("data", "invalid_field", "data cannot be encoded: %v", err)
		}
		hash = h
	} else {
		// A content-derived key is a hash of user, template and data: a duplicate
		// has the same content by construction, so its "body" is the key itself.
		hash = append([]byte(nil), out.key[:]...)
	}
	out.input = workflows.NotificationInput{
		TenantID: tenantOf(c).ID, UserID: *req.UserID, TemplateID: *req.TemplateID,
		Channels: channels, Data: data, DedupWindow: window, SendAt: sendAt, BodyHash: hash,
	}
	return out, nil
}

// createNotification accepts a notification by starting its workflow. A start that
// returns is durable in Temporal, so 202 is only ever sent for work that cannot be
// lost; a start rejected as "already started" is a duplicate inside the window.
func (s *Server) createNotification(c *gin.Context) {
	seenAt := time.Now()
	var req createNotificationRequest
	if err := decodeJSON(c, &req); err != nil {
		s.rejectAccept(c, err)
		return
	}
	acc, verr := s.validateNotification(c, req)
	if verr != nil {
		s.rejectAccept(c, verr)
		return
	}
	in := acc.input
	if s.answerFromLedger(c, acc, seenAt) {
		return
	}
	userLocale, exists, err := s.userLocale(c, in.TenantID, in.UserID)
	if err != nil {
		s.rejectAccept(c, err)
		return
	}
	if !exists {
		s.rejectAccept(c, &Error{Status: http.StatusUnprocessableEntity, Code: "unknown_user", Field: "user_id",
			Message: "user " + in.UserID + " does not exist; create it with PUT /v1/users/{user_id}"})
		return
	}
	if err := s.applyTemplate(c, &in, req.Channels == nil, userLocale); err != nil {
		s.rejectAccept(c, err)
		return
	}
	if n := contract.PayloadSize(in); n < 0 || n > contract.MaxWorkflowInputBytes {
		s.rejectAccept(c, &Error{Status: http.StatusUnprocessableEntity, Code: "content_too_large", Field: "data",
			Message: fmt.Sprintf("the notification is %d bytes as its workflow carries it (JSON-encoded); the limit is %d bytes (%d KiB)",
				n, contract.MaxWorkflowInputBytes, contract.MaxWorkflowInputBytes>>10)})
		return
	}

	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	workflowID := ids.NotificationWorkflowID(in.TenantID, acc.key)
	lane := acc.lane
	if in.Critical {
		lane = workflows.LaneCritical
	}
	run, err := s.temporal.ExecuteWorkflow(ctx, StartOptions(workflowID, workflows.LaneTaskQueue(s.cfg.TaskQueue, lane), in), workflows.NotificationWorkflow, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case err == nil:
		c.Set(acceptLaneKey, lane)
		// The start is the acceptance. The workflow's first activity writes the
		// ledger row with the notification, in the same statement; until then a
		// duplicate is answered by the start and the memo's body hash.
		id := ids.NotificationID(acc.key, run.GetRunID())
		status := herald.NotificationQueued
		if !in.SendAt.IsZero() {
			status = herald.NotificationScheduled
		}
		s.answerAccept(c, AcceptNew, http.StatusAccepted, gin.H{
			"notification_id": id,
			"status":          status,
			"dedup":           "new",
		})
	case errors.As(err, &already):
		s.duplicate(c, acc, workflowID, already.RunId, seenAt)
	default:
		s.log.Error("starting notification workflow failed", "workflow_id", workflowID, "error", err)
		c.Header("Retry-After", "1")
		s.answerAccept(c, AcceptUnavailable, http.StatusServiceUnavailable, &Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable",
			Message: "the notification was not accepted; retry with the same idempotency_key"})
	}
}

// applyTemplate pins the template's latest version to the notification, fills in
// its channels when the request named none, and rejects channels the template has
// no content for, data that lacks a variable the template needs, and every
// channel that cannot render the data or renders too large to carry, at submit
// time rather than at delivery.
func (s *Server) applyTemplate(c *gin.Context, in *workflows.NotificationInput, defaultChannels bool, userLocale string) error {
	rec, err := s.latestTemplate(c.Request.Context(), in.TenantID, in.TemplateID)
	if errors.Is(err, herald.ErrNotFound) {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "unknown_template", Field: "template_id",
			Message: "template " + in.TemplateID + " does not exist; create it with PUT /v1/templates/{template_id}"}
	}
	if err != nil {
		return err
	}
	t := rec.Template
	if defaultChannels {
		in.Channels = t.Channels()
	}
	for i, ch := range in.Channels {
		if !t.HasChannel(ch) {
			return &Error{Status: http.StatusUnprocessableEntity, Code: "channel_not_in_template", Field: "channels[" + itoa(i) + "]",
				Message: fmt.Sprintf("template %s has no %s content; it has %v", t.ID, ch, t.Channels())}
		}
	}
	if missing := templates.MissingVariables(t, "", in.Data, in.Channels...); len(missing) > 0 {
		return missingVariablesError(missing)
	}
	ts, err := s.cachedSettings(c, in.TenantID)
	if err != nil {
		return err
	}
	// Render every channel now, exactly as the worker will: the same template
	// version, the same data (json.Number and all) and the same locale
	// resolution, with the user's current locale. A deterministic failure is
	// known here, so it is a 422 naming the channel instead of an accepted
	// notification that fails later; content over contract.MaxRenderedBytes
	// would otherwise make Temporal terminate the run (no status, no dead letter,
	// dedup key released). The worker checks again, for a locale changed since.
	locale := templates.ResolveLocale(userLocale, t.AvailableLocales(), ts.DefaultLocale)
	for _, ch := range in.Channels {
		if _, err := checkRender(t, ch, locale, in.Data); err != nil {
			return err
		}
	}
	in.TemplateVersion, in.Category, in.Critical = t.Version, t.Category, t.Critical && s.criticalAllowed(c, in.TenantID)
	return nil
}

// checkRender renders one channel and answers what a delivery would meet: 422
// render_failed, or 422 content_too_large over contract.MaxRenderedBytes, both
// naming the channel.
func checkRender(t templates.Template, ch, locale string, data templates.Data) (templates.Rendered, *Error) {
	r, err := templates.Render(t, ch, locale, data)
	if err != nil {
		return r, &Error{Status: http.StatusUnprocessableEntity, Code: "render_failed", Field: "data", Channel: ch,
			Message: ch + ": " + err.Error()}
	}
	var big *contract.ContentTooLargeError
	if err := contract.CheckRendered(r); errors.As(err, &big) {
		return r, &Error{Status: http.StatusUnprocessableEntity, Code: "content_too_large", Field: "data", Channel: ch,
			Message: big.Error()}
	}
	return r, nil
}

// latestTemplate is the template's latest version, cached for TemplateCacheTTL.
func (s *Server) latestTemplate(ctx context.Context, tenantID, templateID string) (store.TemplateRecord, error) {
	key := tenantID + "/" + templateID
	if rec, ok := s.templates.Get(key); ok {
		return rec, nil
	}
	rec, err := s.store.GetTemplate(ctx, tenantID, templateID, 0)
	if err == nil {
		s.templates.Add(key, rec)
	}
	return rec, err
}

// Context keys through which the accept path tells countSubmission what
// became of the submission: the outcome (answerAccept) and a new one's lane.
const (
	acceptOutcomeKey = "herald.accept_outcome"
	acceptLaneKey    = "herald.accept_lane"
)

// countSubmission records what became of a submission: accepted (by lane), a
// duplicate, or rejected by its error code (validation, rate limits,
// idempotency_key_reused, temporarily_unavailable).
func (s *Server) countSubmission(c *gin.Context) {
	c.Next()
	tenant := tenantOf(c).ID
	switch outcome := c.GetString(acceptOutcomeKey); {
	case outcome == AcceptNew:
		s.cfg.Metrics.Accepted(tenant, c.GetString(acceptLaneKey))
	case outcome == AcceptDuplicate:
		s.cfg.Metrics.Duplicate(tenant)
	case c.Writer.Status() >= http.StatusBadRequest:
		code := c.GetString(errorCodeKey)
		if code == "" {
			code = "unknown"
		}
		s.cfg.Metrics.Rejected(tenant, code)
	}
}

// StartOptions are the start options of a notification workflow. The ID conflict
// policy FAIL (with the error surfaced) is the duplicate check while a run is open;
// the reuse policy ALLOW_DUPLICATE makes the same key a new notification once the
// run, and so its dedup window, has closed.
// The input's body hash goes into the memo with the user, template and channels.
func StartOptions(workflowID, taskQueue string, in workflows.NotificationInput) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                                       workflowID,
		TaskQueue:                                taskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		// The memo lets a status read answer before the first activity has run.
		Memo: map[string]any{memoUser: in.UserID, memoTemplate: in.TemplateID, memoChannels: in.Channels, memoBodyHash: hex.EncodeToString(in.BodyHash)},
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.SearchAttrTenant.ValueSet(in.TenantID),
			workflows.SearchAttrUser.ValueSet(in.UserID),
			workflows.SearchAttrStatus.ValueSet(herald.NotificationQueued),
		),
	}
}

// Accept outcomes: every answer of POST /v1/notifications past validation goes
// through answerAccept with one of these (the one place to count them).
const (
	AcceptNew         = "new"
	AcceptDuplicate   = "duplicate"
	AcceptKeyReused   = "idempotency_key_reused"
	AcceptUnavailable = "unavailable"
	AcceptRejected    = "rejected"
)

// answerAccept writes the accept path's answer for outcome (the one place a
// counter of accept outcomes hooks in; the tenant limits' 429 is answered by the
// limitTenant middleware before).
func (s *Server) answerAccept(c *gin.Context, outcome string, status int, body any) {
	c.Set(acceptOutcomeKey, outcome) // countSubmission turns it into the metrics
	if e, ok := body.(error); ok {
		s.abort(c, e)
		return
	}
	c.JSON(status, body)
}

// rejectAccept answers a submission refused before any dedup decision (bad
// input, unknown user or template, content that cannot be delivered, a
// database error).
func (s *Server) rejectAccept(c *gin.Context, err error) {
	s.answerAccept(c, AcceptRejected, 0, err)
}

// duplicate answers a submission that hit an open dedup window: with the
// original's id, status and acceptance time when its body is the original's
// (counted in the ledger, in the same PostgreSQL round trip that reads the
// original), or 422 idempotency_key_reused when it is not. Temporal is asked only
// while the original is nothing but a workflow start: its workflow has not
// recorded it yet (the acceptance time), or its ledger row is not written yet (the
// body hash, from the memo).
func (s *Server) duplicate(c *gin.Context, acc acceptedNotification, workflowID, runID string, seenAt time.Time) {
	ctx := c.Request.Context()
	tenantID := tenantOf(c).ID
	id := ids.NotificationID(acc.key, runID)
	o, err := s.store.RecordDuplicate(ctx, tenantID, id, acc.key.String(), acc.input.BodyHash, seenAt)
	if err != nil {
		s.abort(c, err)
		return
	}
	if !o.Counted {
		s.keyReused(c, acc, id)
		return
	}
	status, acceptedAt := o.Status, o.AcceptedAt
	if status == "" || !o.BodyKnown {
		desc, derr := s.temporal.DescribeWorkflow(ctx, workflowID, runID)
		if derr != nil {
			s.abort(c, temporalError(c, derr))
			return
		}
		info := desc.RawResponse.GetWorkflowExecutionInfo()
		if status == "" {
			// The original's first activity has not run yet: it is queued, accepted
			// when its workflow started (PostgreSQL keeps microseconds; answer the
			// same instant either way).
			status = herald.NotificationQueued
			acceptedAt = info.GetStartTime().AsTime().Truncate(time.Microsecond)
		}
		if !o.BodyKnown {
			original := acc.input.BodyHash // a run started without the memo field: nothing to compare
			var hexHash string
			if p := info.GetMemo().GetFields()[memoBodyHash]; p != nil && converter.GetDefaultDataConverter().FromPayload(p, &hexHash) == nil {
				if h, herr := hex.DecodeString(hexHash); herr == nil {
					original = h
				}
			}
			if err := s.store.SettleDuplicate(ctx, tenantID, id, original, acc.input.BodyHash); err != nil {
				s.abort(c, err)
				return
			}
			if !bytes.Equal(original, acc.input.BodyHash) {
				s.keyReused(c, acc, id)
				return
			}
		}
	}
	s.answerAccept(c, AcceptDuplicate, http.StatusOK, gin.H{
		"notification_id":      id,
		"status":               status,
		"dedup":                "duplicate",
		"original_accepted_at": acceptedAt.UTC(),
	})
}

// LedgerMargin: the ledger answers a duplicate by itself only while its window
// ends more than this far ahead (clock skew between API hosts, the database and
// Temporal); closer to the end, and for windows shorter than this, the workflow
// start decides.
const LedgerMargin = 5 * time.Second

// answerFromLedger answers a submission from the dedup ledger alone — one
// PostgreSQL round trip, no Temporal call, nothing rendered — when the ledger
// proves its key's window is open: the original's row has its body hash, its
// workflow has recorded it, and the window ends more than LedgerMargin from now.
// An identical body is a duplicate (counted in that round trip), another body
// 422. It reports whether it answered; when not (a new key, a window about to
// end, the original not recorded yet, or the ledger unreachable) the workflow
// start decides, as before. The start remains the acceptance: a ledger row is
// only written after a start succeeded, so no answer from it can stand for work
// that is not durable. What it changes: within a window, a run an operator
// terminated in Temporal still answers its duplicates (the window is the
// client's contract, counted from acceptance), where the start alone would
// accept the key anew.
func (s *Server) answerFromLedger(c *gin.Context, acc acceptedNotification, seenAt time.Time) bool {
	a, err := s.store.AnswerFromLedger(c.Request.Context(), acc.input.TenantID, acc.key.String(), acc.input.BodyHash, seenAt, LedgerMargin)
	if err != nil {
		if c.Request.Context().Err() == nil {
			s.log.Warn("the dedup ledger could not answer; the workflow start decides", "error", err)
		}
		return false
	}
	switch a.Outcome {
	case store.LedgerDuplicate:
		s.answerAccept(c, AcceptDuplicate, http.StatusOK, gin.H{
			"notification_id":      a.NotificationID,
			"status":               a.Status,
			"dedup":                "duplicate",
			"original_accepted_at": a.AcceptedAt.UTC(),
		})
		return true
	case store.LedgerReused:
		s.keyReused(c, acc, a.NotificationID)
		return true
	}
	return false
}

// keyReused answers 422 idempotency_key_reused: the key was accepted with another
// body during its window.
func (s *Server) keyReused(c *gin.Context, acc acceptedNotification, id string) {
	s.answerAccept(c, AcceptKeyReused, http.StatusUnprocessableEntity, &Error{Status: http.StatusUnprocessableEntity,
		Code: "idempotency_key_reused", Field: "idempotency_key",
		Message: fmt.Sprintf("idempotency_key %q was already used for notification %s with a different body (user_id, template_id, data, channels or send_at); "+
			"resend that body to get the original, or use a new key for a new notification", acc.clientKey, id)})
}

// bodyHash is the SHA-256 of the canonical form of what makes a submission the
// same notification: user, template, data (keys sorted at every depth, numbers as
// written), the channels (sorted; "absent" differs from any list) and send_at
// (the instant, whatever its notation; "absent" differs from any time).
func bodyHash(userID, templateID string, data map[string]any, channels []string, hasChannels, hasSendAt bool, sendAt time.Time) ([]byte, error) {
	body := map[string]any{"user_id": userID, "template_id": templateID, "data": data}
	if hasChannels {
		list := make([]any, len(channels))
		for i, ch := range channels {
			list[i] = ch
		}
		body["channels"] = list
	}
	if hasSendAt {
		body["send_at"] = sendAt.UTC().Format(time.RFC3339Nano)
	}
	canon, err := ids.CanonicalJSON(body)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("body|"), canon...))
	return sum[:], nil
}

// channelView is a channel's delivery record with its provider attempts.
type channelView struct {
	store.Delivery
	// History is every provider attempt with its outcome and error, oldest first.
	History []store.Attempt `json:"history"`
}

type notificationView struct {
	NotificationID string        `json:"notification_id"`
	UserID         string        `json:"user_id"`
	TemplateID     string        `json:"template_id"`
	Status         string        `json:"status"`
	AcceptedAt     time.Time     `json:"accepted_at"`
	UpdatedAt      time.Time     `json:"updated_at"`
	WorkflowID     string        `json:"workflow_id"`
	RunID          string        `json:"run_id"`
	Channels       []channelView `json:"channels"`
	dedupView
}

// dedupView is what Layer 1 saw of a notification's key during its window (the
// dedup ledger): how many submissions it suppressed, the first and the latest.
type dedupView struct {
	DedupKeyHash         string     `json:"dedup_key_hash"`
	DedupUntil           *time.Time `json:"dedup_until"`
	DuplicatesSuppressed int        `json:"duplicates_suppressed"`
	FirstSeenAt          time.Time  `json:"first_seen_at"`
	LastSeenAt           time.Time  `json:"last_seen_at"`
}

// newDedupView is d's view; a notification without a ledger row (started by a
// redrive, or accepted before the ledger existed) was seen once, when accepted.
func newDedupView(keyHash string, d *store.Dedup, acceptedAt time.Time) dedupView {
	if d == nil {
		return dedupView{DedupKeyHash: keyHash, FirstSeenAt: acceptedAt.UTC(), LastSeenAt: acceptedAt.UTC()}
	}
	v := dedupView{DedupKeyHash: keyHash, DuplicatesSuppressed: d.Duplicates, FirstSeenAt: d.FirstSeenAt.UTC(), LastSeenAt: d.LastSeenAt.UTC()}
	if d.DedupUntil != nil {
		u := d.DedupUntil.UTC()
		v.DedupUntil = &u
	}
	return v
}

// getNotification reads the status from PostgreSQL; for a notification accepted a
// moment ago whose first activity has not run yet, it asks the workflow instead, so
// an id returned by a 202 is never a 404.
func (s *Server) getNotification(c *gin.Context) {
	id := c.Param("notification_id")
	key, runID, err := ids.ParseNotificationID(id)
	if err != nil {
		s.abort(c, badField("notification_id", "invalid_field", "notification_id is not a Herald notification id"))
		return
	}
	tenantID := tenantOf(c).ID
	n, err := s.store.GetNotification(c.Request.Context(), tenantID, id)
	if err == nil {
		v, herr := s.withHistory(c.Request.Context(), tenantID, viewFromStore(n))
		if herr != nil {
			s.abort(c, herr)
			return
		}
		c.JSON(http.StatusOK, v)
		return
	}
	if !errors.Is(err, herald.ErrNotFound) {
		s.abort(c, err)
		return
	}
	workflowID := ids.NotificationWorkflowID(tenantID, key)
	view, err := s.viewFromWorkflow(c.Request.Context(), workflowID, runID, id)
	if err == nil {
		d, derr := s.store.GetDedup(c.Request.Context(), tenantID, id)
		switch {
		case derr == nil:
			view.dedupView = newDedupView(key.String(), &d, view.AcceptedAt)
		case errors.Is(derr, herald.ErrNotFound):
			view.dedupView = newDedupView(key.String(), nil, view.AcceptedAt)
		default:
			s.abort(c, derr)
			return
		}
	}
	var nf *serviceerror.NotFound
	var invalid *serviceerror.InvalidArgument
	if errors.As(err, &nf) || errors.As(err, &invalid) {
		s.abort(c, notFound("notification"))
		return
	}
	if err != nil {
		s.abort(c, temporalError(c, err))
		return
	}
	c.JSON(http.StatusOK, view)
}

func viewFromStore(n store.Notification) notificationView {
	v := notificationView{
		NotificationID: n.ID, UserID: n.UserID, TemplateID: n.TemplateID, Status: n.Status,
		AcceptedAt: n.AcceptedAt.UTC(), UpdatedAt: n.UpdatedAt.UTC(), WorkflowID: n.WorkflowID, RunID: n.RunID,
		Channels: []channelView{}, dedupView: newDedupView(n.DedupKeyHash, n.Dedup, n.AcceptedAt),
	}
	for _, d := range n.Deliveries {
		v.Channels = append(v.Channels, channelView{Delivery: d, History: []store.Attempt{}})
	}
	return v
}

// withHistory adds each channel's provider attempts.
func (s *Server) withHistory(ctx context.Context, tenantID string, v notificationView) (notificationView, error) {
	hist, err := s.store.ListAttempts(ctx, tenantID, v.NotificationID)
	if err != nil {
		return v, err
	}
	for i := range v.Channels {
		if h := hist[v.Channels[i].Channel]; h != nil {
			v.Channels[i].History = h
		}
	}
	return v, nil
}

// viewFromWorkflow describes a notification whose first activity has not written
// its row yet: it is queued, and the start's memo says for whom and on which channels.
func (s *Server) viewFromWorkflow(ctx context.Context, workflowID, runID, id string) (notificationView, error) {
	desc, err := s.temporal.DescribeWorkflow(ctx, workflowID, runID)
	if err != nil {
		return notificationView{}, err
	}
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	started := info.GetStartTime().AsTime().UTC().Truncate(time.Microsecond)
	v := notificationView{
		NotificationID: id, Status: herald.NotificationQueued, AcceptedAt: started, UpdatedAt: started,
		WorkflowID: workflowID, RunID: runID, Channels: []channelView{},
	}
	dc := converter.GetDefaultDataConverter()
	fields := info.GetMemo().GetFields()
	var channels []string
	if err := errors.Join(
		dc.FromPayload(fields[memoUser], &v.UserID),
		dc.FromPayload(fields[memoTemplate], &v.TemplateID),
		dc.FromPayload(fields[memoChannels], &channels),
	); err != nil {
		return notificationView{}, fmt.Errorf("decode memo of %s: %w", workflowID, err)
	}
	for _, ch := range channels {
		v.Channels = append(v.Channels, channelView{Delivery: store.Delivery{Channel: ch, Status: herald.DeliveryPending, UpdatedAt: started},
			History: []store.Attempt{}})
	}
	return v, nil
}

// temporalError turns "Temporal is unreachable" into a 503 the client can retry.
func temporalError(c *gin.Context, err error) error {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	if errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.Is(err, context.DeadlineExceeded) {
		c.Header("Retry-After", "1")
		return &Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable", Message: "Temporal is unreachable; retry shortly"}
	}
	return err
}
