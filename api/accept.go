package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/workflows"
)

// The accept path: POST /v1/notifications validates the request, answers a
// duplicate from the dedup ledger when it can, checks the user and the template
// and starts the notification's workflow. The start is both the durable
// acceptance and the Layer-1 dedup check.

// Dedup window bounds for dedup_ttl_sec.
const (
	minDedupTTL = time.Second
	maxDedupTTL = 7 * 24 * time.Hour
)

type createNotificationRequest struct {
	UserID     *string `json:"user_id"`
	TemplateID *string `json:"template_id"`
	// FlowID, instead of TemplateID, sends an event of a flow (flow_accept.go).
	FlowID   *string  `json:"flow_id"`
	Channels []string `json:"channels"`
	// Data is decoded by decodeData, which names the path of what it refuses.
	Data           json.RawMessage `json:"data"`
	IdempotencyKey *string         `json:"idempotency_key"`
	DedupTTLSec    *int64          `json:"dedup_ttl_sec"`
	SendAt         *string         `json:"send_at"`
	Priority       *string         `json:"priority"`
	// OrderingKey puts the notification's provider channels in order lanes
	// (docs/ordering.md); absent: the template's ordering, if any.
	OrderingKey *string `json:"ordering_key"`
}

// acceptedNotification is a validated request, ready to start.
type acceptedNotification struct {
	input workflows.NotificationInput
	key   ids.KeyHash
	lane  herald.Lane
	// clientKey: the key was the client's. input.BodyHash identifies the
	// request body; a duplicate whose hash differs is a reused key (422).
	clientKey string
}

// validateNotification checks every field and returns the notification to
// start; the user and the template are checked against the store after the
// ledger had its say (createNotification).
func (h *notificationsRoom) validateNotification(c *gin.Context, req createNotificationRequest) (acceptedNotification, *httpError) {
	var out acceptedNotification
	if req.UserID == nil {
		return out, badField("user_id", "missing_field", "user_id is required")
	}
	if err := validID("user_id", *req.UserID); err != nil {
		return out, err
	}
	templateID, err := requireTemplateID(req.TemplateID)
	if err != nil {
		return out, err
	}
	channels, err := validChannels(req.Channels)
	if err != nil {
		return out, err
	}
	window, err := h.dedupWindow(req.DedupTTLSec)
	if err != nil {
		return out, err
	}
	data, err := decodeData(req.Data)
	if err != nil {
		return out, err
	}
	if out.key, out.clientKey, err = dedupKey(c, req, data); err != nil {
		return out, err
	}
	sendAt, err := parseSendAt(req.SendAt, time.Now())
	if err != nil {
		return out, err
	}
	if out.lane, err = requestedLane(req.Priority); err != nil {
		return out, err
	}
	orderingKey, err := validOrderingKey(req.OrderingKey)
	if err != nil {
		return out, err
	}
	var hash []byte
	if out.clientKey != "" {
		h, herr := bodyHash(*req.UserID, target{templateID: templateID}, data, channels, req.Channels != nil, req.SendAt != nil, sendAt.given, req.OrderingKey)
		if herr != nil {
			return out, badField("data", "invalid_field", "data cannot be encoded: %v", herr)
		}
		hash = h
	} else {
		// A content-derived key is a hash of user, template and data: a duplicate
		// has the same content by construction, so its "body" is the key itself.
		hash = append([]byte(nil), out.key[:]...)
	}
	out.input = workflows.NotificationInput{
		TenantID: tenantOf(c).ID, UserID: *req.UserID, TemplateID: templateID,
		Channels: channels, Data: data, DedupWindow: window, SendAt: sendAt.ahead, BodyHash: hash, OrderingKey: orderingKey,
	}
	return out, nil
}

// validOrderingKey is ordering_key when given: 1 to herald.MaxOrderingKeyLen
// letters, digits, '_', '-', '.', ':' or '/'.
func validOrderingKey(k *string) (string, *httpError) {
	if k == nil {
		return "", nil
	}
	if !herald.IsOrderingKey(*k) {
		return "", badField("ordering_key", "invalid_field", "ordering_key must be 1 to %d letters, digits, '_', '-', '.', ':' or '/'", herald.MaxOrderingKeyLen)
	}
	return *k, nil
}

// dedupWindow is dedup_ttl_sec when given (minDedupTTL to maxDedupTTL), else the
// server's default window.
func (h *notificationsRoom) dedupWindow(ttlSec *int64) (time.Duration, *httpError) {
	if ttlSec == nil {
		return h.defaultDedupWindow, nil
	}
	if *ttlSec < int64(minDedupTTL/time.Second) || *ttlSec > int64(maxDedupTTL/time.Second) {
		return 0, badField("dedup_ttl_sec", "invalid_field", "dedup_ttl_sec must be between 1 and %d seconds", int64(maxDedupTTL/time.Second))
	}
	return time.Duration(*ttlSec) * time.Second, nil
}

// dedupKey is the submission's dedup key: the client's idempotency key (the
// Idempotency-Key header or idempotency_key, which must agree), else one
// derived from user, template and data. clientKey is the client's key ("" for
// a derived one).
func dedupKey(c *gin.Context, req createNotificationRequest, data map[string]any) (key ids.KeyHash, clientKey string, e *httpError) {
	idemKey := c.GetHeader("Idempotency-Key")
	if req.IdempotencyKey != nil {
		if idemKey != "" && idemKey != *req.IdempotencyKey {
			return key, "", badField("idempotency_key", "conflicting_idempotency_key", "the Idempotency-Key header and idempotency_key differ")
		}
		idemKey = *req.IdempotencyKey
		if idemKey == "" {
			return key, "", badField("idempotency_key", "invalid_field", "idempotency_key must not be empty when given")
		}
	}
	if idemKey != "" {
		if err := validID("idempotency_key", idemKey); err != nil {
			return key, "", err
		}
		return ids.IdempotencyKeyHash(idemKey), idemKey, nil
	}
	content := ""
	switch {
	case req.TemplateID != nil:
		content = *req.TemplateID
	case req.FlowID != nil:
		content = flowContentTarget(*req.FlowID)
	}
	key, err := ids.ContentKeyHash(*req.UserID, content, data)
	if err != nil {
		return key, "", badField("data", "invalid_field", "data cannot be encoded: %v", err)
	}
	return key, "", nil
}

// requestedLane is the lane priority asks for (normal when absent); critical
// is the template's to choose, never the request's.
func requestedLane(priority *string) (herald.Lane, *httpError) {
	if priority == nil {
		return herald.LaneNormal, nil
	}
	switch lane := herald.Lane(*priority); lane {
	case herald.LaneNormal, herald.LaneBulk:
		return lane, nil
	}
	return "", badField("priority", "invalid_field", "priority must be normal or bulk (critical templates always use the critical lane)")
}

// createNotification accepts a notification by starting its workflow. A start that
// returns is durable in Temporal, so 202 is only ever sent for work that cannot be
// lost; a start that finds its run already open is a duplicate inside the window.
func (h *notificationsRoom) createNotification(c *gin.Context) {
	seenAt := time.Now()
	var req createNotificationRequest
	if err := decodeJSON(c, &req); err != nil {
		h.rejectAccept(c, err)
		return
	}
	if req.FlowID != nil {
		h.acceptFlowEvent(c, req, seenAt)
		return
	}
	acc, verr := h.validateNotification(c, req)
	if verr != nil {
		h.rejectAccept(c, verr)
		return
	}
	if h.answerFromLedger(c, acc, seenAt) {
		return
	}
	userLocale, exists, err := h.users.userLocale(c, acc.input.TenantID, acc.input.UserID)
	if err != nil {
		h.rejectAccept(c, err)
		return
	}
	if !exists {
		h.rejectAccept(c, &httpError{Status: http.StatusUnprocessableEntity, Code: "unknown_user", Field: "user_id",
			Message: "user " + acc.input.UserID + " does not exist; create it with PUT /v1/users/{user_id}"})
		return
	}
	if err := h.applyTemplate(c, &acc.input, userLocale); err != nil {
		h.rejectAccept(c, err)
		return
	}
	if n := contract.PayloadSize(acc.input); n < 0 || n > contract.MaxWorkflowInputBytes {
		h.rejectAccept(c, &httpError{Status: http.StatusUnprocessableEntity, Code: "content_too_large", Field: "data",
			Message: fmt.Sprintf("the notification is %d bytes as its workflow carries it (JSON-encoded); the limit is %d bytes (%d KiB)",
				n, contract.MaxWorkflowInputBytes, contract.MaxWorkflowInputBytes>>10)})
		return
	}
	h.start(c, acc, seenAt)
}

// dueNumberTimeout bounds the accept path's numbering of a notification in its
// user's due sequence: past it the 202 goes out and the run numbers the
// notification when it records it (a PostgreSQL outage delays accepts by at
// most this, it does not refuse them).
const dueNumberTimeout = 2 * time.Second

// start starts the notification's workflow and answers: 202 for a new one, the
// duplicate's answer for a run already open, 503 when Temporal did not take it.
func (h *notificationsRoom) start(c *gin.Context, acc acceptedNotification, seenAt time.Time) {
	in := acc.input
	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	workflowID := ids.NotificationWorkflowID(in.TenantID, acc.key)
	lane := acc.lane
	if in.Critical {
		lane = herald.LaneCritical
	}
	run, err := h.workflows.StartNotification(ctx, workflowID, lane, in)
	switch {
	case err != nil:
		h.log.Error("starting notification workflow failed", "workflow_id", workflowID, "error", err)
		c.Header("Retry-After", "1")
		h.answerAccept(c, acceptUnavailable, http.StatusServiceUnavailable, &httpError{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable",
			Message: "the notification was not accepted; retry with the same idempotency_key"})
	case run.Existing:
		h.duplicate(c, acc, workflowID, run.RunID, seenAt)
	default:
		c.Set(acceptLaneKey, lane)
		h.claimOrderPlaces(ctx, in, workflowID, run.RunID, ids.NotificationID(acc.key, run.RunID))
		// The start is the acceptance. The workflow's first activity writes the
		// ledger row with the notification, in the same statement; until then a
		// duplicate is answered by the start and the memo's body hash.
		status := herald.NotificationQueued
		if !in.SendAt.IsZero() {
			status = herald.NotificationScheduled
		}
		id := ids.NotificationID(acc.key, run.RunID)
		if h.numberDue && !in.SendAt.After(seenAt) {
			// Due now: number it in the user's due sequence before answering, so a
			// notification submitted after this 202 is numbered after it. If the
			// database cannot, the run's first activity numbers it (later).
			nctx, cancel := context.WithTimeout(ctx, dueNumberTimeout)
			_, err := h.store.AssignDue(nctx, in.TenantID, in.UserID, id)
			cancel()
			if err != nil {
				h.log.Warn("numbering an accepted notification failed; its run will", "notification_id", id, "error", err)
			}
		}
		h.answerAccept(c, acceptNew, http.StatusAccepted, gin.H{
			"notification_id": id,
			"status":          status,
			"dedup":           "new",
		})
	}
}

// applyTemplate pins the template's latest version to the notification, fills in
// its channels when the request named none, and rejects what the template cannot
// deliver (checkContent) at submit time rather than at delivery, rendered with
// the user's current locale. The worker checks again, for a locale changed since.
func (h *notificationsRoom) applyTemplate(c *gin.Context, in *workflows.NotificationInput, userLocale string) error {
	t, err := h.templates.forSend(c.Request.Context(), in.TenantID, in.TemplateID)
	if err != nil {
		return err
	}
	if in.Channels, err = templateChannels(t, in.Channels); err != nil {
		return err
	}
	if err := checkContent(c.Request.Context(), h.settings, in.TenantID, t, in.Channels, userLocale, in.Data); err != nil {
		return err
	}
	in.TemplateVersion, in.Category = t.Version, t.Category
	in.Critical = t.Critical && h.settings.criticalAllowed(c.Request.Context(), h.log, in.TenantID)
	if in.OrderingKey == "" {
		in.OrderingKey = t.Ordering
	}
	if in.OrderingKey != "" {
		in.OrderMaxHold = h.ordering.holdFor(c.Request.Context(), h.settings, h.log, in.TenantID)
	}
	return nil
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
func (h *notificationsRoom) countSubmission(c *gin.Context) {
	c.Next()
	tenant := tenantOf(c).ID
	switch outcome := c.GetString(acceptOutcomeKey); {
	case outcome == acceptNew:
		lane, _ := c.Value(acceptLaneKey).(herald.Lane)
		h.metrics.Accepted(tenant, lane)
	case outcome == acceptDuplicate:
		h.metrics.Duplicate(tenant)
	case c.Writer.Status() >= http.StatusBadRequest:
		code := c.GetString(errorCodeKey)
		if code == "" {
			code = "unknown"
		}
		h.metrics.Rejected(tenant, code)
	}
}

// Accept outcomes: every answer of POST /v1/notifications past validation goes
// through answerAccept with one of these (the one place to count them).
const (
	acceptNew         = "new"
	acceptDuplicate   = "duplicate"
	acceptKeyReused   = "idempotency_key_reused"
	acceptUnavailable = "unavailable"
	acceptRejected    = "rejected"
)

// answerAccept writes the accept path's answer for outcome (the one place a
// counter of accept outcomes hooks in; the tenant limits' 429 is answered by the
// limitTenant middleware before).
func (h *notificationsRoom) answerAccept(c *gin.Context, outcome string, status int, body any) {
	c.Set(acceptOutcomeKey, outcome) // countSubmission turns it into the metrics
	if e, ok := body.(error); ok {
		h.abort(c, e)
		return
	}
	c.JSON(status, body)
}

// rejectAccept answers a submission refused before any dedup decision (bad
// input, unknown user or template, content that cannot be delivered, a
// database error).
func (h *notificationsRoom) rejectAccept(c *gin.Context, err error) {
	h.answerAccept(c, acceptRejected, 0, err)
}

// duplicate answers a submission that hit an open dedup window: with the
// original's id, status and acceptance time when its body is the original's
// (counted in the ledger, in the same PostgreSQL round trip that reads the
// original), or 422 idempotency_key_reused when it is not. Temporal is asked only
// while the original is nothing but a workflow start: its workflow has not
// recorded it yet (the acceptance time), or its ledger row is not written yet (the
// body hash, from the memo).
func (h *notificationsRoom) duplicate(c *gin.Context, acc acceptedNotification, workflowID, runID string, seenAt time.Time) {
	ctx := c.Request.Context()
	tenantID := tenantOf(c).ID
	id := ids.NotificationID(acc.key, runID)
	o, err := h.store.RecordDuplicate(ctx, store.RecordDuplicateParams{
		TenantID: tenantID, NotificationID: id, KeyHash: acc.key.String(), BodyHash: acc.input.BodyHash, SeenAt: seenAt,
	})
	if err != nil {
		h.abort(c, err)
		return
	}
	if !o.Counted {
		h.keyReused(c, acc, id)
		return
	}
	status, acceptedAt := o.Status, o.AcceptedAt
	if status == "" || !o.BodyKnown {
		run, err := h.workflows.DescribeNotification(ctx, workflowID, runID)
		if err != nil {
			h.abort(c, temporalError(c, err))
			return
		}
		if status == "" {
			// The original's first activity has not run yet: it is queued, accepted
			// when its workflow started (PostgreSQL keeps microseconds; answer the
			// same instant either way).
			status = herald.NotificationQueued
			acceptedAt = run.StartedAt.Truncate(time.Microsecond)
		}
		if !o.BodyKnown {
			original := acc.input.BodyHash // a run started without the memo field: nothing to compare
			if run.BodyHash != nil {
				original = run.BodyHash
			}
			if err := h.store.SettleDuplicate(ctx, tenantID, id, original, acc.input.BodyHash); err != nil {
				h.abort(c, err)
				return
			}
			if !bytes.Equal(original, acc.input.BodyHash) {
				h.keyReused(c, acc, id)
				return
			}
		}
	}
	h.answerAccept(c, acceptDuplicate, http.StatusOK, gin.H{
		"notification_id":      id,
		"status":               status,
		"dedup":                "duplicate",
		"original_accepted_at": acceptedAt.UTC(),
	})
}

// ledgerMargin: the ledger answers a duplicate by itself only while its window
// ends more than this far ahead (clock skew between API hosts, the database and
// Temporal); closer to the end, and for windows shorter than this, the workflow
// start decides.
const ledgerMargin = 5 * time.Second

// answerFromLedger answers a submission from the dedup ledger alone — one
// PostgreSQL round trip, no Temporal call, nothing rendered — when the ledger
// proves its key's window is open: the original's row has its body hash, its
// workflow has recorded it, and the window ends more than ledgerMargin from now.
// An identical body is a duplicate (counted in that round trip), another body
// 422. It reports whether it answered; when not (a new key, a window about to
// end, the original not recorded yet, or the ledger unreachable) the workflow
// start decides, as before. The start remains the acceptance: a ledger row is
// only written after a start succeeded, so no answer from it can stand for work
// that is not durable. What it changes: within a window, a run an operator
// terminated in Temporal still answers its duplicates (the window is the
// client's contract, counted from acceptance), where the start alone would
// accept the key anew.
func (h *notificationsRoom) answerFromLedger(c *gin.Context, acc acceptedNotification, seenAt time.Time) bool {
	a, err := h.store.AnswerFromLedger(c.Request.Context(), store.AnswerFromLedgerParams{
		TenantID: acc.input.TenantID, KeyHash: acc.key.String(), BodyHash: acc.input.BodyHash, SeenAt: seenAt, Margin: ledgerMargin,
	})
	if err != nil {
		if c.Request.Context().Err() == nil {
			h.log.Warn("the dedup ledger could not answer; the workflow start decides", "error", err)
		}
		return false
	}
	switch a.Outcome {
	case store.LedgerDuplicate:
		h.answerAccept(c, acceptDuplicate, http.StatusOK, gin.H{
			"notification_id":      a.NotificationID,
			"status":               a.Status,
			"dedup":                "duplicate",
			"original_accepted_at": a.AcceptedAt.UTC(),
		})
		return true
	case store.LedgerReused:
		h.keyReused(c, acc, a.NotificationID)
		return true
	}
	return false
}

// keyReused answers 422 idempotency_key_reused: the key was accepted with another
// body during its window.
func (h *notificationsRoom) keyReused(c *gin.Context, acc acceptedNotification, id string) {
	h.answerAccept(c, acceptKeyReused, http.StatusUnprocessableEntity, &httpError{Status: http.StatusUnprocessableEntity,
		Code: "idempotency_key_reused", Field: "idempotency_key",
		Message: fmt.Sprintf("idempotency_key %q was already used for notification %s with a different body (user_id, template_id or flow_id, data, channels or send_at); "+
			"resend that body to get the original, or use a new key for a new notification", acc.clientKey, id)})
}

// target is what a submission sends: a template, or an event of a flow.
type target struct {
	templateID, flowID string
}

// bodyHash is the SHA-256 of the canonical form of what makes a submission the
// same notification: user, template (or flow), data (keys sorted at every
// depth, numbers as written), the channels (sorted; "absent" differs from any
// list), send_at (the instant, whatever its notation; "absent" differs from
// any time) and ordering_key ("absent" differs from any key).
func bodyHash(userID string, to target, data map[string]any, channels []herald.Channel, hasChannels, hasSendAt bool, sendAt time.Time, orderingKey *string) ([]byte, error) {
	body := map[string]any{"user_id": userID, "data": data}
	if to.flowID != "" {
		body["flow_id"] = to.flowID
	} else {
		body["template_id"] = to.templateID
	}
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
	if orderingKey != nil {
		body["ordering_key"] = *orderingKey
	}
	canon, err := ids.CanonicalJSON(body)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("body|"), canon...))
	return sum[:], nil
}
